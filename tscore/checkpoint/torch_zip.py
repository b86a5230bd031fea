"""Reading a torch zip file that holds one plain tensor (``torch.save(t)``), without torch.

msprobe dumps every tensor as such a ``.pt``; comparing two dumps reads
hundreds of them, and importing torch for that alone costs a second. The file
is a zip archive: ``{name}/data.pkl`` is a pickle that rebuilds the tensor with
``torch._utils._rebuild_tensor_v2`` from a storage named by a persistent id,
whose bytes are the member ``{name}/data/{key}``. Only that shape is read: the
pickle may name nothing but the rebuild function, a storage type and
``OrderedDict``, so a crafted file cannot run code (the promise of
``torch.load(weights_only=True)``). Anything else raises
:class:`TorchZipError`, and callers fall back to the torch plugin.
"""

from __future__ import annotations

import collections
import io
import math
import os
import pickle
import zipfile
from typing import Any

import ml_dtypes
import numpy as np

from tscore.errors import TscoreError
from tscore.safe_pickle import memo_problem

# torch storage classes and the dtypes of their elements
_STORAGES: dict[str, Any] = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "BFloat16Storage": ml_dtypes.bfloat16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
    "ComplexFloatStorage": np.complex64,
    "ComplexDoubleStorage": np.complex128,
}


class TorchZipError(TscoreError, ValueError):
    """The file is not a torch zip holding one plain tensor (read it with torch instead)."""


class _Storage:
    """A storage named by the pickle: its dtype and the archive member holding its bytes."""

    def __init__(self, dtype: Any, key: str) -> None:
        self.dtype = np.dtype(dtype)
        self.key = key


def _rebuild(storage: Any, offset: int, size: Any, stride: Any, *_: Any) -> tuple[_Storage, int, Any, Any]:
    if not isinstance(storage, _Storage):
        raise TorchZipError("the tensor's storage is not one the file holds")
    return storage, int(offset), tuple(size), tuple(stride)


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild
        if module == "torch" and name in _STORAGES:
            return _STORAGES[name]
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        raise TorchZipError(f"the pickle names {module}.{name}, which is not a plain tensor")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage"):
            raise TorchZipError(f"unknown persistent id {pid!r}")
        dtype = pid[1]
        if (
            not (isinstance(dtype, type) and issubclass(dtype, np.generic))
            and dtype is not ml_dtypes.bfloat16
        ):
            raise TorchZipError(f"unknown storage type {dtype!r}")
        return _Storage(dtype, str(pid[2]))


def _member_offset(path: str, info: zipfile.ZipInfo) -> int | None:
    """Where a stored (uncompressed) member's bytes begin in the file; None when compressed."""
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as stream:
        stream.seek(info.header_offset)
        header = stream.read(30)
    if header[:4] != b"PK\x03\x04":
        return None
    name_length = int.from_bytes(header[26:28], "little")
    extra_length = int.from_bytes(header[28:30], "little")
    return info.header_offset + 30 + name_length + extra_length


_MAX_PICKLE = 16 << 20  # a tensor's data.pkl is a few hundred bytes


def _dims(values: Any, what: str) -> tuple[int, ...]:
    if not isinstance(values, tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) for n in values
    ):
        raise TorchZipError(f"the tensor's {what} is {values!r}, not whole numbers")
    return values


def read_torch_tensor(path: str) -> np.ndarray:
    """Return the one tensor of a torch zip file as a numpy array (bfloat16 as ``ml_dtypes``).

    The tensor's bytes are memory-mapped where torch stored them uncompressed (it always
    does), so a large tensor is read as the comparison walks it, not all at once.
    Whatever the file holds, the answer is the tensor or a :class:`TorchZipError` naming
    the file: a damaged archive, pickle, shape or stride (negative, or a view that would
    need more memory than the file holds) never crashes, hangs or allocates beyond the file.

    :raises TorchZipError: when the file is not a torch zip of one plain tensor.
    :raises OSError: when it cannot be opened.
    """
    try:
        archive = zipfile.ZipFile(path)
    except OSError:
        raise
    except Exception as exc:
        raise TorchZipError(f"{path}: not a torch zip file ({type(exc).__name__}: {exc})") from None
    try:
        with archive:
            flat, offset, size, stride = _open_storage(path, archive)
        return _view(path, flat, offset, size, stride)
    except TorchZipError as exc:
        message = str(exc)
        raise TorchZipError(message if message.startswith(path) else f"{path}: {message}") from None
    except Exception as exc:
        raise TorchZipError(f"{path}: damaged torch zip file ({type(exc).__name__}: {exc})") from None


