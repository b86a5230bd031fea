"""One row per pair of values: the compare engine's metrics on the tensors, or the statistics' differences.

A pair whose two sides both have tensor files is compared element by element
by the compare engine (:mod:`tscore.compare.kernels`: chunked float64, NaN and
inf by position); otherwise the recorded statistics (max, min, mean, norm)
are compared, and the row says it is less certain. Each row also gets one
scale-free *error* (the relative L2 distance, or from the statistics the
largest relative difference), which the verdicts of :mod:`tscore.dump_compare.verdicts`
compare between a call's inputs and outputs.
"""

from __future__ import annotations

import logging
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tscore.checkpoint.torch_zip import TorchZipError, read_torch_tensor
from tscore.compare.kernels import logical_stats, resolve_kernel
from tscore.compare.pair_stats import PairStats
from tscore.dump_compare.calls import Item
from tscore.fill_values import fill_limit

log = logging.getLogger(__name__)

COSINE_MIN = 0.99  # ptdbg: "No" when the cosine is under this ...
MAX_ABS_MAX = 0.001  # ... and the largest absolute error over this
STATS_NAMES = ("max", "min", "mean", "norm")


@dataclass(slots=True)
class Row:
    """The comparison of one value of a call (an input or an output) between the two runs.

    A plain dataclass, not a pydantic model: a dump of 100,000 calls makes hundreds of
    thousands of rows, and the report (pydantic) serialises them all the same.
    """

    target_name: str | None
    orig_name: str | None
    role: str
    path: str
    target_dtype: str | None = None
    orig_dtype: str | None = None
    target_shape: tuple[int, ...] | None = None
    orig_shape: tuple[int, ...] | None = None
    cosine: float | None = None
    euc_dist: float | None = None
    max_abs_err: float | None = None
    max_relative_err: float | None = None
    one_thousandth: float | None = None
    five_thousandths: float | None = None
    target_stats: tuple[float | None, ...] | None = None  # max, min, mean, norm
    orig_stats: tuple[float | None, ...] | None = None
    target_md5: str | None = None
    orig_md5: str | None = None
    basis: str = "none"  # what was compared: "tensor", "statistics", "md5", "value", "none"
    error: float | None = None  # scale-free disagreement; 0 when equal; inf when it cannot agree
    accuracy: str = "N/A"  # ptdbg's "Accuracy Reached or Not": Yes, No, Unmatched, Nan, N/A
    message: str = ""
    # target minus orig and |diff / orig| for max, min, mean and norm (None where a side has none),
    # set for every row whose two sides have statistics, all at once, by statistics_errors
    stat_diff: list[float | None] | None = None
    stat_rel: list[float | None] | None = None
    target_requires_grad: bool | None = None  # as the dumps say (msprobe's; None: not recorded)
    orig_requires_grad: bool | None = None

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as the class and its values: a third of the time slots' generic way takes."""
        return Row, _row_values(self)


_row_values = operator.attrgetter(*Row.__dataclass_fields__)
_DEVICE = re.compile(r"^(cpu|cuda|target|gpu|xpu|mps|meta|ascend)(:\w*)?$", re.IGNORECASE)


def same_value(a: Any, b: Any) -> bool:
    """Say whether two plain arguments agree: NaN agrees with NaN, and any two devices (``target:0``) do."""
    if a == b:
        return True
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return isinstance(a, str) and isinstance(b, str) and bool(_DEVICE.match(a) and _DEVICE.match(b))


def read_array(item: Item) -> np.ndarray:
    """Load an item's tensor file: ``.npy`` memory-mapped, anything else through the checkpoint plugins.

    :raises OSError, ValueError: naming the file, when it is missing or cannot be read.
    """
    assert item.file is not None
    if item.file.endswith(".npy"):
        return np.load(item.file, mmap_mode="r", allow_pickle=False)
    if item.file.endswith(".pt"):  # msprobe's: one plain tensor each, read without importing torch
        try:
            return read_torch_tensor(item.file)
        except TorchZipError as exc:
            log.debug("%s: read through the torch plugin (%s)", item.file, exc)
    from tscore.checkpoint.files import load_checkpoint

    contents = load_checkpoint(item.file)
    if len(contents.params) != 1:
        raise ValueError(f"{item.file}: holds {len(contents.params)} tensors, not one")
    return np.asarray(next(iter(contents.params.values())))


