"""Running one network through its plugin, and recording every layer call on the way.

:func:`run_network` runs a network on one case. When it raises, the error
names the framework and the innermost layer that was running (found by
running again with module hooks that only track which layer is running).

:class:`CallRecorder` is the :class:`tscore.contract.layers.ModuleRecorder` of
the layer localisation: it keeps every call's inputs and output as numpy
copies (a later in-place operation cannot change them).
"""

from __future__ import annotations

import copy
import logging
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel

from tscore.contract.layers import LayerInfo
from tscore.errors import TscoreError, UnsupportedObjectError
from tscore.plugins import hook
from tscore.structures import as_arrays, map_leaves
from tscore.tensors import is_tensor

log = logging.getLogger(__name__)


@dataclass
class LayerCall:
    """One call of one layer: its place in the run and, when recorded, its inputs and output as arrays."""

    path: str
    type_name: str
    index: int  # this is the layer's index-th call
    start: int  # order in which the calls began
    parent: int | None  # the ``start`` of the call that was running when this one began
    args: Any = None
    kwargs: Any = None
    output: Any = None
    end: int | None = None  # order in which the calls returned; None if it raised
    children: list[int] = field(default_factory=list)  # ``start`` of the calls made inside this one


_PLAIN = (type(None), bool, int, float, complex, str, bytes, np.ndarray, np.generic)


def fresh_copy(value: Any) -> Any:
    """Rebuild ``value`` with every object that is not an array or a plain value deep-copied.

    What a layer call takes besides tensors (a key-value cache it appends to, a config) is kept as
    it was when the call began, and a replay gets its own copy: neither the run nor the record
    changes. An object that cannot be copied is kept as it is.
    """
    return map_leaves(value, _fresh_leaf)


def _fresh_leaf(value: Any) -> Any:
    if isinstance(value, _PLAIN) or is_tensor(value) or hook().ts_model_info(model=value) is not None:
        return value  # tensors are copied as arrays; a layer passed as an argument is the network's own
    try:
        return copy.deepcopy(value)
    except Exception as exc:  # a lock, a handle: keep the object
        log.debug("a %s passed to a layer cannot be copied (%s); a replay gets it", type(value).__name__, exc)
        return value


