"""Where an ``.npy`` file keeps its numbers, read from the header alone.

The compare engine never loads a whole array: it reads the header (a few
hundred bytes), checks that the file is complete and holds numbers, and later
maps the data region with ``mmap``. Everything that can be wrong with a file
is found here, before any comparison starts, and becomes a
:class:`NpyReadError` that names the file and says what to do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from tscore.errors import TscoreError


class NpyReadError(TscoreError, ValueError):
    """An ``.npy`` file that cannot be compared: corrupt, truncated, pickled or not numeric."""


@dataclass(frozen=True)
class NpyLayout:
    """The shape, dtype and byte position of the data in one ``.npy`` file."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    offset: int

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

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


def read_npy_layout(path: str) -> NpyLayout:
    """Read the header of the ``.npy`` file at ``path`` and check that its data can be compared.

    Only the header is read. The file must be a complete ``.npy`` (the data
    region as long as the header promises) of a numeric or bool dtype.

    :raises NpyReadError: naming ``path`` and the problem: not an ``.npy`` file,
        a damaged header, a truncated data region, an object (pickled),
        structured, raw-byte, string or complex dtype.
    """
    try:
        with open(path, "rb") as stream:
            try:
                version = np.lib.format.read_magic(stream)
            except ValueError as exc:
                raise NpyReadError(f"{path}: not a .npy file ({exc})") from None
            try:
                if version == (1, 0):
                    header = np.lib.format.read_array_header_1_0(stream)
                elif version == (2, 0):
                    header = np.lib.format.read_array_header_2_0(stream)
                else:
                    raise NpyReadError(
                        f"{path}: .npy format version {version[0]}.{version[1]} stores structured "
                        "dtypes with unicode names, which tscore does not compare"
                    )
            except (ValueError, SyntaxError, EOFError) as exc:
                raise NpyReadError(f"{path}: damaged .npy header ({exc})") from None
            offset = stream.tell()
            file_size = os.fstat(stream.fileno()).st_size
    except OSError as exc:
        raise NpyReadError(f"{path}: cannot read ({exc.strerror or exc})") from None
    shape, fortran_order, dtype = header
    problem = _dtype_problem(dtype)
    if problem:
        raise NpyReadError(f"{path}: cannot compare: {problem}")
    layout = NpyLayout(path, tuple(int(n) for n in shape), dtype, bool(fortran_order), offset)
    if file_size < offset + layout.nbytes:
        raise NpyReadError(
            f"{path}: truncated: the header promises {layout.nbytes} bytes of data after byte "
            f"{offset}, the file holds {file_size - offset}; save it again"
        )
    return layout


def map_flat(layout: NpyLayout) -> np.ndarray:
    """Map the data of ``layout`` read-only as a 1-d array in memory order (no data is read yet)."""
    if layout.size == 0:
        return np.empty(0, dtype=layout.dtype)
    return np.memmap(layout.path, dtype=layout.dtype, mode="r", offset=layout.offset, shape=(layout.size,))


def map_logical(layout: NpyLayout) -> np.ndarray:
    """Map the data of ``layout`` read-only with its shape, in the order the file stores it."""
    flat = map_flat(layout)
    return flat.reshape(layout.shape, order="F" if layout.fortran_order else "C")