def _accuracy(cosine: float | None, max_abs: float | None) -> str:
    """Ptdbg's rule: No when cosine < 0.99 and MaxAbsErr > 0.001; Nan when either is undefined."""
    if cosine is None or max_abs is None:
        return "Nan"
    return "No" if cosine < COSINE_MIN and max_abs > MAX_ABS_MAX else "Yes"


def _tensor_metrics(row: dict[str, Any], a: np.ndarray, b: np.ndarray, kernel: str) -> None:
    """Fill ``row`` with the compare engine's metrics of two arrays (and its error and accuracy)."""
    if a.dtype.kind not in "biufV" or b.dtype.kind not in "biufV":
        row["message"] = f"not numbers ({a.dtype}, {b.dtype}): not compared"
        return
    if a.size != b.size:
        row["accuracy"], row["error"] = "Unmatched", math.inf
        row["message"] = f"shapes differ ({a.shape} vs {b.shape}); values not compared"
        return
    x, y = (a, b) if a.shape == b.shape else (a.reshape(-1), b.reshape(-1))
    # the engine's first array is our target and its relative error divides by the second (our orig,
    # the reference), as ptdbg's does; so its orig_* counts below are the target's
    stats: PairStats = logical_stats(x, y, 0.0, 0.0, True, kernel)
    row["basis"] = "tensor"
    row["cosine"] = 1.0 if stats.elements == 0 else stats.cosine
    row["euc_dist"], row["max_abs_err"] = stats.euclidean, stats.max_abs_diff
    row["max_relative_err"] = stats.max_rel_diff
    row["one_thousandth"], row["five_thousandths"] = stats.one_thousandth, stats.five_thousandths
    if stats.elements == 0:
        row.update(max_abs_err=0.0, error=0.0, accuracy="Yes", message="empty on both sides")
        return
    # NaN and inf at the same places on both sides: every position non-finite on either side is so
    # on each, with as many NaN (the sign of an infinity is not told apart)
    either = stats.elements - stats.finite
    nonfinite_differ = not (
        stats.orig_nan + stats.orig_inf == either == stats.target_nan + stats.target_inf
        and stats.orig_nan == stats.target_nan
    )
    error: float
    if stats.finite == 0:
        error = 0.0
    else:
        orig_norm = math.sqrt(stats.dot_bb)
        distance = stats.euclidean or 0.0
        error = distance / orig_norm if orig_norm > 0 else distance
    row["error"] = math.inf if nonfinite_differ else error
    if nonfinite_differ:
        row["message"] = (
            f"NaN/inf differ: target {stats.orig_nan} NaN {stats.orig_inf} inf, orig {stats.target_nan} NaN "
            f"{stats.target_inf} inf"
        )
    if a.shape != b.shape:
        row["accuracy"] = "Unmatched"
        row["message"] = f"shapes differ ({a.shape} vs {b.shape}), same size: compared flattened"
    elif nonfinite_differ:
        row["accuracy"] = "No"
    else:
        row["accuracy"] = _accuracy(row["cosine"], row["max_abs_err"])


def _stats_matrix(stats: Sequence[Sequence[float | None]]) -> tuple[np.ndarray, np.ndarray]:
    """Stack statistics as an (n, 4) float64 array (NaN where None) and a mask of those given."""
    if all(len(row) == 4 for row in stats):
        values = np.array(stats, dtype=np.float64)  # None becomes NaN
        given = np.ones(values.shape, dtype=bool)
        for index in [i for i, row in enumerate(stats) if None in row]:
            given[index] = [v is not None for v in stats[index]]
        return values, given
    padded = [(list(row) + [None] * 4)[:4] for row in stats]
    given = np.array([[v is not None for v in row] for row in padded], dtype=bool)
    values = np.array([[np.nan if v is None else v for v in row] for row in padded], dtype=np.float64)
    return values, given


FILLED = (
    "holds fill values near the largest float (an attention mask's): its statistics cannot show a "
    "difference in its other values, so it is not judged by them (dump tensors to compare it)"
)


def fill_values(stats: np.ndarray, dtypes: Sequence[str | None]) -> np.ndarray:
    """Say for each row whether its max or min is a fill: finite, near its dtype's largest value.

    A value computed that large is a blow-up, not a fill; the caller asks both sides, so that one
    side's fill against the other's numbers stays an error.
    """
    limits = np.array([fill_limit(d) for d in dtypes], dtype=np.float64)
    extremes = np.abs(stats[:, :2])
    with np.errstate(invalid="ignore"):
        return np.any(np.isfinite(extremes) & (extremes >= limits[:, None]), axis=1)


