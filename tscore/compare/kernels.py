"""Choosing the compare kernel and feeding it arrays of any layout.

Three kernels compute the same :class:`~tscore.compare.pair_stats.PairStats`:
C (built into the wheel where a C compiler is there, loaded in a millisecond),
numpy (always there) and numba (``pip install tscore[fast]``). The C and numba
kernels read each element once and let go of the GIL, so threads share the
work; numpy makes about fifteen passes over float64 copies of each chunk, in
worker processes. ``auto`` takes C when it was built; otherwise numba once it
is loaded or for :data:`NUMBA_COLD_MIN_BYTES` or more (loading it costs about
0.65 s in a fresh process), and numpy below. The environment variable
``TSCORE_COMPARE_KERNEL=c|numpy|numba`` forces one.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator

import numpy as np

from tscore.compare import c_kernel, numba_kernel
from tscore.compare.pair_stats import CHUNK_ELEMENTS, PairStats, numpy_stats
from tscore.errors import TscoreError

KERNEL_NAMES = ("auto", "c", "numpy", "numba")
# Kernels whose calls let go of the GIL: threads share their work, no worker processes.
THREADED_KERNELS = frozenset({"c", "numba"})
KERNEL_ENV = "TSCORE_COMPARE_KERNEL"
NUMBA_WARM_MIN_BYTES = 64 << 20  # numba already loaded: worth it from here
NUMBA_COLD_MIN_BYTES = 3 << 30  # numba to load first: numpy finishes sooner below this


def kernel_name(kernel: str | None = None) -> str:
    """Return the kernel asked for: ``kernel``, else ``TSCORE_COMPARE_KERNEL``, else ``"auto"``.

    :raises TscoreError: for a name that is not a kernel.
    """
    name = (kernel or os.environ.get(KERNEL_ENV) or "auto").lower()
    if name not in KERNEL_NAMES:
        raise TscoreError(f"unknown compare kernel {name!r}; use one of {', '.join(KERNEL_NAMES)}")
    return name


def resolve_kernel(kernel: str | None = None, data_bytes: int = 0) -> str:
    """Return ``"c"``, ``"numpy"`` or ``"numba"`` for a comparison of ``data_bytes`` (both sides).

    :raises TscoreError: for an unknown name, or a kernel asked for by name that cannot be loaded.
    """
    name = kernel_name(kernel)
    if name == "auto":
        if c_kernel.load_error() is None:
            return "c"
        threshold = NUMBA_WARM_MIN_BYTES if numba_kernel.loaded() else NUMBA_COLD_MIN_BYTES
        if data_bytes >= threshold and numba_kernel.load_error() is None:
            return "numba"
        return "numpy"
    problem = {"c": c_kernel.load_error, "numba": numba_kernel.load_error}.get(name, lambda: None)()
    if problem:
        raise TscoreError(problem)
    return name


def reads(kernel: str, dtype: np.dtype) -> bool:
    """Say whether ``kernel`` reads arrays of ``dtype`` itself (numpy reads every dtype)."""
    if kernel == "c":
        return c_kernel.supports(dtype)
    if kernel == "numba":
        return numba_kernel.supports(dtype)
    return True


def flat_stats(
    a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool, kernel: str
) -> PairStats:
    """Compare two 1-d arrays of equal length with ``kernel`` (``"c"``, ``"numpy"`` or ``"numba"``).

    A compiled kernel is used only for dtypes it reads; others fall back to numpy.
    """
    a, b = np.asarray(a), np.asarray(b)  # plain views of np.memmap, which numba does not type
    if kernel == "numpy" or not (reads(kernel, a.dtype) and reads(kernel, b.dtype)):
        return numpy_stats(a, b, rtol, atol, equal_nan)
    if kernel == "c":
        return c_kernel.c_stats(a, b, rtol, atol, equal_nan)
    return numba_kernel.numba_stats(a, b, rtol, atol, equal_nan)


def _blocks(shape: tuple[int, ...], limit: int) -> Iterator[tuple[int | slice, ...]]:
    """Index tuples that cut an array of ``shape`` into C-ordered blocks of at most ``limit`` elements."""
    axis = 0
    while axis < len(shape) and math.prod(shape[axis + 1 :]) > limit:
        axis += 1
    if axis == len(shape):  # 0-d
        yield ()
        return
    inner = math.prod(shape[axis + 1 :])
    step = max(1, limit // max(inner, 1))
    for outer in itertools.product(*(range(n) for n in shape[:axis])):
        for start in range(0, shape[axis], step):
            yield (*outer, slice(start, start + step))


def logical_stats(
    a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool, kernel: str
) -> PairStats:
    """Compare two arrays of the same shape element by element, whatever their memory order.

    Arrays that are both C- or both Fortran-contiguous are compared in memory
    order (every statistic ignores order). Otherwise the arrays are walked
    in C-ordered blocks of at most :data:`CHUNK_ELEMENTS`, each copied once,
    so memory stays bounded.
    """
    if a.shape != b.shape:
        raise ValueError(f"logical_stats needs equal shapes, got {a.shape} and {b.shape}")
    if a.flags.c_contiguous and b.flags.c_contiguous:
        return flat_stats(a.ravel(order="C"), b.ravel(order="C"), rtol, atol, equal_nan, kernel)
    if a.flags.f_contiguous and b.flags.f_contiguous:
        return flat_stats(a.ravel(order="F"), b.ravel(order="F"), rtol, atol, equal_nan, kernel)
    total = PairStats()
    for index in _blocks(a.shape, CHUNK_ELEMENTS):
        block_a = np.ascontiguousarray(a[index]).ravel()
        block_b = np.ascontiguousarray(b[index]).ravel()
        total.merge(flat_stats(block_a, block_b, rtol, atol, equal_nan, kernel))
    return total
