"""The compare kernel compiled from C: one pass over the data, loaded in a millisecond.

``pair_kernel.c`` is compiled into the wheel by the build (``hatch_build.py``) when
a C compiler is there, and loaded here with :mod:`ctypes`, which lets go of the
GIL during the call, so threads share big pairs. It follows exactly the
conventions of :mod:`tscore.compare.pair_stats`, and the tests run every metric
through it and the numpy kernel. Without the library (an install with no
compiler, or ``TSCORE_NO_C_KERNEL=1`` at build time) :func:`load_error` says why
and the comparison runs on numpy.

The library is found and checked by :mod:`tscore.native_kernel`, which the dump's
statistics load too; this module adds the comparison's side.
"""

from __future__ import annotations

import numpy as np

from tscore import native_kernel
from tscore.compare.pair_stats import ACCUMULATOR_FIELDS, PairStats, from_accumulator
from tscore.native_kernel import DTYPE_CODES, LIBRARY_NAME, SOURCE_PATH, load_error, readable, supports

__all__ = ["DTYPE_CODES", "LIBRARY_NAME", "SOURCE_PATH", "c_stats", "load_error", "supports"]


def c_stats(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> PairStats:
    """Compare two 1-d arrays of equal length (dtypes :func:`supports` takes) in one compiled pass.

    :raises ValueError: for arrays of different lengths or a dtype the kernel does not read.
    """
    if a.size != b.size:
        raise ValueError(f"c_stats needs arrays of equal length, got {a.size} and {b.size}")
    out = np.zeros(len(ACCUMULATOR_FIELDS))
    if a.size:
        a, b = readable(a), readable(b)
        status = native_kernel._kernels().pair_stats(
            a.ctypes.data,
            DTYPE_CODES[a.dtype] if supports(a.dtype) else -1,
            b.ctypes.data,
            DTYPE_CODES[b.dtype] if supports(b.dtype) else -1,
            a.size,
            float(rtol),
            float(atol),
            int(bool(equal_nan)),
            out.ctypes.data,
        )
        if status:
            raise ValueError(f"the C compare kernel does not read {a.dtype} against {b.dtype}")
    return from_accumulator(int(a.size), out)
