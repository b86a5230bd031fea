"""safetensors files, read and written with numpy alone (bfloat16 and float8 included).

The format (https://github.com/huggingface/safetensors): an 8-byte
little-endian header length, a JSON header ``{name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {...}}``, then the tensor bytes.
MindSpore writes ``{"format": "ms"}`` as metadata, torch's helpers ``{"format": "pt"}``.
Reading maps the file and returns read-only views of it.
"""

from __future__ import annotations

import json
import math
import mmap
import os
from collections.abc import Mapping
from typing import BinaryIO

import ml_dtypes
import numpy as np

from tscore.checkpoint.raw_bytes import byte_view
from tscore.contract.checkpoints import CheckpointContents, CheckpointReadError
from tscore.errors import UnsupportedObjectError
from tscore.npy_files import write_atomic

DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype(np.uint8),
    "I8": np.dtype(np.int8),
    "U16": np.dtype(np.uint16),
    "I16": np.dtype(np.int16),
    "U32": np.dtype(np.uint32),
    "I32": np.dtype(np.int32),
    "U64": np.dtype(np.uint64),
    "I64": np.dtype(np.int64),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F32": np.dtype(np.float32),
    "F64": np.dtype(np.float64),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
}
_NAMES = {dtype: name for name, dtype in DTYPES.items()}
_HEADER_LIMIT = 100 * 1024 * 1024  # the reference implementation's limit


def _fail(path: str, what: str, offset: int) -> CheckpointReadError:
    return CheckpointReadError(
        f"{path}: {what} at byte {offset}; the file is damaged, truncated or not a safetensors file",
        path=path,
        offset=offset,
    )


def _whole(value: object) -> int:
    """Return a JSON number that must be a whole number >= 0 as an int (ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(value)
    return value


def read_safetensors(path: str | os.PathLike[str]) -> CheckpointContents:
    """Read a safetensors file into numpy arrays (views of the mapped file).

    :raises CheckpointReadError: naming the file and the byte offset of the problem.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size < 8:
                raise _fail(name, f"file of {size} bytes has no header length", 0)
            buffer = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise CheckpointReadError(
            f"cannot read checkpoint {name!r}: {exc.strerror or exc}", path=name
        ) from exc
    header_size = int.from_bytes(buffer[:8], "little")
    if header_size > min(_HEADER_LIMIT, size - 8):
        raise _fail(name, f"header length {header_size} exceeds the file ({size} bytes)", 0)
    try:
        header = json.loads(bytes(buffer[8 : 8 + header_size]))
    except (RecursionError, ValueError) as exc:  # not JSON, not UTF-8, nested too deep, huge integers
        raise _fail(name, f"header is not JSON ({type(exc).__name__}: {str(exc)[:100]})", 8) from None
    if not isinstance(header, dict):
        raise _fail(name, "header is not a JSON object", 8)
    data_start = 8 + header_size
    out = CheckpointContents(path=name, format="safetensors")
    metadata = header.pop("__metadata__", None) or {}
    if isinstance(metadata, dict):
        out.metadata = {str(k): str(v) for k, v in metadata.items()}
    for key, info in header.items():
        try:
            begin, end = (_whole(x) for x in info["data_offsets"])
            shape = tuple(_whole(d) for d in info["shape"])
            type_name = str(info["dtype"])
        except (KeyError, TypeError, ValueError, OverflowError):
            raise _fail(
                name, f"entry {key!r} lacks dtype, shape or data_offsets (whole numbers >= 0)", 8
            ) from None
        dtype = DTYPES.get(type_name)
        if dtype is None:
            out.skipped[key] = f"dtype {type_name!r}, which numpy cannot hold"
            continue
        count = math.prod(shape)  # a Python integer: a damaged shape cannot wrap around
        if end - begin != count * dtype.itemsize:
            raise _fail(
                name,
                f"tensor {key!r} spans {end - begin} bytes but its shape needs {count * dtype.itemsize}",
                data_start + begin,
            )
        if data_start + end > size:
            raise _fail(
                name, f"tensor {key!r} ends past the end of the file ({size} bytes)", data_start + begin
            )
        raw = memoryview(buffer)[data_start + begin : data_start + end]
        out.params[key] = np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)
    return out


def write_safetensors(
    params: Mapping[str, np.ndarray],
    path: str | os.PathLike[str],
    *,
    metadata: Mapping[str, str] | None = None,
) -> str:
    """Write ``{name: array}`` as a safetensors file, atomically.

    :param metadata: string pairs for ``__metadata__`` (``{"format": "ms"}``
        for MindSpore, ``{"format": "pt"}`` for torch).
    :raises UnsupportedObjectError: for dtypes safetensors cannot name, before anything is written.
    """
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    arrays = {}
    offset = 0
    for key, value in params.items():
        array = np.asarray(value)
        type_name = _NAMES.get(array.dtype)
        if type_name is None:
            raise UnsupportedObjectError(f"parameter {key!r}: safetensors cannot hold dtype {array.dtype}")
        header[key] = {
            "dtype": type_name,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        arrays[key] = array
        offset += array.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)

    def write(stream: BinaryIO) -> None:
        stream.write(len(encoded).to_bytes(8, "little"))
        stream.write(encoded)
        for array in arrays.values():
            stream.write(byte_view(array))

    target = os.fspath(path)
    write_atomic(target, write)
    return target