def statistics_differences(
    a: np.ndarray, b: np.ndarray, known: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compare two (n, 4) float64 arrays of max, min, mean and norm (target ``a``, orig ``b``).

    :param known: where both sides recorded the statistic.
    :return: each row's error (-1 where no statistic is known on both sides), the signed
        differences (target minus orig) and their ratios to the orig, as :func:`statistics_errors`
        describes them.
    """
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        finite = np.isfinite(a) & np.isfinite(b)
        scale = np.fmax(np.abs(b[:, 0]), np.abs(b[:, 1]))
        norm = np.abs(b[:, 3])
        bases = np.stack([scale, scale, scale, norm], axis=1)
        bases = np.where(np.isfinite(bases), bases, 0.0)
        diff = np.abs(a - b)
        relative = np.where(bases > 0, diff / np.where(bases > 0, bases, 1.0), diff)
        relative = np.where(finite, relative, np.where(same, 0.0, np.inf))
        signed = np.where(same, 0.0, a - b)  # target minus orig; equal infinities differ by 0
        ratio = np.where(signed == 0, 0.0, np.abs(signed) / np.abs(b))  # orig 0: inf
    relative = np.where(known, relative, -1.0)
    return relative.max(axis=1), signed, ratio


def statistics_errors(rows: Sequence[Row], tolerance: float) -> None:
    """Set the statistics' differences of every row, and the error and accuracy of statistics rows.

    Vectorised over the rows: the differences (``stat_diff``, ``stat_rel``) for every row whose
    two sides have statistics, whatever was compared; the error and accuracy for the rows
    judged by their statistics (``basis == "statistics"``).

    A row's error is the largest difference of max, min and mean over the orig's range
    (the larger of its |max| and |min|), and of the norm over the orig's norm; absolute
    where that scale is 0. A statistic finite on one side and not on the other, or two
    different infinities, is an infinite error; equal infinities and NaN on both sides
    agree; a statistic one side did not record (msprobe's mean of an integer tensor) is left out.
    """
    chosen = [r for r in rows if r.target_stats and r.orig_stats]
    if not chosen:
        return
    a, given_a = _stats_matrix([r.target_stats or () for r in chosen])
    b, given_b = _stats_matrix([r.orig_stats or () for r in chosen])
    known = given_a & given_b
    worst, signed, ratio = statistics_differences(a, b, known)
    everything = known.all(axis=1).tolist()
    masked = (
        fill_values(a, [r.target_dtype for r in chosen]) & fill_values(b, [r.orig_dtype for r in chosen])
    ).tolist()
    for row, error, diff, rel, known_row, whole, filled in zip(
        chosen,
        worst.tolist(),
        signed.tolist(),
        ratio.tolist(),
        known.tolist(),
        everything,
        masked,
        strict=True,
    ):
        if whole:
            row.stat_diff, row.stat_rel = diff, rel
        else:
            row.stat_diff = [d if k else None for d, k in zip(diff, known_row, strict=True)]
            row.stat_rel = [r if k else None for r, k in zip(rel, known_row, strict=True)]
        if error < 0 or row.basis != "statistics":  # no statistic both sides recorded; or not judged by them
            continue
        if filled:  # an attention mask's fill value drowns the rest: the statistics show nothing else
            row.message = FILLED
            continue
        row.error = error
        row.accuracy = "No" if error > tolerance else "Yes"


def compare_items(
    target: Item | None,
    orig: Item | None,
    *,
    use_tensors: bool,
    tolerance: float,
    kernel: str | None = None,
    loader: Callable[[Item], Any] = read_array,
) -> Row:
    """Compare one value of a call with its partner; an unreadable or missing side is a row saying so.

    :param use_tensors: compare the tensor files when both sides have them (else the statistics).
    :param tolerance: the error above which a statistics-only row is "No".
    """
    if (  # the bulk of a statistics dump: two tensors alike in all but their numbers
        target is not None
        and orig is not None
        and target.stats is not None
        and orig.stats is not None
        and target.error is None is orig.error
        and target.md5 is None is orig.md5
        and target.dtype == orig.dtype
        and target.shape == orig.shape
        and not (use_tensors and target.file and orig.file)
    ):
        return Row(
            target.name,
            orig.name,
            target.role,
            target.path,
            target_dtype=target.dtype,
            orig_dtype=orig.dtype,
            target_shape=target.shape,
            orig_shape=orig.shape,
            target_stats=target.stats,
            orig_stats=orig.stats,
            basis="statistics",  # error and accuracy: statistics_errors, for all such rows at once
            target_requires_grad=target.requires_grad,
            orig_requires_grad=orig.requires_grad,
        )
    some = target if target is not None else orig
    assert some is not None
    row: dict[str, Any] = {
        "target_name": target.name if target else None,
        "orig_name": orig.name if orig else None,
        "role": some.role,
        "path": some.path,
    }
    for side, item in (("target", target), ("orig", orig)):
        if item is not None:
            row[f"{side}_dtype"], row[f"{side}_shape"], row[f"{side}_stats"] = (
                item.dtype,
                item.shape,
                item.stats,
            )
            row[f"{side}_md5"], row[f"{side}_requires_grad"] = item.md5, item.requires_grad
    _judge_values(row, target, orig, use_tensors, tolerance, kernel, loader)
    return Row(**row)


def _leading_axes_merged(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> bool:
    """Say whether two shapes hold the same values, one with its leading axes merged ([32, 64], [2, 16, 64]).

    Frameworks call a linear layer on a 3-d tensor or on its 2-d view; the statistics of the two are
    the same values'. Only leading axes: every trailing axis of the shorter shape (at least one) is
    the longer's.
    """
    if a is None or b is None or len(a) == len(b) or min(len(a), len(b)) < 2:
        return False  # equal ranks, or a whole tensor flattened: not a merge of leading axes
    short, long = (a, b) if len(a) < len(b) else (b, a)
    merged = len(long) - len(short) + 1
    return tuple(long[merged:]) == tuple(short[1:]) and math.prod(long[:merged]) == short[0]


def _judge_values(
    row: dict[str, Any],
    target: Item | None,
    orig: Item | None,
    use_tensors: bool,
    tolerance: float,
    kernel: str | None,
    loader: Callable[[Item], Any],
) -> None:
    if target is None or orig is None:
        # ptdbg's messages: its NPU run is the target, its bench run the orig
        row["message"] = "No bench data matched." if orig is None else "No NPU data matched."
        row["accuracy"] = "Nan"
        return
    if target.error or orig.error:
        row["message"] = f"not dumped: {target.error or orig.error}"
        return
    if not target.is_tensor or not orig.is_tensor:
        same = target.is_tensor == orig.is_tensor and same_value(target.value, orig.value)
        row.update(basis="value", error=0.0 if same else math.inf, accuracy="Yes" if same else "No")
        if not same:
            row["message"] = f"argument differs: {target.value!r} vs {orig.value!r}"
        return
    note = (
        f"dtypes differ: {target.dtype} vs {orig.dtype}; compared in float64"
        if target.dtype != orig.dtype
        else ""
    )
    if note:
        row["message"] = note
    if use_tensors and target.file and orig.file:
        try:
            a, b = loader(target), loader(orig)
            row["message"] = ""
            _tensor_metrics(row, a, b, resolve_kernel(kernel, int(a.nbytes) + int(b.nbytes)))
            row["message"] = "; ".join(m for m in (note, row["message"]) if m)
            return
        except Exception as exc:  # a missing or corrupt file is this row's problem, not the batch's
            note = f"tensor not read ({type(exc).__name__}: {exc}); compared by its statistics"
            row.update(message=note, accuracy="Nan", basis="none")
            for key in ("cosine", "euc_dist", "max_abs_err", "max_relative_err", "one_thousandth"):
                row.pop(key, None)
            row.pop("five_thousandths", None)
    if target.md5 is not None and orig.md5 is not None:
        same = target.md5 == orig.md5
        row.update(basis="md5", error=0.0 if same else math.inf, accuracy="Yes" if same else "No")
        return
    if target.shape != orig.shape:
        if not _leading_axes_merged(target.shape, orig.shape):
            row.update(
                accuracy="Unmatched",
                error=math.inf,
                message=f"shapes differ ({target.shape} vs {orig.shape})",
            )
            return
        row["message"] = f"shapes {target.shape} and {orig.shape}: leading axes merged, the same values"
    if target.stats is not None and orig.stats is not None:
        row["basis"] = "statistics"  # error and accuracy: statistics_errors, for all such rows at once
        return
    if use_tensors and not (target.file and orig.file):
        row["message"] = f"the {'target' if not target.file else 'orig'} dump has no file for this tensor"
