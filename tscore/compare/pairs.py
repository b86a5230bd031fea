"""One compared pair as data, and how its cells read: the row model and cell spellings every report shares.

A :class:`PairResult` is the comparison of one orig value with one target
value (two files, two checkpoint parameters, two layer outputs);
:func:`format_number`, :func:`format_ratio` and :func:`format_shape` are how
every table and page shows its numbers: rounded, never cut. A dump
comparison's CSV keeps ptdbg's spellings (:func:`shape_cell`, :func:`percent_cell`),
which its users' scripts read.
"""

from __future__ import annotations

import enum
import math

from pydantic import BaseModel, ConfigDict, Field, computed_field


class PairStatus(str, enum.Enum):
    """What happened to one pair of files."""

    OK = "ok"  # compared; every element within tolerance
    MISMATCH = "mismatch"  # compared; some elements outside tolerance
    DTYPE_MISMATCH = "dtype_mismatch"  # compared in float64, but the source dtypes differ
    SHAPE_MISMATCH = "shape_mismatch"  # shapes differ; values compared flat only when sizes agree
    MISSING = "missing"  # a file on one side has no partner, or a mapped file does not exist
    UNREADABLE = "unreadable"  # corrupt, truncated, pickled or non-numeric file


class PairResult(BaseModel):
    """The comparison of one orig file with one target file."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    orig_name: str | None
    target_name: str | None
    status: PairStatus
    message: str = ""
    orig_shape: tuple[int, ...] | None = None
    target_shape: tuple[int, ...] | None = None
    orig_dtype: str | None = Field(
        default=None, description="source dtype (from tscore_meta.jsonl) or stored dtype"
    )
    target_dtype: str | None = None
    elements: int | None = None
    allclose: bool = False
    ratio_close: float | None = Field(default=None, description="share of elements within tolerance, 0 to 1")
    cosine: float | None = None
    mean_abs_diff: float | None = None
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    orig_nan: int = 0
    orig_inf: int = 0
    target_nan: int = 0
    target_inf: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """True when both files were read, shapes agree and every element is within tolerance."""
        return self.allclose and self.status in (PairStatus.OK, PairStatus.DTYPE_MISMATCH)


def format_number(value: float | None, digits: int = 5) -> str:
    """Round ``value`` for display: fixed point, or scientific when fixed point would hide it."""
    if value is None:
        return "-"
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value == 0 or 10 ** (1 - digits) <= abs(value) < 1e6:
        return f"{value:.{digits}f}"
    return f"{value:.{digits - 2}e}"


def format_ratio(value: float | None) -> str:
    """Show a share in 0..1 as a percentage rounded to two decimals.

    When rounding would show 100.00% although some element failed, more
    decimals are shown (``99.9996%``), so the column never hides a failure.
    """
    if value is None:
        return "-"
    percent = value * 100
    digits = 2
    while value < 1 and round(percent, digits) >= 100 and digits < 12:
        digits += 1
    return f"{percent:.{digits}f}%"


def format_shape(shape: tuple[int, ...] | None) -> str:
    """Show a shape as Python writes a tuple, ``None`` when the file is absent."""
    return str(shape) if shape is not None else "None"


_SHAPES: dict[tuple[int, ...], str] = {}


def shape_cell(shape: tuple[int, ...]) -> str:
    """Spell a shape as ptdbg does (``[8, 16]``); a dump repeats a few shapes many times."""
    text = _SHAPES.get(shape)
    if text is None:
        text = str(list(shape))
        if len(_SHAPES) < 4096:
            _SHAPES[shape] = text
    return text


def percent_cell(value: float | None) -> str:
    """Spell a relative difference as a percentage (``0%``, ``0.0015%``), ``inf``/``nan``, or ``N/A``."""
    if value is None:
        return "N/A"
    if value == 0.0:  # most rows of two runs that agree
        return "0%"
    if not math.isfinite(value):
        return "inf" if value > 0 else "nan"
    return f"{value * 100:.6g}%"


def pair_label(pair: PairResult) -> str:
    """Name a pair by its orig name, and its target name when that differs."""
    if pair.orig_name == pair.target_name or not pair.target_name:
        return str(pair.orig_name)
    return f"{pair.orig_name} / {pair.target_name}"


def divergence_line(pair: PairResult) -> str:
    """Name the first pair that differs and how, for the line under a table and the page's summary."""
    label = pair_label(pair)
    status = pair.status.value.replace("_", " ")
    if pair.max_abs_diff is None:
        return f"first divergence: {label} ({status}{': ' + pair.message if pair.message else ''})"
    return (
        f"first divergence: {label} ({status}, max abs diff {format_number(pair.max_abs_diff)}, max rel "
        f"diff {format_number(pair.max_rel_diff)}): look at what computes it in the target run"
    )
