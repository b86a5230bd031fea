"""Max, min, mean and L2 norm of a host array, as a dump records them, without a float64 copy of it.

A backend whose tensors already live in host memory (MindSpore on CPU) summarises
them here rather than launching framework operators: in MindSpore's PyNative
pipeline each extra operator costs more than the numpy reduction it replaces
(issue 12's profile: 70% of a dumped step). Kernel records of a framework's own
dump (:mod:`tscore.dump.native`) use it too.
"""

from __future__ import annotations

import math

import numpy as np

CHUNK = 1 << 20  # elements widened to float64 at a time for the norm
Stats = tuple[float, float, float, float]


def array_stats(array: np.ndarray) -> Stats | None:
    """Return ``(max, min, mean, norm)`` as Python floats; None for an empty array.

    Max and min are taken in the array's own dtype, the mean and the norm in float64 (the
    norm a chunk at a time, so float32 squares never overflow and no float64 copy of the whole
    array is made); 16-bit floats (``ml_dtypes`` bfloat16 included) are widened to float32 and
    integers to float64 first; complex arrays are summarised by their magnitudes, as the torch
    backend does. NaN and inf come back as they are.
    """
    if array.size == 0:
        return None
    values = np.asarray(array)
    if values.dtype.kind == "c":
        values = np.abs(values)
    elif values.dtype.kind != "f":  # integers and bools: float64 holds every int32 exactly
        values = values.astype(np.float64)
    elif values.dtype.itemsize < 4:  # float16, bfloat16: float32 holds them exactly
        values = values.astype(np.float32)
    flat = values.reshape(-1)
    with np.errstate(all="ignore"):
        high, low = float(flat.max()), float(flat.min())
        mean = float(flat.mean(dtype=np.float64))
        squares = 0.0
        for start in range(0, flat.size, CHUNK):  # float64 a chunk at a time: no overflow, no big copy
            chunk = flat[start : start + CHUNK].astype(np.float64)
            squares += float(np.dot(chunk, chunk))
    return high, low, mean, math.sqrt(squares)
