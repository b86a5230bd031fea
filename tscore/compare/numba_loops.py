"""The loops of the numba compare kernel; importing this module imports numba.

Only :mod:`tscore.compare.numba_kernel` imports it, on the first comparison
that uses the numba kernel. Compiled code is cached on disk (``cache=True``),
so later processes load it instead of compiling.
"""

# mypy: ignore-errors
# (numba code: the loops mix Python floats and numpy scalars, which numba types and mypy does not)
from __future__ import annotations

from typing import Any

import numba
import numpy as np

BLOCK = 4096  # elements per block: non-finite values send only their block down the careful path


@numba.njit(nogil=True, cache=True, error_model="numpy")
def careful_block(
    a: Any, b: Any, lo: int, hi: int, rtol: float, atol: float, equal_nan: bool, acc: Any
) -> None:
    """Add elements ``lo:hi`` to ``acc`` one by one, NaN and inf compared by position (compiled)."""
    for i in range(lo, hi):
        x = np.float64(a[i])
        y = np.float64(b[i])
        if np.isfinite(x) and np.isfinite(y):
            d = abs(x - y)
            ay = abs(y)
            acc[1] += 1.0
            acc[2] += d
            acc[3] = max(acc[3], d)
            if d <= atol + rtol * ay:
                acc[0] += 1.0
            acc[5] += x * y
            acc[6] += x * x
            acc[7] += y * y
            acc[12] += d * d
            r = 0.0 if d == 0.0 else d / ay  # x/0 is inf
            if r < 0.001:
                acc[13] += 1.0
            if r < 0.005:
                acc[14] += 1.0
            acc[4] = max(acc[4], r)
        else:
            if np.isnan(x):
                acc[8] += 1.0
            elif not np.isfinite(x):
                acc[9] += 1.0
            if np.isnan(y):
                acc[10] += 1.0
            elif not np.isfinite(y):
                acc[11] += 1.0
            if x == y or (equal_nan and np.isnan(x) and np.isnan(y)):
                acc[0] += 1.0


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def accumulate(a: Any, b: Any, rtol: float, atol: float, equal_nan: bool, acc: Any) -> None:
    """Add the PairStats fields of ``a`` against ``b`` into ``acc`` (compiled by numba).

    Each block first runs a loop without branches, which LLVM vectorises
    (sums may be reassociated; no assumption about NaN or inf is made; no multiply-add is
    fused, so ``atol + rtol * |b|`` rounds as numpy's does and the close counts agree).
    When the block's sums of squares come out NaN or inf, the block held a
    non-finite value, and it is done again by :func:`careful_block`.
    ``acc`` layout: close, finite, sum_abs, max_abs, max_rel, dot_ab,
    dot_aa, dot_bb, orig_nan, orig_inf, target_nan, target_inf, sum_sq,
    rel_1e3, rel_5e3.
    """
    n = a.size
    for lo in range(0, n, BLOCK):
        hi = min(n, lo + BLOCK)
        close = 0
        sum_abs = 0.0
        max_abs = 0.0
        max_rel = 0.0
        dot_ab = 0.0
        dot_aa = 0.0
        dot_bb = 0.0
        sum_sq = 0.0
        rel_1e3 = 0
        rel_5e3 = 0
        for i in range(lo, hi):
            x = np.float64(a[i])
            y = np.float64(b[i])
            d = abs(x - y)
            ay = abs(y)
            sum_abs += d
            max_abs = max(max_abs, d)
            close += d <= atol + rtol * ay
            dot_ab += x * y
            dot_aa += x * x
            dot_bb += y * y
            sum_sq += d * d
            r = d / ay  # 0/0 is NaN and loses every comparison: equal zeros count as 0 and as within
            rel_1e3 += (r < 0.001) | (d == 0.0)
            rel_5e3 += (r < 0.005) | (d == 0.0)
            max_rel = r if r > max_rel else max_rel
        if np.isfinite(dot_aa) and np.isfinite(dot_bb) and np.isfinite(sum_abs):
            acc[0] += close
            acc[1] += hi - lo
            acc[2] += sum_abs
            acc[3] = max(acc[3], max_abs)
            acc[4] = max(acc[4], max_rel)
            acc[5] += dot_ab
            acc[6] += dot_aa
            acc[7] += dot_bb
            acc[12] += sum_sq
            acc[13] += rel_1e3
            acc[14] += rel_5e3
        else:
            careful_block(a, b, lo, hi, rtol, atol, equal_nan, acc)
