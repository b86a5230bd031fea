"""The compare kernel compiled from C: one pass over the data, loaded in a millisecond.

``pair_kernel.c`` is compiled into the wheel by the build (``hatch_build.py``) when
a C compiler is there, and loaded here with :mod:`ctypes`, which lets go of the
GIL during the call, so threads share big pairs. It follows exactly the
conventions of :mod:`tscore.compare.pair_stats`, and the tests run every metric
through it and the numpy kernel. Without the library (an install with no
compiler, or ``TSCORE_NO_C_KERNEL=1`` at build time) :func:`load_error` says why
and the comparison runs on numpy.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np

from tscore.compare.pair_stats import ACCUMULATOR_FIELDS, PairStats, from_accumulator

logger = logging.getLogger(__name__)

LIBRARY_PATH = Path(__file__).with_name("_pair_kernel.so")
# The layout of pair_kernel.c this module speaks (its tscore_pair_kernel_version).
LAYOUT_VERSION = 1
# Element types the kernel reads, by the code pair_kernel.c gives them.
DTYPE_CODES = {
    np.dtype(dtype): code
    for code, dtype in enumerate(
        (
            np.float64,
            np.float32,
            np.float16,
            ml_dtypes.bfloat16,
            np.int8,
            np.int16,
            np.int32,
            np.int64,
            np.uint8,
            np.uint16,
            np.uint32,
            np.uint64,
            np.bool_,
        )
    )
}


def supports(dtype: np.dtype) -> bool:
    """Say whether the compiled kernel reads arrays of ``dtype`` (native byte order only)."""
    return dtype in DTYPE_CODES and dtype.isnative


@functools.cache
def _function() -> Callable[..., int]:
    """Load the library once and return its ``tscore_pair_stats``, typed."""
    library = ctypes.CDLL(str(LIBRARY_PATH))
    version = library.tscore_pair_kernel_version()
    if version != LAYOUT_VERSION:
        raise OSError(f"{LIBRARY_PATH} has layout {version}, this tscore needs {LAYOUT_VERSION}")
    function = library.tscore_pair_stats
    function.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_int64,
        ctypes.c_double,
        ctypes.c_double,
        ctypes.c_int,
        ctypes.c_void_p,
    ]
    function.restype = ctypes.c_int
    logger.debug("loaded the C compare kernel from %s", LIBRARY_PATH)
    return function  # type: ignore[no-any-return]


@functools.cache
def load_error() -> str | None:
    """Load the library once; return why it cannot be used, or None when it can."""
    if not LIBRARY_PATH.exists():
        return (
            f"the C compare kernel was not built ({LIBRARY_PATH.name} is not beside {Path(__file__).name}): "
            "reinstall tscore where a C compiler (cc) is on the PATH"
        )
    try:
        _function()
    except (OSError, AttributeError) as exc:
        logger.warning("the C compare kernel cannot load (%s); using numpy", exc)
        return f"the C compare kernel cannot load: {exc}"
    return None


def _readable(array: np.ndarray) -> np.ndarray:
    """``array`` itself when the kernel can read its memory as it is, else an aligned contiguous copy."""
    if array.flags.c_contiguous and array.flags.aligned:
        return array
    return np.require(array, requirements=("C", "A"))


def c_stats(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> PairStats:
    """Compare two 1-d arrays of equal length (dtypes :func:`supports` takes) in one compiled pass.

    :raises ValueError: for arrays of different lengths or a dtype the kernel does not read.
    """
    if a.size != b.size:
        raise ValueError(f"c_stats needs arrays of equal length, got {a.size} and {b.size}")
    out = np.zeros(len(ACCUMULATOR_FIELDS))
    if a.size:
        a, b = _readable(a), _readable(b)
        status = _function()(
            a.ctypes.data,
            DTYPE_CODES.get(a.dtype, -1) if supports(a.dtype) else -1,
            b.ctypes.data,
            DTYPE_CODES.get(b.dtype, -1) if supports(b.dtype) else -1,
            a.size,
            float(rtol),
            float(atol),
            int(bool(equal_nan)),
            out.ctypes.data,
        )
        if status:
            raise ValueError(f"the C compare kernel does not read {a.dtype} against {b.dtype}")
    return from_accumulator(int(a.size), out)
