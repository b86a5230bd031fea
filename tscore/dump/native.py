"""A framework's own kernel dump, turned into tscore records: where Python sees no API call.

A network compiled into a graph (MindSpore's graph mode) runs no Python
wrapper a dump could patch; its framework can write every kernel's inputs and
outputs itself. A backend arms that dump when the debugger starts
(``ts_native_dump``) and, when it stops, lists what the framework wrote for
the step as :class:`KernelCall` items: the kernel's type and full name, the
module path its scope gives, forward or backward, and the ``.npy`` file of
each input and output. :func:`record_kernels` makes each one a record of the
usual layout, named ``Kernel_{type}_{n}_{direction}`` (``Kernel.MatMul.0.forward``
in msprobe's spelling), with the statistics of every tensor and, with
``task="tensor"``, its file moved into ``tensors/``. Two graph-mode dumps then
compare as any two dumps do.
"""

from __future__ import annotations

import logging
import os
import shutil
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from tscore.array_stats import array_stats
from tscore.contract.kernels import KernelCall, KernelTensor
from tscore.dump.recorder import INTEGER_DTYPES
from tscore.dump_format.files import TENSORS_FOLDER
from tscore.dump_format.names import CallName, tensor_name

if TYPE_CHECKING:
    from tscore.dump.recorder import DumpRecorder

log = logging.getLogger(__name__)

KERNEL_PREFIX = "Kernel"
NATIVE_FOLDER = "native_dump"  # under dump_path: what the framework writes before it is converted


def _entry(recorder: DumpRecorder, name: str, tensor: KernelTensor, move: bool) -> dict[str, Any] | None:
    """Describe one kernel tensor as the recorder describes a tensor; move (else copy) its file when kept."""
    if recorder.config.filter_int and tensor.dtype in INTEGER_DTYPES:
        return None
    try:
        array = np.load(tensor.file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        return {
            "name": name,
            "type": "tensor",
            "dtype": tensor.dtype,
            "error": f"{type(exc).__name__}: {exc}",
        }
    entry: dict[str, Any] = {
        "name": name,
        "type": "tensor",
        "dtype": tensor.dtype,
        "shape": [int(d) for d in array.shape],
        "device": "graph",
        "stats": array_stats(array),
    }
    if tensor.parameter is not None:  # the comparison judges a differing weight as such
        entry["parameter"] = tensor.parameter
    if recorder.md5:
        entry["md5"] = f"{zlib.crc32(np.ascontiguousarray(array).tobytes()):08x}"
    if recorder.config.task == "tensor":
        relative = f"{TENSORS_FOLDER}/{name}.npy"
        target = os.path.join(recorder.writer.folder, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if move:  # the framework's file, already an .npy, in tscore's own folder: moved
            shutil.move(tensor.file, target)
        else:  # the user's own dump: theirs to keep
            shutil.copyfile(tensor.file, target)
        entry["file"] = relative
    return entry


def record_kernels(recorder: DumpRecorder, calls: Iterable[KernelCall], move: bool = True) -> int:
    """Write one record per kernel call, through ``recorder``'s filters and writer; return how many.

    Kernels are numbered per type and direction in execution order, as API calls are.

    :param move: move the framework's files into ``tensors/`` (``task="tensor"``); else copy them.
    """
    counts: dict[tuple[str, str], int] = {}
    written = 0
    for call in calls:
        key = (call.op, call.direction)
        index = counts.get(key, 0)
        counts[key] = index + 1
        name = CallName(KERNEL_PREFIX, call.op, index, call.direction)
        if not recorder.wants_kernel(name):
            continue
        sides: dict[str, list[dict[str, Any]]] = {"input": [], "output": []}
        for tensor in sorted(call.tensors, key=lambda t: (t.role, t.slot)):
            if not recorder.config_wants(call.direction, tensor.role):
                continue
            entry = _entry(recorder, tensor_name(name.ptdbg, tensor.role, (str(tensor.slot),)), tensor, move)
            if entry is not None:
                sides[tensor.role].append(entry)
        recorder.emit_kernel(
            name,
            call.module,
            sides["input"],
            sides["output"],
            {"kernel": call.kernel, "graph": call.graph, "iteration": call.iteration},
        )
        written += 1
    return written
