"""MindSpore ``.ckpt`` files, read and written with numpy alone.

A ``.ckpt`` is one protobuf (proto2) message, written without MindSpore's
``checkpoint_pb2`` here::

    message Checkpoint  { repeated Value value = 1; }
    message Value       { required string tag = 1;
                          oneof value { TensorProto tensor = 2; MapTensorProto maptensor = 3; } }
    message TensorProto { repeated int64 dims = 1; required string tensor_type = 2;
                          required bytes tensor_content = 3; }

Rules of the format as MindSpore 2.x writes it (FRAMEWORKS.md):

* a tensor over 512 MiB is written as several consecutive ``Value`` records
  with the same tag and full dims, each holding a slice of the bytes;
* with ``crc_check=True`` the file ends in ``b"crc_num"`` plus a 10-byte
  big-endian CRC-32 of everything before it;
* strings have ``tensor_type "str"``, dims ``[0]`` and UTF-32-LE content;
* a 0-d tensor has no dims; bfloat16 is raw 16-bit words (``"BFloat16"``).

Reading maps the file and returns arrays that are views of it (no copy) unless
a tensor was split, so a 1 GB checkpoint opens in milliseconds and its pages
are read when the values are used.
"""

from __future__ import annotations

import binascii
import math
import mmap
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import BinaryIO

import ml_dtypes
import numpy as np

from tscore.checkpoint.raw_bytes import byte_view
from tscore.contract.checkpoints import CheckpointContents, CheckpointReadError
from tscore.errors import UnsupportedObjectError
from tscore.npy_files import write_atomic

# MindSpore's tensor_type names and the numpy dtypes that hold them.
MS_DTYPES: dict[str, np.dtype] = {
    "Bool": np.dtype(np.bool_),
    "Int8": np.dtype(np.int8),
    "UInt8": np.dtype(np.uint8),
    "Int16": np.dtype(np.int16),
    "UInt16": np.dtype(np.uint16),
    "Int32": np.dtype(np.int32),
    "UInt32": np.dtype(np.uint32),
    "Int64": np.dtype(np.int64),
    "UInt64": np.dtype(np.uint64),
    "Float16": np.dtype(np.float16),
    "Float32": np.dtype(np.float32),
    "Float64": np.dtype(np.float64),
    "BFloat16": np.dtype(ml_dtypes.bfloat16),
}
_MS_NAMES = {dtype: name for name, dtype in MS_DTYPES.items()}

SLICE_BYTES = 512 * 1024 * 1024  # MindSpore's SLICE_SIZE: larger tensors are split
CRC_MARK = b"crc_num"
CRC_TRAILER = len(CRC_MARK) + 10

_LEN = 2  # wire type of length-delimited fields
_VARINT = 0


def ms_dtype_name(dtype: np.dtype) -> str:
    """Return MindSpore's ``tensor_type`` name for a numpy dtype.

    :raises UnsupportedObjectError: for dtypes a ``.ckpt`` cannot hold (float8, complex, objects).
    """
    try:
        return _MS_NAMES[np.dtype(dtype)]
    except KeyError:
        raise UnsupportedObjectError(
            f"a MindSpore .ckpt cannot hold dtype {dtype}; supported: {', '.join(MS_DTYPES)}"
        ) from None


# ------------------------------------------------------------------ reading


