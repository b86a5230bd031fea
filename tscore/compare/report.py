"""The result of a comparison as data, and its renderings: table, CSV and JSON.

One :class:`CompareReport` holds a :class:`PairResult` per file pair. The
terminal table keeps TroubleShooter's title and columns; CSV and JSON carry
every field, numbers as numbers. Display values are rounded, never cut.
"""

from __future__ import annotations

import csv
import enum
import io
import json
import math
import os
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field
from tabulate import tabulate

from tscore.npy_files import write_atomic

TITLE = "The list of comparison results"


class PairStatus(str, enum.Enum):
    """What happened to one pair of files."""

    OK = "ok"  # compared; every element within tolerance
    MISMATCH = "mismatch"  # compared; some elements outside tolerance
    DTYPE_MISMATCH = "dtype_mismatch"  # compared in float64, but the source dtypes differ
    SHAPE_MISMATCH = "shape_mismatch"  # shapes differ; values compared flat only when sizes agree
    MISSING = "missing"  # a file on one side has no partner, or a mapped file does not exist
    UNREADABLE = "unreadable"  # corrupt, truncated, pickled or non-numeric file


# What the "result of allclose" column shows for rows whose values were not judged.
_STATUS_LABELS = {
    PairStatus.SHAPE_MISMATCH: "Shape is inconsistent",
    PairStatus.MISSING: "Missing",
    PairStatus.UNREADABLE: "Unreadable",
}


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


def print_report(text: str) -> None:
    """Print a rendered report to standard output: the one place library code prints.

    Callers reach it only when the user asked for output (``print_level``,
    ``print_map``, ``print_conv_info``).
    """
    print(text, file=sys.stdout)


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


def _allclose_cell(row: PairResult) -> str:
    return _STATUS_LABELS.get(row.status, str(row.allclose))


def boxed(title: str, body: str) -> str:
    """Put ``title`` in a box on top of a ``tabulate(..., tablefmt="pretty")`` table."""
    width = len(body.splitlines()[0])
    rule = "+" + "-" * (width - 2) + "+"
    return "\n".join([rule, "|" + title.center(width - 2) + "|", body])


def pair_table(
    pairs: list[PairResult],
    *,
    title: str = TITLE,
    name_headers: tuple[str, str] = ("orig array name", "target array name"),
    compare_shape: bool = False,
    only_failed: bool = False,
    footer: list[str] | None = None,
) -> str:
    """Render value comparisons as TroubleShooter's table, with numbered notes and footer lines below.

    :param name_headers: the two name columns' titles.
    :param only_failed: leave out the rows that passed.
    """
    headers = list(name_headers)
    if compare_shape:
        headers += ["shape of orig", "shape of target"]
    headers += ["result of allclose", "ratio of allclose", "cosine similarity", "mean & max diffs"]
    rows: list[list[str]] = []
    notes: list[str] = []
    for pair in pairs:
        if only_failed and pair.passed:
            continue
        row = [str(pair.orig_name), str(pair.target_name)]
        if compare_shape:
            row += [format_shape(pair.orig_shape), format_shape(pair.target_shape)]
        row += [
            _allclose_cell(pair),
            format_ratio(pair.ratio_close),
            format_number(pair.cosine),
            f"{format_number(pair.mean_abs_diff)}, {format_number(pair.max_abs_diff)}",
        ]
        if pair.message:
            notes.append(f"[{len(notes) + 1}] {pair.orig_name} / {pair.target_name}: {pair.message}")
            row[0] = f"{row[0]} [{len(notes)}]"
        rows.append(row)
    body = tabulate(rows, headers=headers, tablefmt="pretty")
    return "\n".join([boxed(title, body), *notes, *(footer or [])])


class CompareReport(BaseModel):
    """Every pair compared between two folders, with the settings used."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    orig_dir: str
    target_dir: str
    rtol: float
    atol: float
    equal_nan: bool
    match: str = Field(description="how files were paired: name, number, shape or custom")
    kernel: str = Field(description="the compare kernel used: numpy or numba")
    pairs: list[PairResult]
    ignored_files: dict[str, list[str]] = Field(
        default_factory=dict, description="non-.npy files left out, per side ('orig', 'target')"
    )
    skipped_files: dict[str, list[str]] = Field(
        default_factory=dict,
        description="temporary files of saves that never finished (their process is gone), per side; "
        "never read, removed by the next save or `tscore clean`",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """True when every pair passed."""
        return all(p.passed for p in self.pairs)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counts(self) -> dict[str, int]:
        """Pairs per status, plus ``passed`` and ``failed``."""
        counts = {status.value: 0 for status in PairStatus}
        for pair in self.pairs:
            counts[pair.status.value] += 1
        counts["passed"] = sum(p.passed for p in self.pairs)
        counts["failed"] = len(self.pairs) - counts["passed"]
        return counts

    def summary(self) -> str:
        """One line: how many pairs passed, failed, and why; ignored files."""
        counts = self.counts
        parts = [f"{len(self.pairs)} pairs: {counts['passed']} within tolerance"]
        parts.extend(
            f"{counts[s.value]} {s.value.replace('_', ' ')}"
            for s in PairStatus
            if s is not PairStatus.OK and counts[s.value]
        )
        ignored = sum(len(v) for v in self.ignored_files.values())
        line = ", ".join(parts)
        if ignored:
            per_side = ", ".join(f"{side} {len(v)}" for side, v in self.ignored_files.items() if v)
            line += f"; {ignored} non-.npy file(s) ignored ({per_side})"
        skipped = sum(len(v) for v in self.skipped_files.values())
        if skipped:
            line += f"; {skipped} unfinished save(s) skipped (`tscore clean FOLDER` removes them)"
        return line

    def table(self, *, compare_shape: bool = False, only_failed: bool = False) -> str:
        """Render the spec's terminal table: title, names, [shapes], allclose, ratio, cosine, diffs.

        Rows with something to explain (missing files, dtypes, NaN counts)
        get a numbered note below the table, then the summary line.
        """
        return pair_table(
            self.pairs, compare_shape=compare_shape, only_failed=only_failed, footer=[self.summary()]
        )

    def to_csv(self) -> str:
        """Every pair as one CSV row; numeric columns hold plain numbers, empty when undefined."""
        columns = [name for name in PairResult.model_fields] + ["passed"]
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        for pair in self.pairs:
            record = pair.model_dump(mode="python")
            writer.writerow([_csv_cell(record[c]) for c in columns])
        return buffer.getvalue()

    def to_json(self, indent: int | None = 2) -> str:
        """Render the whole report as JSON (inf written as the string ``"Infinity"``)."""
        return self.model_dump_json(indent=indent)

    def write(self, path: str | os.PathLike[str]) -> str:
        """Write the report to ``path``: JSON for ``.json``, CSV otherwise, replacing any old file.

        The file is written under a temporary name and renamed, so a reader
        never sees half a report. Returns the path.

        :raises TargetPathError: naming the path when it cannot be written.
        """
        target = os.fspath(path)
        text = self.to_json() if target.lower().endswith(".json") else self.to_csv()
        write_atomic(target, lambda stream: stream.write(text.encode("utf-8")))
        return target


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return json.dumps(list(value))
    return value
