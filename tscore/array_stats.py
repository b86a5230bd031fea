"""Max, min, mean and L2 norm of a host array, as a dump records them, without a float64 copy of it.

A backend whose tensors already live in host memory (MindSpore on CPU) summarises
them here rather than launching framework operators: in MindSpore's PyNative
pipeline each extra operator costs more than the numpy reduction it replaces
(issue 12's profile: 70% of a dumped step). Kernel records of a framework's own
dump (:mod:`tscore.dump.native`) use it too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

CHUNK = 1 << 20  # elements widened to float64 at a time for the norm
Stats = tuple[float, float, float, float]
# tscore.native_kernel once its library loaded (one compiled pass instead of numpy's four); False
# when it cannot serve (no C compiler at install); None until the first statistics
_KERNEL: Any = None


def compiled_kernel() -> Any:
    """Return the compiled kernel's module when its library serves, else None (loaded on first use).

    A dump calls this when it starts, on the training thread, so that no step's first statistics
    pay for loading the library (MindSpore computes those on its pipeline's thread).
    """
    global _KERNEL
    if _KERNEL is None:
        from tscore import native_kernel  # ctypes and the library: none of the compare engine

        _KERNEL = native_kernel if native_kernel.load_error() is None else False
    return _KERNEL or None


def array_stats(array: np.ndarray) -> Stats | None:
    """Return ``(max, min, mean, norm)`` as Python floats; None for an empty array.

    One pass of the compiled kernel (``tscore_array_stats`` in ``pair_kernel.c``) where it was
    built and reads the dtype; numpy's reductions otherwise, with the same results to rounding.
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
    kernel = compiled_kernel()
    if kernel is not None and kernel.supports(values.dtype):
        return _finished(kernel.c_array_stats(values), values.size)
    if values.dtype.kind != "f":  # integers and bools: float64 holds every int32 exactly
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


def memory_stats_dtypes() -> tuple[np.dtype, ...]:
    """Return the dtypes :func:`memory_stats` reads (numpy's, ml_dtypes' bfloat16), kernel built or not.

    A backend maps its own dtypes to these by name; :func:`memory_stats` still answers None where
    the kernel was not built.
    """
    from tscore import native_kernel  # the module alone: its library loads on first use

    return tuple(native_kernel.DTYPE_CODES)


def memory_stats_address() -> int | None:
    """Return the address of the C function behind :func:`memory_stats` for compiled code; None if unbuilt.

    ``int tscore_array_stats(const void *data, int code, int64_t count, double acc[5])``: ``code``
    is the dtype's index in :func:`memory_stats_dtypes`, ``acc`` receives the largest and smallest
    values (NaN left out), the sum and the sum of squares in float64, and the NaN count; it
    returns non-zero for a code it does not read. A backend's compiled capture calls it so that
    its statistics are those of :func:`memory_stats`, bit for bit.
    """
    kernel = compiled_kernel()
    return None if kernel is None else kernel.array_stats_address()


def memory_stats(address: int, dtype: np.dtype, count: int) -> Stats | None:
    """Return ``(max, min, mean, norm)`` of ``count`` contiguous elements of ``dtype`` at ``address``.

    For a backend whose tensor lies in host memory and can name its address (torch's
    ``data_ptr()``), which costs less than viewing it as a numpy array: one pass of the compiled
    kernel, the results those of :func:`array_stats`. The memory must hold the ``count`` elements
    and stay alive through the call. None when the kernel was not built or does not read
    ``dtype``, ``count`` is 0, or the address is null or not aligned to the element's size: the
    backend then summarises the tensor its own way.
    """
    kernel = compiled_kernel()
    if kernel is None or count <= 0 or not kernel.supports(dtype):
        return None
    if address <= 0 or address % dtype.itemsize:  # no memory, or elements not where C reads them
        return None
    return _finished(kernel.c_memory_stats(address, dtype, count), count)


def _finished(found: tuple[float, float, float, float, int], count: int) -> Stats:
    """Turn the kernel's largest, smallest, sum, sum of squares and NaN count into the four statistics."""
    high, low, total, squares, nans = found
    if nans:  # as numpy's and torch's reductions: one NaN makes every statistic NaN
        return math.nan, math.nan, math.nan, math.nan
    return high, low, total / count, math.sqrt(squares)
