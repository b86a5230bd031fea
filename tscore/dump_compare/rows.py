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
from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from tscore.compare.kernels import logical_stats, resolve_kernel
from tscore.compare.pair_stats import PairStats
from tscore.dump_compare.sources import Item

log = logging.getLogger(__name__)

COSINE_MIN = 0.99  # ptdbg: "No" when the cosine is under this ...
MAX_ABS_MAX = 0.001  # ... and the largest absolute error over this
STATS_NAMES = ("max", "min", "mean", "norm")


class Row(BaseModel):
    """The comparison of one value of a call (an input or an output) between the two runs."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    npu_name: str | None
    bench_name: str | None
    role: str
    path: str
    npu_dtype: str | None = None
    bench_dtype: str | None = None
    npu_shape: tuple[int, ...] | None = None
    bench_shape: tuple[int, ...] | None = None
    cosine: float | None = None
    euc_dist: float | None = None
    max_abs_err: float | None = None
    max_relative_err: float | None = None
    one_thousandth: float | None = None
    five_thousandths: float | None = None
    npu_stats: tuple[float | None, ...] | None = None  # max, min, mean, norm
    bench_stats: tuple[float | None, ...] | None = None
    npu_md5: str | None = None
    bench_md5: str | None = None
    basis: str = "none"  # what was compared: "tensor", "statistics", "md5", "value", "none"
    error: float | None = None  # scale-free disagreement; 0 when equal; inf when it cannot agree
    accuracy: str = "N/A"  # ptdbg's "Accuracy Reached or Not": Yes, No, Unmatched, Nan, N/A
    message: str = ""

    @property
    def stat_diffs(self) -> list[float | None]:
        """NPU minus bench, for max, min, mean and norm (None where a side has none)."""
        if self.npu_stats is None or self.bench_stats is None:
            return [None] * 4
        return [_sub(a, b) for a, b in zip(self.npu_stats, self.bench_stats, strict=False)]

    @property
    def stat_relative(self) -> list[float | None]:
        """``|diff / bench|`` for max, min, mean and norm (inf when bench is 0 and NPU is not)."""
        if self.npu_stats is None or self.bench_stats is None:
            return [None] * 4
        return [_relative(a, b) for a, b in zip(self.npu_stats, self.bench_stats, strict=False)]


def _sub(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if math.isinf(a) and a == b:
        return 0.0
    return a - b


def _relative(a: float | None, b: float | None) -> float | None:
    diff = _sub(a, b)
    if diff is None or b is None:
        return None
    if diff == 0:
        return 0.0
    return abs(diff / b) if b != 0 else math.inf


def read_array(item: Item) -> np.ndarray:
    """Load an item's tensor file: ``.npy`` memory-mapped, anything else through the checkpoint plugins.

    :raises OSError, ValueError: naming the file, when it is missing or cannot be read.
    """
    assert item.file is not None
    if item.file.endswith(".npy"):
        return np.load(item.file, mmap_mode="r", allow_pickle=False)
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


def _tensor_metrics(row: Row, a: np.ndarray, b: np.ndarray, kernel: str) -> None:
    if a.dtype.kind not in "biufV" or b.dtype.kind not in "biufV":
        row.message = f"not numbers ({a.dtype}, {b.dtype}): not compared"
        return
    if a.size != b.size:
        row.accuracy, row.error = "Unmatched", math.inf
        row.message = f"shapes differ ({a.shape} vs {b.shape}); values not compared"
        return
    x, y = (a, b) if a.shape == b.shape else (a.reshape(-1), b.reshape(-1))
    stats: PairStats = logical_stats(x, y, 0.0, 0.0, True, kernel)
    row.basis = "tensor"
    row.cosine = 1.0 if stats.elements == 0 else stats.cosine
    row.euc_dist, row.max_abs_err, row.max_relative_err = (
        stats.euclidean,
        stats.max_abs_diff,
        stats.max_rel_diff,
    )
    row.one_thousandth, row.five_thousandths = stats.one_thousandth, stats.five_thousandths
    if stats.elements == 0:
        row.max_abs_err, row.error, row.accuracy = 0.0, 0.0, "Yes"
        row.message = "empty on both sides"
        return
    nonfinite_differ = (stats.orig_nan, stats.orig_inf) != (stats.target_nan, stats.target_inf)
    if stats.finite == 0:
        row.error = 0.0 if not nonfinite_differ else math.inf
    else:
        bench_norm = math.sqrt(stats.dot_bb)
        distance = stats.euclidean or 0.0
        row.error = distance / bench_norm if bench_norm > 0 else distance
        if nonfinite_differ:
            row.error = math.inf
    if nonfinite_differ:
        row.message = (
            f"NaN/inf differ: NPU {stats.orig_nan} NaN {stats.orig_inf} inf, bench {stats.target_nan} NaN "
            f"{stats.target_inf} inf"
        )
    row.accuracy = "Unmatched" if a.shape != b.shape else _accuracy(row.cosine, row.max_abs_err)
    if a.shape != b.shape:
        row.message = f"shapes differ ({a.shape} vs {b.shape}), same size: compared flattened"


def _statistics_error(npu: tuple[float | None, ...], bench: tuple[float | None, ...]) -> float | None:
    """Return the largest difference of max, min, mean (over the bench's range) and norm (over its norm)."""
    pairs = [(a, b) for a, b in zip(npu, bench, strict=False) if a is not None and b is not None]
    if not pairs:
        return None
    for a, b in pairs:
        if not (math.isfinite(a) and math.isfinite(b)):
            same = a == b or (math.isnan(a) and math.isnan(b))
            if not same:
                return math.inf
    b_max, b_min, _, b_norm = (list(bench) + [None] * 4)[:4]
    scale = max((abs(v) for v in (b_max, b_min) if v is not None and math.isfinite(v)), default=0.0)
    worst = 0.0
    for index, (mine, theirs) in enumerate(zip(npu, bench, strict=False)):
        if mine is None or theirs is None or not (math.isfinite(mine) and math.isfinite(theirs)):
            continue
        base = (b_norm if index == 3 and b_norm is not None else scale) or 0.0
        diff = abs(mine - theirs)
        worst = max(worst, diff / abs(base) if base else diff)
    return worst


def compare_items(
    npu: Item | None,
    bench: Item | None,
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
    some = npu if npu is not None else bench
    assert some is not None
    row = Row(
        npu_name=npu.name if npu else None,
        bench_name=bench.name if bench else None,
        role=some.role,
        path=some.path,
    )
    for side, item in (("npu", npu), ("bench", bench)):
        if item is not None:
            setattr(row, f"{side}_dtype", item.dtype)
            setattr(row, f"{side}_shape", item.shape)
            setattr(row, f"{side}_stats", item.stats)
            setattr(row, f"{side}_md5", item.md5)
    if npu is None or bench is None:
        row.message = "No bench data matched." if bench is None else "No NPU data matched."
        row.accuracy = "Nan"
        return row
    if npu.error or bench.error:
        row.message = f"not dumped: {npu.error or bench.error}"
        return row
    if not npu.is_tensor or not bench.is_tensor:
        row.basis = "value"
        same = npu.value == bench.value and npu.is_tensor == bench.is_tensor
        row.error, row.accuracy = (0.0, "Yes") if same else (math.inf, "No")
        if not same:
            row.message = f"argument differs: {npu.value!r} vs {bench.value!r}"
        return row
    if npu.dtype != bench.dtype:
        row.message = f"dtypes differ: {npu.dtype} vs {bench.dtype}; compared in float64"
    if use_tensors and npu.file and bench.file:
        try:
            a, b = loader(npu), loader(bench)
        except Exception as exc:  # a missing or corrupt file is this row's problem, not the batch's
            row.message = f"tensor not read: {type(exc).__name__}: {exc}"
            row.accuracy = "Nan"
            return row
        chosen = resolve_kernel(kernel, int(a.nbytes) + int(b.nbytes))
        note = row.message
        _tensor_metrics(row, a, b, chosen)
        row.message = "; ".join(m for m in (note, row.message) if m)
        return row
    if npu.md5 is not None and bench.md5 is not None:
        row.basis = "md5"
        same = npu.md5 == bench.md5
        row.error, row.accuracy = (0.0, "Yes") if same else (math.inf, "No")
        return row
    if npu.shape != bench.shape:
        row.accuracy, row.error = "Unmatched", math.inf
        row.message = f"shapes differ ({npu.shape} vs {bench.shape})"
        return row
    if npu.stats is not None and bench.stats is not None:
        row.basis = "statistics"
        row.error = _statistics_error(npu.stats, bench.stats)
        if row.error is not None:
            row.accuracy = "No" if row.error > tolerance else "Yes"
        return row
    if use_tensors and not (npu.file and bench.file):
        row.message = f"the {'NPU' if not npu.file else 'bench'} dump has no file for this tensor"
    return row
