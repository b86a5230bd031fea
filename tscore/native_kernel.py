"""The C kernel compiled into the wheel: the comparison of two arrays, the statistics of one.

``tscore/compare/pair_kernel.c`` is compiled by the build (``hatch_build.py``) when a C
compiler is there, into ``tscore/compare/_pair_kernel.so``, and loaded here with
:mod:`ctypes`, which lets go of the GIL during each call. Two functions: the sums a comparison
needs (:mod:`tscore.compare.c_kernel` calls it) and the statistics a dump records
(:func:`c_memory_stats`, through :mod:`tscore.array_stats`). This module imports no part of the
compare engine, so a dump that loads the kernel pulls in nothing else. Without the library (an
install with no compiler, or ``TSCORE_NO_C_KERNEL=1`` at build time) :func:`load_error` says why,
and numpy does the work.

A library is used only when it was built from the very ``pair_kernel.c`` in ``tscore/compare/``
(the build stores the file's SHA-256 in it). It is looked for in that folder, then in the
``tscore/compare`` folders of ``sys.path``: a source checkout that shadows an installed tscore of
the same source (the test sessions run so) uses the installed library.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import ml_dtypes
import numpy as np

logger = logging.getLogger(__name__)

LIBRARY_NAME = "_pair_kernel.so"
FOLDER = Path(__file__).with_name("compare")  # where the source and the built library lie
SOURCE_PATH = FOLDER / "pair_kernel.c"
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


def candidates() -> list[Path]:
    """List the library files that may serve, in the order tried: beside the source, then on ``sys.path``."""
    found = [FOLDER / LIBRARY_NAME]
    for entry in sys.path:
        path = Path(entry or ".", "tscore", "compare", LIBRARY_NAME)
        if path.is_file() and all(not path.samefile(other) for other in found if other.is_file()):
            found.append(path)
    return found


class _Kernels(NamedTuple):
    """The library's two functions, typed: the comparison of two arrays and the statistics of one."""

    pair_stats: Callable[..., int]
    array_stats: Callable[..., int]


@functools.cache
def _kernels() -> _Kernels:
    """Load the first library built from this ``pair_kernel.c``; return its functions, typed.

    :raises OSError: saying why no library serves.
    """
    expected = hashlib.sha256(SOURCE_PATH.read_bytes()).hexdigest().encode()
    problems = []
    for path in candidates():
        if not path.is_file():
            continue
        try:
            library = ctypes.CDLL(str(path))
            source = library.tscore_pair_kernel_source
        except (OSError, AttributeError) as exc:
            problems.append(f"{path} cannot be loaded ({exc})")
            continue
        source.restype = ctypes.c_char_p
        if source() != expected:
            problems.append(f"{path} was built from another pair_kernel.c")
            continue
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
        array = library.tscore_array_stats
        array.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p]
        array.restype = ctypes.c_int
        logger.debug("loaded the C compare kernel from %s", path)
        return _Kernels(function, array)
    if not problems:
        raise OSError(
            f"the C compare kernel was not built (no {LIBRARY_NAME} beside {SOURCE_PATH.parent}): "
            "reinstall tscore where a C compiler (cc) is on the PATH"
        )
    raise OSError(f"no C compare kernel built from this tscore: {'; '.join(problems)}; reinstall tscore")


@functools.cache
def load_error() -> str | None:
    """Load the library once; return why it cannot be used, or None when it can."""
    try:
        _kernels()
    except OSError as exc:
        logger.info("numpy does what the C kernel would: %s", exc)
        return str(exc)
    return None


def readable(array: np.ndarray) -> np.ndarray:
    """Return ``array`` when the kernel can read its memory as it is, else an aligned contiguous copy."""
    if array.flags.c_contiguous and array.flags.aligned:
        return array
    return np.require(array, requirements=("C", "A"))


_BUFFERS = threading.local()  # each thread's five doubles for the statistics' kernel to write


def c_memory_stats(address: int, dtype: np.dtype, count: int) -> tuple[float, float, float, float, int]:
    """Summarise ``count`` contiguous elements of ``dtype`` at ``address`` in one compiled pass.

    The memory must be host memory that stays alive through the call; the GIL is let go meanwhile.
    Returns the largest and smallest values with NaN left out (``-inf`` and ``inf`` when there
    is none), the sum and the sum of squares taken in float64, and the count of NaN.

    :raises ValueError: for a dtype the kernel does not read.
    :raises OSError: when no library serves (:func:`load_error` says why).
    """
    acc = getattr(_BUFFERS, "acc", None)
    if acc is None:
        acc = _BUFFERS.acc = (ctypes.c_double * 5)()
    code = DTYPE_CODES.get(dtype, -1) if dtype.isnative else -1
    if _kernels().array_stats(address, code, count, acc):
        raise ValueError(f"the C kernel does not read {dtype}")
    high, low, total, squares, nans = acc
    return high, low, total, squares, int(nans)


def array_stats_address() -> int:
    """Return the address of ``tscore_array_stats`` in the loaded library (see :func:`c_memory_stats`).

    :raises OSError: when no library serves (:func:`load_error` says why).
    """
    return int(ctypes.cast(_kernels().array_stats, ctypes.c_void_p).value or 0)  # type: ignore[arg-type]


def c_array_stats(values: np.ndarray) -> tuple[float, float, float, float, int]:
    """Summarise an array (a dtype :func:`supports` takes) in one compiled pass: :func:`c_memory_stats`."""
    flat = readable(values.reshape(-1))
    return c_memory_stats(flat.__array_interface__["data"][0], flat.dtype, flat.size)
