"""Helpers for a backend's layer hooks: kinds from a class table, modes restored, torch-style hooks.

The records they work with (:class:`~tscore.contract.layers.LayerInfo`,
:class:`~tscore.contract.layers.ModuleRecorder`,
:class:`~tscore.contract.layers.HookHandles`) are the contract's
(:mod:`tscore.contract.layers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from tscore.contract.layers import HookHandles, ModuleRecorder


def kind_by_class(layer: object, namespace: object, table: Iterable[tuple[str, str]]) -> str:
    """Return the kind of the first ``(class name, kind)`` entry whose class ``layer`` is an instance of.

    A backend lists its layer classes most specific first (subclasses before their bases),
    so a user's subclass gets its base's kind; ``""`` when no entry matches.
    """
    for name, kind in table:
        cls = getattr(namespace, name, None)
        if cls is not None and isinstance(layer, cls):
            return kind
    return ""


def kind_by_name(layer: object) -> tuple[str, dict[str, Any]] | None:
    """Return the kind and settings of a layer that model code defines itself, by its class name.

    Transformer code writes its own RMS normalisation and rotary embedding (HF's ``LlamaRMSNorm``,
    ``LlamaRotaryEmbedding``, and a port's cells of the same names): a class whose name ends in
    ``RMSNorm`` is ``rmsnorm`` with its ``eps`` (``variance_epsilon``), one ending in
    ``RotaryEmbedding`` is ``rotary`` with its ``base`` (its own, or its config's ``rope_theta``).
    None for any other class.
    """
    name = type(layer).__name__
    if name.endswith("RMSNorm"):
        eps = getattr(layer, "variance_epsilon", None)
        eps = getattr(layer, "eps", None) if eps is None else eps
        return "rmsnorm", {} if eps is None else {"eps": float(eps)}
    if name.endswith("RotaryEmbedding"):
        base = getattr(layer, "base", None)
        base = getattr(getattr(layer, "config", None), "rope_theta", None) if base is None else base
        return "rotary", {} if base is None else {"base": float(base)}
    return None


@contextmanager
def training_modes_restored(layers: Iterable[Any]) -> Iterator[None]:
    """Give every layer its own ``training`` flag back on leaving, however the block ends.

    For frameworks whose layers keep their mode in a ``training`` attribute (torch, Paddle).
    """
    modes = [(layer, layer.training) for layer in layers]
    try:
        yield
    finally:
        for layer, mode in modes:
            layer.training = mode


def hook_layers(
    layers: Iterable[tuple[str, Any]], recorder: ModuleRecorder, handles: HookHandles
) -> HookHandles:
    """Report every call of each ``(path, layer)`` to ``recorder``; add the removers to ``handles``.

    For frameworks whose layers offer ``register_forward_pre_hook(fn,
    with_kwargs=True)`` and ``register_forward_hook(fn, with_kwargs=True)``
    returning a handle with ``remove()`` (torch modules and MindSpore cells
    both do). If a registration fails, the hooks added so far are removed.
    """
    try:
        for path, layer in layers:
            handles.add_handle(layer.register_forward_pre_hook(_Enter(recorder, path), with_kwargs=True))
            handles.add_handle(layer.register_forward_hook(_Leave(recorder, path), with_kwargs=True))
    except BaseException:
        handles.remove()
        raise
    return handles


class _Enter:
    """A layer's forward pre-hook: one small object, not a closure with its cells.

    Copying a hooked network (``copy.deepcopy`` for an EMA model, ``nn.DataParallel``'s replicas)
    copies its hooks: these stay themselves, so the copy reports under the same path and the
    recorder is never copied.
    """

    __slots__ = ("path", "recorder")

    def __init__(self, recorder: ModuleRecorder, path: str) -> None:
        self.recorder, self.path = recorder, path

    def __call__(self, layer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.recorder.enter(self.path, layer, args, kwargs)

    def __copy__(self) -> _Enter:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Enter:
        return self


class _Leave(_Enter):
    """A layer's forward hook (see :class:`_Enter`)."""

    __slots__ = ()

    def __call__(  # type: ignore[override]
        self, layer: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> None:
        self.recorder.leave(self.path, layer, output)