class _Reader:
    """A cursor over protobuf bytes that names the file and offset of every failure."""

    def __init__(self, path: str, buffer: mmap.mmap | bytes, start: int, end: int) -> None:
        self.path, self.buffer, self.pos, self.end = path, buffer, start, end

    def fail(self, what: str, offset: int | None = None) -> CheckpointReadError:
        at = self.pos if offset is None else offset
        return CheckpointReadError(
            f"{self.path}: {what} at byte {at}; the file is damaged, truncated, encrypted or not "
            "a MindSpore .ckpt",
            path=self.path,
            offset=at,
        )

    def varint(self) -> int:
        value = shift = 0
        start = self.pos
        buffer = self.buffer
        while True:
            if self.pos >= self.end:
                raise self.fail("truncated varint", start)
            byte = buffer[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 63:
                raise self.fail("varint longer than 10 bytes", start)

    def key(self) -> tuple[int, int]:
        key = self.varint()
        return key >> 3, key & 7

    def span(self) -> tuple[int, int]:
        """Read a length prefix; return the (start, end) of the field's bytes."""
        length = self.varint()
        start = self.pos
        if start + length > self.end:
            raise self.fail(
                f"field of {length} bytes runs past the end of its message ({self.end - start} left)"
            )
        self.pos = start + length
        return start, self.pos

    def skip(self, wire_type: int) -> None:
        if wire_type == _VARINT:
            self.varint()
        elif wire_type == _LEN:
            self.span()
        elif wire_type in (1, 5):  # fixed64, fixed32
            self.pos += 8 if wire_type == 1 else 4
            if self.pos > self.end:
                raise self.fail("truncated fixed-width field")
        else:
            raise self.fail(f"unknown protobuf wire type {wire_type}")

    def sub(self, start: int, end: int) -> _Reader:
        return _Reader(self.path, self.buffer, start, end)


@dataclass
class _Record:
    """One ``Value`` record: a tensor or a slice of one."""

    tag: str
    offset: int
    dims: list[int]
    tensor_type: str | None
    content: tuple[int, int] | None
    map_tensor: bool = False


def _parse_tensor(reader: _Reader, record: _Record) -> None:
    while reader.pos < reader.end:
        field, wire = reader.key()
        if field == 1 and wire == _VARINT:
            record.dims.append(reader.varint())
        elif field == 1 and wire == _LEN:  # packed dims
            sub = reader.sub(*reader.span())
            while sub.pos < sub.end:
                record.dims.append(sub.varint())
        elif field == 2 and wire == _LEN:
            start, end = reader.span()
            record.tensor_type = bytes(reader.buffer[start:end]).decode("utf-8", "replace")
        elif field == 3 and wire == _LEN:
            record.content = reader.span()
        else:
            reader.skip(wire)


def _parse_value(reader: _Reader, offset: int) -> _Record:
    record = _Record(tag="", offset=offset, dims=[], tensor_type=None, content=None)
    while reader.pos < reader.end:
        field, wire = reader.key()
        if field == 1 and wire == _LEN:
            start, end = reader.span()
            try:
                record.tag = bytes(reader.buffer[start:end]).decode("utf-8")
            except UnicodeDecodeError:
                raise reader.fail("parameter name is not UTF-8", start) from None
        elif field == 2 and wire == _LEN:
            _parse_tensor(reader.sub(*reader.span()), record)
        elif field == 3 and wire == _LEN:
            reader.span()
            record.map_tensor = True
        else:
            reader.skip(wire)
    return record


def _records(reader: _Reader) -> Iterator[_Record]:
    while reader.pos < reader.end:
        offset = reader.pos
        field, wire = reader.key()
        if field != 1 or wire != _LEN:
            raise reader.fail(
                f"expected a checkpoint value (field 1), found field {field} wire type {wire}", offset
            )
        yield _parse_value(reader.sub(*reader.span()), offset)


def _payload_end(path: str, buffer: mmap.mmap | bytes, size: int, check_crc: bool) -> int:
    """Return where the protobuf ends: before the CRC trailer when there is one."""
    if size >= CRC_TRAILER and buffer[size - CRC_TRAILER : size - 10] == CRC_MARK:
        end = size - CRC_TRAILER
        if check_crc:
            expected = int.from_bytes(buffer[size - 10 : size], "big")
            actual = binascii.crc32(memoryview(buffer)[:end])
            if actual != expected:
                raise CheckpointReadError(
                    f"{path}: CRC-32 {actual:#010x} does not match the {expected:#010x} stored "
                    f"at byte {end}; "
                    "the file is damaged",
                    path=path,
                    offset=end,
                )
        return end
    return size


def _finish(path: str, buffer: mmap.mmap | bytes, parts: list[_Record], out: CheckpointContents) -> None:
    """Turn the records of one tag into an array (or a skipped entry)."""
    first = parts[0]
    name = first.tag
    if first.map_tensor:
        out.skipped[name] = "a MapParameter (hash table), which tscore does not read"
        return
    if first.tensor_type is None or first.content is None:
        raise CheckpointReadError(
            f"{path}: parameter {name!r} has no tensor type or content at byte {first.offset}; "
            "the file is damaged",
            path=path,
            offset=first.offset,
        )
    view = memoryview(buffer)
    chunks = [view[p.content[0] : p.content[1]] for p in parts if p.content is not None]
    raw: memoryview | bytes = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if first.tensor_type == "str":
        text = bytes(raw).decode("utf-32-le", "replace").rstrip("\x00")
        out.skipped[name] = f"a string ({text!r}), not a tensor"
        return
    dtype = MS_DTYPES.get(first.tensor_type)
    if dtype is None:
        out.skipped[name] = f"dtype {first.tensor_type!r}, which numpy cannot hold"
        return
    shape = tuple(first.dims)
    count = math.prod(shape)  # a Python integer: a damaged shape cannot wrap around to a small count
    if shape == (0,) and len(raw) == dtype.itemsize:  # MindSpore's way of writing some scalars
        shape, count = (), 1
    if count * dtype.itemsize != len(raw):
        raise CheckpointReadError(
            f"{path}: parameter {name!r} (shape {list(shape)}, {first.tensor_type}) needs "
            f"{count * dtype.itemsize} bytes but holds {len(raw)}, at byte {first.offset}; "
            "the file is damaged",
            path=path,
            offset=first.offset,
        )
    out.params[name] = np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)
    out.dtypes[name] = first.tensor_type


