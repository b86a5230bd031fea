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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tscore.array_stats import array_stats
from tscore.dump.names import CallName, tensor_name
from tscore.dump.recorder import INTEGER_DTYPES
from tscore.dump.writer import TENSORS_FOLDER

if TYPE_CHECKING:
    from tscore.dump.recorder import DumpRecorder

log = logging.getLogger(__name__)

KERNEL_PREFIX = "Kernel"
NATIVE_FOLDER = "native_dump"  # under dump_path: what the framework writes before it is converted


@dataclass(frozen=True)
class KernelTensor:
    """One input or output of a kernel, as the framework wrote it."""

    role: str  # "input" or "output"
    slot: int  # its position among the kernel's inputs (outputs)
    file: str  # the .npy file the framework wrote
    dtype: str  # the neutral dtype name ("float32", "bfloat16"): the file may hold a wider one
    parameter: str | None = None  # the network's parameter this input is ("2.weight"), when it is one


@dataclass
class KernelCall:
    """One kernel run of a compiled step, in execution order."""

    op: str  # the kernel's type: "MatMul", "Conv2D"
    kernel: str  # its full name in the graph: "Default/fc-Dense/MatMul-op0"
    module: str  # the module path its scope gives ("fc"), "" for the root
    direction: str  # "forward", or "backward" for kernels the gradient made
    graph: int = 0
    iteration: int = 0
    tensors: list[KernelTensor] = field(default_factory=list)


class NativeDump(Protocol):
    """What a backend's ``ts_native_dump`` returns: a framework dump armed for the steps to come."""

    folder: str  # where the framework writes
    framework: str  # the framework whose dump it is: "mindspore"
    owned: bool  # tscore configured it: its files may be moved or removed (a user's stay where they are)

    def begin_step(self) -> None:
        """Set aside what the framework wrote while no step was dumped: the next collect skips it."""
        ...

    def collect(self) -> list[KernelCall]:
        """Return the kernels the framework wrote since :meth:`begin_step`, in execution order."""
        ...

    def discard(self, calls: Iterable[KernelCall]) -> None:
        """Remove what the framework wrote for ``calls`` (their files were read or moved)."""
        ...

    def why_empty(self) -> str:
        """Say why a step wrote nothing, in a sentence the user can act on."""
        ...

    def close(self) -> None:
        """Remove what was written and not read (the debugger is closed); say what goes on being written."""
        ...


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
