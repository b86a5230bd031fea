"""A framework's own kernel dump as plain records: what ``ts_native_dump`` hands the core.

A network compiled into a graph (MindSpore's graph mode) runs no Python
wrapper a dump could see; its framework writes every kernel's inputs and
outputs itself. A backend arms that dump (:class:`NativeDump`) and lists what
the framework wrote for a step as :class:`KernelCall` items, each with its
:class:`KernelTensor` files; :mod:`tscore.dump.native` makes them records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol


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