class CallRecorder:
    """Record the layer calls of one run; with ``keep_values=False`` only which layer is running."""

    def __init__(self, keep_values: bool = True) -> None:
        """Start with no calls; ``defer`` (set from the backend's handles) delays copies to :meth:`finish`."""
        self.keep_values = keep_values
        self.defer = False
        self.calls: list[LayerCall] = []
        self._stack: list[LayerCall] = []
        self._counts: dict[str, int] = {}
        self._ended = 0

    def enter(self, path: str, layer: object, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Open a call; copy its inputs before the layer can change them in place."""
        parent = self._stack[-1].start if self._stack else None
        index = self._counts.get(path, 0)
        self._counts[path] = index + 1
        call = LayerCall(path, type(layer).__name__, index, len(self.calls), parent)
        if self.keep_values:
            call.args, call.kwargs = fresh_copy(tuple(args)), fresh_copy(dict(kwargs))
            if not self.defer:
                call.args, call.kwargs = as_arrays(call.args), as_arrays(call.kwargs)
        if parent is not None:
            self.calls[parent].children.append(call.start)
        self.calls.append(call)
        self._stack.append(call)

    def leave(self, path: str, layer: object, output: object) -> None:
        """Close the innermost open call of ``path`` with its output."""
        while self._stack and self._stack[-1].path != path:  # a call that raised inside a caught exception
            self._stack.pop()
        if not self._stack:
            return
        call = self._stack.pop()
        if self.keep_values:
            call.output = output if self.defer else as_arrays(output)
        call.end = self._ended
        self._ended += 1

    def finish(self) -> None:
        """Copy the tensors whose copies were deferred to numpy."""
        if self.keep_values and self.defer:
            for call in self.calls:
                call.args, call.kwargs, call.output = (
                    as_arrays(call.args),
                    as_arrays(call.kwargs),
                    as_arrays(call.output),
                )
            self.defer = False

    def first_calls(self) -> dict[str, int]:
        """Map each called layer's path to the order in which its first call began."""
        found: dict[str, int] = {}
        for call in self.calls:
            found.setdefault(call.path, call.start)
        return found

    @property
    def running(self) -> LayerCall | None:
        """The innermost call that has not returned (after a failure: the layer that raised)."""
        return self._stack[-1] if self._stack else None


class RunFailure(BaseModel):
    """A network that raised: which framework, in which layer, with which exception."""

    network: str
    layer_path: str | None = None
    layer_type: str | None = None
    exception: str
    traceback: str = ""

    def line(self) -> str:
        """One line: ``MindSpore forward failed in layer 'fc' (Dense): ValueError: ...``."""
        where = (
            ""
            if self.layer_path is None
            else f" in layer {self.layer_path or '(root)'!r} ({self.layer_type})"
        )
        return f"{self.network} forward failed{where}: {self.exception}"


class NetRunError(TscoreError, RuntimeError):
    """A network raised while running; ``failure`` says where."""

    def __init__(self, failure: RunFailure) -> None:
        """Keep the failure for the report."""
        super().__init__(failure.line())
        self.failure = failure


def _forward(model: object, case: tuple[Any, ...], network: str) -> object:
    output = hook().ts_run_forward(model=model, args=case, kwargs={}, train=False)
    if output is None:
        raise UnsupportedObjectError(
            f"no loaded plugin runs a {type(model).__module__}.{type(model).__name__} "
            f"(the {network} network); "
            "install the plugin of its framework"
        )
    return output


def run_hooked(model: object, case: tuple[Any, ...], network: str, recorder: CallRecorder) -> object:
    """Run ``model`` with module hooks reporting to ``recorder``; the hooks are removed however it ends."""
    handles = hook().ts_install_module_hooks(model=model, recorder=recorder)
    if handles is None:
        raise UnsupportedObjectError(
            f"no loaded plugin can hook the layers of a {type(model).__name__} (the {network} network)"
        )
    recorder.defer = bool(getattr(handles, "defer_copies", False))
    try:
        output = _forward(model, case, network)
    finally:
        handles.remove()
    recorder.finish()
    return output


def exception_line(exc: BaseException) -> str:
    """Name an exception in one line: its type and the first line of its message."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _failure(exc: BaseException, network: str, running: LayerCall | None) -> RunFailure:
    return RunFailure(
        network=network,
        layer_path=running.path if running else None,
        layer_type=running.type_name if running else None,
        exception=exception_line(exc),
        traceback="".join(traceback.format_exception(exc)[-6:]),
    )


def run_network(model: object, case: tuple[Any, ...], network: str) -> object:
    """Run ``model`` on ``case`` in eval mode.

    :raises NetRunError: when the network raises, naming the layer that was running.
    """
    try:
        return _forward(model, case, network)
    except UnsupportedObjectError:
        raise
    except Exception as exc:
        tracker = CallRecorder(keep_values=False)
        try:
            run_hooked(model, case, network, tracker)
        except Exception:  # the same failure, now with the layer known
            pass
        raise NetRunError(_failure(exc, network, tracker.running)) from exc


def record_run(model: object, case: tuple[Any, ...], network: str) -> tuple[object, CallRecorder]:
    """Run ``model`` on ``case`` recording every layer call's inputs and output.

    :raises NetRunError: when the network raises, naming the layer that was running.
    """
    recorder = CallRecorder()
    try:
        output = run_hooked(model, case, network, recorder)
    except UnsupportedObjectError:
        raise
    except Exception as exc:
        raise NetRunError(_failure(exc, network, recorder.running)) from exc
    return output, recorder


def layer_modes(layers: Sequence[LayerInfo]) -> dict[str, bool | None]:
    """Ask the backends whether each layer is in training mode (``ts_layer_training``)."""
    return {layer.path: hook().ts_layer_training(layer=layer.layer) for layer in layers}


def changed_modes(before: Mapping[str, bool | None], after: Mapping[str, bool | None]) -> list[str]:
    """Name the layers whose mode is not what it was, as ``path (train -> eval)``."""

    def word(mode: bool | None) -> str:
        return "unknown" if mode is None else "train" if mode else "eval"

    return [
        f"{path or '(root)'} ({word(mode)} -> {word(after.get(path))})"
        for path, mode in before.items()
        if after.get(path) != mode
    ]
