"""What the core and a backend exchange about a network's layers.

A backend describes every layer of a network as a :class:`LayerInfo`
(``ts_named_layers``) and, when asked (``ts_install_module_hooks``), reports
each layer call to a :class:`ModuleRecorder`: ``enter`` before the layer runs,
``leave`` after. The hooks it installs come back as a :class:`HookHandles`,
whose ``remove()`` takes every one of them off again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class LayerInfo:
    """One layer (a torch module, a MindSpore cell) of a network.

    :ivar path: the dotted path from the root (``"features.3"``; ``""`` is the root).
    :ivar type_name: the class name (``"MaxPool2d"``).
    :ivar kind: the neutral kind (:mod:`tscore.contract.kinds`: ``"conv2d"``, ``"batchnorm2d"``,
        ``"relu"``, ``"sequential"`` ...), ``""`` when the backend does not know the class.
    :ivar params: the full names of the parameters and buffers the layer owns
        itself (not through a child), as the network's checkpoint names them.
    :ivar config: the settings that change what the layer computes, in a
        neutral meaning (``{"eps": 1e-5, "momentum": 0.1}``; BatchNorm's
        momentum as torch means it, the weight of the new batch).
    :ivar layer: the layer object itself.
    """

    path: str
    type_name: str
    kind: str = ""
    params: tuple[str, ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    layer: Any = field(default=None, repr=False, compare=False)

    @property
    def parent(self) -> str | None:
        """The path of the layer that holds this one, None for the root."""
        if not self.path:
            return None
        return self.path.rpartition(".")[0]


class ModuleRecorder(Protocol):
    """What a backend's module hooks call for every layer call, in the order the calls happen."""

    def enter(self, path: str, layer: object, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Note that a layer is about to run with these arguments (framework tensors, as passed)."""

    def leave(self, path: str, layer: object, output: object) -> None:
        """Note that the layer that entered last has returned ``output``."""


class HookHandles:
    """Remove functions for installed hooks; ``remove()`` calls each once, even if one of them fails.

    :ivar defer_copies: set by a backend whose tensors never change after a
        layer has returned them (no in-place operations on activations): the
        recorder may then keep the tensors and copy them once the run has
        ended, which lets an asynchronous framework run without a sync per layer.
    """

    def __init__(
        self,
        removers: list[Callable[[], object]] | None = None,
        label: str = "",
        *,
        defer_copies: bool = False,
    ) -> None:
        """Hold ``removers``; ``label`` names the hooks in log messages."""
        self._removers = list(removers or [])
        self.label = label
        self.defer_copies = defer_copies

    def add(self, remover: Callable[[], object]) -> None:
        """Remember one more hook to remove."""
        self._removers.append(remover)

    def add_handle(self, handle: Any) -> None:
        """Remember a framework's hook handle, whose ``remove()`` removes it (no bound method per hook)."""
        self._removers.append(handle)

    def __len__(self) -> int:
        """How many hooks are still installed."""
        return len(self._removers)

    def remove(self) -> None:
        """Remove every hook, the last installed first; raise the first failure after trying all."""
        removers, self._removers = self._removers, []
        failure: BaseException | None = None
        for remover in reversed(removers):
            try:
                remove = getattr(remover, "remove", None)
                remove() if remove is not None else remover()
            except Exception as exc:  # keep removing the others
                failure = failure or exc
        if failure is not None:
            raise failure

    def __enter__(self) -> HookHandles:
        """Use the handles as a context manager that removes the hooks on exit."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Remove the hooks."""
        self.remove()
