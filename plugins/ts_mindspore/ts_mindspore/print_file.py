"""MindSpore's binary print file (``print_file_path`` on Ascend) as its printed items: strings and arrays.

The file is a serialized ``mindspore.train.print_pb2.Print`` (the protobuf module MindSpore
ships); each print appends its values, so the file parses as one message holding every value
in order. A value is a string (``desc``; under GE a tensor comes as its text) or a tensor
(``dims``, its dtype's name, its raw bytes).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from tscore.plugin_api import neutral_dtype


def _dtype(name: str) -> np.dtype | None:
    """Return the numpy dtype of a printed dtype name (``Float32``, ``BFloat16``); None if unknown."""
    neutral = neutral_dtype(name)
    try:
        return np.dtype(getattr(ml_dtypes, neutral) if neutral == "bfloat16" else neutral)
    except TypeError:
        return None


def read_print_file(path: str) -> list[str | np.ndarray] | None:
    """Read a binary print file; None for a file that is not one (text, another format)."""
    from google.protobuf.message import DecodeError
    from mindspore.train import print_pb2

    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError:
        return None
    if not data or not data.startswith(b"\x0a"):  # field 1 (value), length-delimited: what a print writes
        return None
    message = print_pb2.Print()
    try:
        message.ParseFromString(data)
    except (DecodeError, ValueError):
        return None
    items: list[str | np.ndarray] = []
    for value in message.value:
        if value.HasField("desc"):
            items.append(value.desc)
            continue
        tensor = value.tensor
        dtype = _dtype(tensor.tensor_type)
        shape = tuple(int(d) for d in tensor.dims)
        if dtype is None or len(tensor.tensor_content) != dtype.itemsize * math.prod(shape):
            items.append(f"Tensor(shape={list(shape)}, dtype={tensor.tensor_type}, value=<unreadable>)")
            continue
        items.append(np.frombuffer(tensor.tensor_content, dtype=dtype).reshape(shape).copy())
    return items or None