def read_ckpt(
    path: str | os.PathLike[str], *, use_mmap: bool = True, check_crc: bool = False
) -> CheckpointContents:
    """Read a MindSpore ``.ckpt`` into numpy arrays, without MindSpore.

    :param path: the checkpoint file.
    :param use_mmap: map the file and return read-only views of it (fast,
        nothing is read until used); ``False`` reads the whole file into memory first.
    :param check_crc: verify the CRC-32 trailer when the file has one.
    :return: the tensors in file order; strings, map tensors and dtypes numpy
        cannot hold are listed in ``skipped`` with the reason.
    :raises CheckpointReadError: naming the file and the byte offset where reading failed.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size == 0:
                raise CheckpointReadError(f"{name}: the file is empty, not a checkpoint", path=name, offset=0)
            buffer: mmap.mmap | bytes
            if use_mmap:
                buffer = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
            else:
                buffer = stream.read()
    except OSError as exc:
        raise CheckpointReadError(
            f"cannot read checkpoint {name!r}: {exc.strerror or exc}", path=name
        ) from exc
    end = _payload_end(name, buffer, size, check_crc)
    out = CheckpointContents(path=name, format="ckpt")
    group: list[_Record] = []
    for record in _records(_Reader(name, buffer, 0, end)):
        if group and record.tag != group[0].tag:
            _finish(name, buffer, group, out)
            group = []
        group.append(record)
    if group:
        _finish(name, buffer, group, out)
    return out


# ------------------------------------------------------------------ writing


def _varint_bytes(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_field(field: int, size: int) -> bytes:
    return _varint_bytes(field << 3 | _LEN) + _varint_bytes(size)


def _value_header(tag: bytes, dims: tuple[int, ...], type_name: bytes, content_size: int) -> bytes:
    """Everything of one ``Value`` record up to (not including) its tensor content."""
    tensor_head = b"".join(_varint_bytes(1 << 3 | _VARINT) + _varint_bytes(d) for d in dims)
    tensor_head += _length_field(2, len(type_name)) + type_name + _length_field(3, content_size)
    tensor_size = len(tensor_head) + content_size
    value_head = _length_field(1, len(tag)) + tag + _length_field(2, tensor_size)
    return _length_field(1, len(value_head) + tensor_size) + value_head + tensor_head


def _ckpt_pieces(params: Mapping[str, np.ndarray]) -> Iterator[bytes | memoryview]:
    for name, value in params.items():
        array = np.asarray(value)
        type_name = ms_dtype_name(array.dtype).encode()
        raw = byte_view(array)
        step = max(SLICE_BYTES // array.dtype.itemsize * array.dtype.itemsize, array.dtype.itemsize)
        tag = name.encode("utf-8")
        for start in range(0, max(len(raw), 1), step):
            piece = raw[start : start + step]
            yield _value_header(tag, tuple(array.shape), type_name, len(piece))
            yield piece


def write_ckpt(params: Mapping[str, np.ndarray], path: str | os.PathLike[str], *, crc: bool = False) -> str:
    """Write ``{name: array}`` as a MindSpore ``.ckpt`` that ``mindspore.load_checkpoint`` reads.

    Arrays are written straight from their memory (no serialised copy);
    tensors over 512 MiB are split as MindSpore splits them. The file appears
    complete or not at all (temporary file, then rename).

    :param crc: end the file with MindSpore's CRC-32 trailer (``crc_check=True`` on load).
    :raises UnsupportedObjectError: for a dtype a ``.ckpt`` cannot hold, before anything is written.
    """
    for name, value in params.items():
        try:
            ms_dtype_name(np.asarray(value).dtype)
        except UnsupportedObjectError as exc:
            raise UnsupportedObjectError(f"parameter {name!r}: {exc}") from None
    target = os.fspath(path)

    def write(stream: BinaryIO) -> None:
        checksum = 0
        for piece in _ckpt_pieces(params):
            if crc:
                checksum = binascii.crc32(piece, checksum)
            stream.write(piece)
        if crc:
            stream.write(CRC_MARK + checksum.to_bytes(10, "big"))

    write_atomic(target, write)
    return target
