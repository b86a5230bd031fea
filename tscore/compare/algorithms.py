"""TroubleShooter's ``cal_algorithm`` and ``cal_cosine_sim``: the numbers a compare row holds, for two arrays.

Both rest on :func:`tscore.compare.engine.compare_arrays`, so a script that
calls them gets the figures that ``compare_npy_dir`` prints for the same
pair: computed in float64, over the positions finite on both sides (a pair
equal everywhere, the same infinities included, is cosine 1 and no
difference).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tscore.compare.engine import compare_arrays

SHAPE_INCONSISTENT = "Shape is inconsistent"  # TroubleShooter's first value when the shapes differ


def cal_algorithm(
    orig_value: Any, target_value: Any, rtol: float, atol: float, equal_nan: bool
) -> tuple[bool | str, float, float, tuple[float, float]]:
    """Compare two arrays as a row of ``compare_npy_dir``: ``(allclose, ratio, cosine, (mean, max))``.

    :return: whether every element is within ``atol + rtol * |target|`` (``"Shape is
        inconsistent"`` when the shapes differ), the share of elements that are, the cosine
        similarity (NaN when it has no meaning: no finite position, one side all zero), and the
        mean and max absolute difference (NaN when not computed). A None side gives
        ``(False, 0, nan, (nan, nan))``, as TroubleShooter does.
    """
    if orig_value is None or target_value is None:
        return False, 0, math.nan, (math.nan, math.nan)
    orig, target = np.asarray(orig_value), np.asarray(target_value)
    if orig.shape != target.shape:
        return SHAPE_INCONSISTENT, 0, math.nan, (math.nan, math.nan)
    row = compare_arrays(orig, target, rtol, atol, equal_nan)
    return (
        bool(row.allclose),
        _number(row.ratio_close),
        _number(row.cosine),
        (_number(row.mean_abs_diff), _number(row.max_abs_diff)),
    )


def cal_cosine_sim(a: Any, b: Any) -> float:
    """Return the cosine similarity of two arrays of one size, flattened, in float64 (NaN when undefined).

    Two all-zero arrays are 1.0, as in TroubleShooter; one all-zero side is NaN.

    :raises ValueError: when the two arrays do not hold the same number of elements.
    """
    x, y = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if x.size != y.size:
        raise ValueError(f"cal_cosine_sim: the arrays hold {x.size} and {y.size} elements")
    return _number(compare_arrays(x, y).cosine)


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)