def _open_storage(
    path: str, archive: zipfile.ZipFile
) -> tuple[np.ndarray, int, tuple[int, ...], tuple[int, ...]]:
    """Unpickle the tensor's description and map (or read) its storage."""
    names = archive.namelist()
    pickled = next((n for n in names if n.endswith("/data.pkl") or n == "data.pkl"), None)
    if pickled is None:
        raise TorchZipError("no data.pkl in the archive")
    prefix = pickled[: -len("data.pkl")]
    info = archive.getinfo(pickled)
    if info.file_size > _MAX_PICKLE:
        raise TorchZipError(f"data.pkl claims {info.file_size} bytes; a tensor's is a few hundred")
    data = archive.read(pickled)
    problem = memo_problem(data)
    if problem:
        raise TorchZipError(f"data.pkl: {problem}")
    order = archive.read(prefix + "byteorder").decode("ascii") if prefix + "byteorder" in names else "little"
    built = _Unpickler(io.BytesIO(data)).load()
    if not (isinstance(built, tuple) and len(built) == 4 and isinstance(built[0], _Storage)):
        raise TorchZipError(f"holds {type(built).__name__}, not one tensor")
    storage, offset, size, stride = built
    size, stride = _dims(size, "size"), _dims(stride, "stride")
    member = archive.getinfo(f"{prefix}data/{storage.key}")
    dtype = storage.dtype.newbyteorder("<" if order == "little" else ">")
    start = _member_offset(path, member)
    count = member.file_size // dtype.itemsize
    if start is None:
        raise TorchZipError("its storage is compressed, which torch never writes; read it with torch")
    if count == 0:
        flat = np.empty(0, dtype=dtype)
    else:
        if start + count * dtype.itemsize > os.path.getsize(path):
            raise TorchZipError("its storage reaches past the end of the file")
        flat = np.memmap(path, dtype=dtype, mode="r", offset=start, shape=(count,))
    return flat, offset, size, stride


def _view(
    path: str, flat: np.ndarray, offset: int, size: tuple[int, ...], stride: tuple[int, ...]
) -> np.ndarray:
    """Build the tensor from its storage, refusing a view the storage cannot back."""
    dtype = flat.dtype
    if len(size) != len(stride) or any(n < 0 for n in size) or any(s < 0 for s in stride) or offset < 0:
        raise TorchZipError(f"impossible layout: size {size}, stride {stride}, offset {offset}")
    elements = math.prod(size)
    if elements == 0:
        return np.zeros(size, dtype=dtype)
    if not size:
        if offset >= flat.size:
            raise TorchZipError(f"the scalar sits past its storage ({offset} >= {flat.size})")
        return np.array(flat[offset], dtype=dtype)
    needed = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) + 1
    if needed > flat.size:
        raise TorchZipError(f"the tensor reaches past its storage ({needed} > {flat.size})")
    contiguous = list(stride) == [math.prod(size[i + 1 :]) for i in range(len(size))]
    if contiguous:  # the usual case: a view of the mapped file, no copy
        return np.asarray(flat[offset : offset + elements]).reshape(size)
    if elements > 16 * flat.size + (1 << 20):  # a broadcast view (stride 0) of a small storage
        raise TorchZipError(
            f"the tensor repeats its {flat.size} stored elements into {elements}; read it with torch"
        )
    view = np.lib.stride_tricks.as_strided(
        flat[offset:], shape=size, strides=[s * dtype.itemsize for s in stride], writeable=False
    )
    return np.ascontiguousarray(view)
