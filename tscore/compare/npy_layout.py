"""Where an ``.npy`` file keeps its numbers, read from the header alone.

The compare engine never loads a whole array: it reads the header (a few
hundred bytes), checks that the file is complete and holds numbers, and later
maps the data region with ``mmap``. Everything that can be wrong with a file
is found here, before any comparison starts, and becomes a
:class:`NpyReadError` that names the file and says what to do.
"""

from __future__ import annotations

import ast
import functools
import math
import os
from dataclasses import dataclass

import numpy as np

from tscore.errors import TscoreError


class NpyReadError(TscoreError, ValueError):
    """An ``.npy`` file that cannot be compared: corrupt, truncated, pickled or not numeric."""


class NpyMissingError(NpyReadError):
    """An ``.npy`` file that does not exist."""


@dataclass(frozen=True)
class NpyLayout:
    """The shape, dtype and byte position of the data in one ``.npy`` file."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    offset: int
    size: int = -1  # number of elements, an exact Python integer (computed when not given)

    def __post_init__(self) -> None:
        if self.size < 0:
            object.__setattr__(self, "size", math.prod(self.shape))

    @property
    def nbytes(self) -> int:
        """Bytes of data after the header."""
        return self.size * self.dtype.itemsize


def _dtype_problem(dtype: np.dtype) -> str | None:
    """Say why arrays of ``dtype`` cannot be compared as numbers, or None when they can."""
    if dtype.hasobject:
        return (
            "it holds pickled Python objects (dtype object); tscore never unpickles data: "
            "save the tensor as numbers"
        )
    if dtype.fields is not None:
        return f"it holds a structured dtype {dtype!r}; compare its fields one by one"
    if dtype.kind == "V":
        return (
            f"it holds raw {dtype.itemsize}-byte records (dtype {dtype.str!r}), as np.save writes "
            "bfloat16/float8 arrays; save them with ts.save, which stores them as float32"
        )
    if dtype.kind in "SUMm":
        return f"it holds {dtype.name} values, not numbers"
    if dtype.kind == "c":
        return f"it holds complex values ({dtype.name}); compare .real and .imag separately"
    return None


_MAGIC = b"\x93NUMPY"
_MAX_HEADER = 1 << 20  # numpy writes a few hundred bytes; anything this long is damage
_MAX_ELEMENTS = 1 << 60  # no file holds more; refused before anything is sized from it
_HEAD = 4096  # bytes read first: the header of every file numpy writes fits


@functools.lru_cache(maxsize=4096)
def _parse_header(text: bytes, encoding: str) -> tuple[tuple[int, ...], bool, np.dtype] | str:
    """Parse the dict of an ``.npy`` header; return ``(shape, fortran_order, dtype)`` or what is wrong.

    Cached by the header's bytes: the files of one folder share a few headers.
    """
    try:
        header = ast.literal_eval(text.decode(encoding))
    except Exception as exc:
        return f"damaged .npy header ({type(exc).__name__}: {str(exc)[:80]})"
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        return "damaged .npy header (not the dict of descr, fortran_order and shape)"
    shape, fortran_order = header["shape"], header["fortran_order"]
    if not (
        isinstance(shape, tuple) and all(isinstance(n, int) and not isinstance(n, bool) for n in shape)
    ) or not isinstance(fortran_order, bool):
        return f"damaged .npy header (shape {shape!r}, fortran_order {fortran_order!r})"
    if any(n < 0 for n in shape) or math.prod(shape) > _MAX_ELEMENTS:
        return f"damaged .npy header (impossible shape {shape!r})"
    try:
        dtype = np.lib.format.descr_to_dtype(header["descr"])
    except Exception as exc:
        return f"damaged .npy header (dtype {header['descr']!r}: {exc})"
    problem = _dtype_problem(dtype)
    if problem:
        return f"cannot compare: {problem}"
    return tuple(shape), fortran_order, dtype


def read_npy(path: str, keep_bytes: int = 0) -> tuple[NpyLayout, bytes | None]:
    """Read the header of the ``.npy`` file at ``path``, and the whole file when it is small.

    A file of at most ``keep_bytes`` bytes is read in one call and returned
    with its layout (its data start at ``layout.offset``), so a comparison
    of many small files opens each once and maps none.

    :raises NpyReadError: naming ``path`` and the problem: not an ``.npy``
        file, a damaged header (of any kind: no input raises anything else), a
        truncated data region, an object (pickled), structured, raw-byte,
        string or complex dtype.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise NpyMissingError(f"{path}: no such file") from None
    except OSError as exc:
        raise NpyReadError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        file_size = os.fstat(fd).st_size
        data = os.read(fd, file_size if file_size <= keep_bytes else _HEAD)
        if data[:6] != _MAGIC or len(data) < 10:
            raise NpyReadError(f"{path}: not a .npy file (it does not start with numpy's magic bytes)")
        major = data[6]
        if major == 1:
            header_start, header_len = 10, int.from_bytes(data[8:10], "little")
        elif major in (2, 3) and len(data) >= 12:
            header_start, header_len = 12, int.from_bytes(data[8:12], "little")
        else:
            raise NpyReadError(f"{path}: unknown .npy format version {major}.{data[7]}")
        if header_len > _MAX_HEADER:
            raise NpyReadError(f"{path}: damaged .npy header (it claims {header_len} bytes)")
        offset = header_start + header_len
        if offset > len(data):
            if offset > file_size:
                raise NpyReadError(f"{path}: truncated inside its .npy header; save it again")
            data += os.pread(fd, offset - len(data), len(data))
    except OSError as exc:
        raise NpyReadError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    parsed = _parse_header(bytes(data[header_start:offset]), "utf8" if major == 3 else "latin1")
    if isinstance(parsed, str):
        raise NpyReadError(f"{path}: {parsed}")
    shape, fortran_order, dtype = parsed
    layout = NpyLayout(path, shape, dtype, fortran_order, offset, math.prod(shape))
    if file_size < offset + layout.nbytes:
        raise NpyReadError(
            f"{path}: truncated: the header promises {layout.nbytes} bytes of data after byte "
            f"{offset}, the file holds {file_size - offset}; save it again"
        )
    return layout, (data if file_size <= keep_bytes else None)


def read_npy_layout(path: str) -> NpyLayout:
    """Read the header of the ``.npy`` file at ``path`` and check that its data can be compared.

    Only the header is read. The file must be a complete ``.npy`` (the data
    region as long as the header promises) of a numeric or bool dtype.

    :raises NpyReadError: as :func:`read_npy`.
    """
    return read_npy(path)[0]


def array_from_bytes(layout: NpyLayout, data: bytes) -> np.ndarray:
    """Return the data of a whole file read by :func:`read_npy` as a 1-d array in memory order."""
    return np.frombuffer(data, dtype=layout.dtype, count=layout.size, offset=layout.offset)


def map_flat(layout: NpyLayout) -> np.ndarray:
    """Map the data of ``layout`` read-only as a 1-d array in memory order (no data is read yet)."""
    if layout.size == 0:
        return np.empty(0, dtype=layout.dtype)
    return np.memmap(layout.path, dtype=layout.dtype, mode="r", offset=layout.offset, shape=(layout.size,))


def map_logical(layout: NpyLayout) -> np.ndarray:
    """Map the data of ``layout`` read-only with its shape, in the order the file stores it."""
    flat = map_flat(layout)
    return flat.reshape(layout.shape, order="F" if layout.fortran_order else "C")
