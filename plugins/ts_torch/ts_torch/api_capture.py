"""Seeing every torch API call without patching anything: a ``TorchFunctionMode`` and ``grad_fn`` hooks.

A ``TorchFunctionMode`` is told of every call of a torch API, however the
user reached it (``torch.relu``, ``from torch import relu``, ``x.relu()``,
``x + 1``), and is switched off while its own handler runs, so a call made
inside a captured call (``F.batch_norm`` calling ``torch.batch_norm``) is not
seen separately: ptdbg's rule. Removing the mode undoes everything: no
attribute of torch is ever replaced.

Backward: the ``grad_fn`` of a dumped call's output gets a hook that receives
the gradients into the call's outputs and those it passes to its inputs
(as ``nn.Module.register_backward_hook`` does: exact for a call that is one
autograd node, which most APIs are).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from tscore.plugin_api import TORCH_STYLE_NOT_COMPUTING, HookHandles

# torch functions of torch._VF (recurrent kernels), which ptdbg prefixes VF rather than Torch
_VF_NAMES = frozenset(
    {"lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"}
)


def _is_functional(func: Callable[..., Any], name: str) -> bool:
    import torch.nn.functional

    return getattr(torch.nn.functional, name, None) is func


@functools.lru_cache(maxsize=4096)
def api_name(func: Callable[..., Any]) -> tuple[str, str] | None:
    """Name a function as ptdbg does: ``("Functional", "conv2d")``, ``("Tensor", "add")``; None if no API."""
    qualname = getattr(func, "__qualname__", "") or ""
    name = getattr(func, "__name__", "") or qualname.rpartition(".")[2]
    if not name or name in TORCH_STYLE_NOT_COMPUTING or (name.startswith("_") and not name.startswith("__")):
        return None
    owner = qualname.rpartition(".")[0]
    module = getattr(func, "__module__", None) or ""
    if owner in ("TensorBase", "Tensor", "_TensorBase"):
        return "Tensor", name
    if module in ("torch._C._nn", "torch.nn.functional") or module.startswith("torch.nn.functional"):
        return "Functional", name
    if _is_functional(func, name):  # F.conv2d is torch.conv2d: the call most likely came through F
        return "Functional", name
    if module.startswith("torch.distributed"):
        return "Distributed", name
    if owner == "_VariableFunctionsClass" or module == "torch":
        return ("VF" if name in _VF_NAMES else "Torch"), name
    if module == "torch.functional":  # einsum, stft, norm ... written in Python
        return "Torch", name
    if module.startswith("torch._C._linalg") or module.startswith("torch.linalg"):
        return "Torch", f"linalg_{name}"
    if module.startswith("torch._C._special") or module.startswith("torch.special"):
        return "Torch", f"special_{name}"
    if module.startswith("torch._C._fft") or module.startswith("torch.fft"):
        return "Torch", f"fft_{name}"
    return None


def _grad_fns(output: Any) -> list[Any]:
    """List the distinct ``grad_fn`` nodes of the tensors in an output (a tensor, or a tuple of them)."""
    import torch

    found: list[Any] = []
    items = output if isinstance(output, (tuple, list)) else (output,)
    for item in items:
        node = getattr(item, "grad_fn", None) if isinstance(item, torch.Tensor) else None
        if node is not None and all(node is not seen for seen in found):
            found.append(node)
    return found


@functools.lru_cache(maxsize=1)
def _mode_class() -> type:
    """Return the ``TorchFunctionMode`` class that hands every call to its capture: one for every dump.

    Made once, on the first dump (torch is imported by then): a class made for each dump would
    be cyclic garbage holding that dump's capture, recorder and records until Python's next full
    collection.
    """
    from torch.overrides import TorchFunctionMode

    class _Mode(TorchFunctionMode):
        def __init__(self, capture: ApiCapture) -> None:
            super().__init__()
            self.capture = capture

        def __torch_function__(
            self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
        ) -> Any:
            return self.capture.call(func, args, kwargs or {})

    return _Mode


class ApiCapture:
    """Report torch API calls to a dump recorder while installed; nothing is left once removed."""

    def __init__(self, recorder: Any) -> None:
        """Prepare the mode; nothing is installed until :meth:`install`."""
        import torch

        self._torch = torch
        self._recorder = recorder
        self._mode: Any = _mode_class()(self)
        self._busy = 0
        self._installed = False
        self._node_handles: list[Any] = []
        self._weak_self = weakref.ref(self)  # what each backward hook holds: no dump kept alive by a graph

    def install(self) -> HookHandles:
        """Push the mode; the returned handles pop it and drop the backward hooks still pending."""
        self._mode.__enter__()
        self._installed = True
        return HookHandles([self.remove], label="torch API capture")

    def remove(self) -> None:
        """Pop the mode and remove every ``grad_fn`` hook not yet fired."""
        if self._installed:
            self._installed = False
            # the mode's class holds this capture (and through it the recorder with the step's
            # records): dropping it here frees them at once, not at Python's next full collection
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
        handles, self._node_handles = self._node_handles, []
        for handle in handles:
            handle.remove()

    def call(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """Run one API call, telling the recorder before and after when it is a top-level API call."""
        if self._busy or self._recorder.busy:
            return func(*args, **kwargs)
        named = api_name(func)
        if named is None:
            return func(*args, **kwargs)
        self._busy += 1
        grad = self._torch.is_grad_enabled()
        set_grad = self._torch._C._set_grad_enabled
        # the recorder's own reads of the tensors (shape, version, statistics) skip the mode's Python
        # handler, which every tensor method otherwise goes through (several microseconds each)
        plain = self._torch._C.DisableTorchFunction
        try:
            set_grad(False)  # the statistics of the inputs build no graph (one switch, no detach a tensor)
            try:
                with plain():
                    token = self._recorder.begin(named[0], named[1], args, kwargs)
            finally:
                set_grad(grad)
            output = func(*args, **kwargs)
            if token is not None:
                set_grad(False)
                try:
                    with plain():
                        self._recorder.end(token, output)
                        if grad and self._recorder.backward_wanted:
                            self._hook_backward(token, args, output)
                finally:
                    set_grad(grad)
            return output
        finally:
            self._busy -= 1

    def _hook_backward(self, token: Any, args: tuple[Any, ...], output: Any) -> None:
        """Have backward report this call's gradients, once, through its output's ``grad_fn``.

        A call that hands back one of its inputs (``x.contiguous()``, ``x.float()`` on a float
        tensor) made no node of its own: its output's ``grad_fn`` belongs to an earlier call,
        and it has no backward to report.
        """
        tensor = self._torch.Tensor
        if isinstance(output, tensor):  # the common case: one tensor, no list of nodes built
            node = output.grad_fn
        else:
            nodes = _grad_fns(output)
            node = nodes[0] if nodes else None
        if node is None:
            return
        for arg in args:
            if isinstance(arg, tensor) and arg.grad_fn is node:
                return
        self._node_handles.append(node.register_hook(_BackwardHook(self._weak_self, token)))


class _BackwardHook:
    """A ``grad_fn`` hook that reports one dumped call's backward to the recorder (one object, no closure)."""

    __slots__ = ("capture", "token")

    def __init__(self, capture: Any, token: Any) -> None:
        """Hold the capture weakly (a hook left on a graph keeps no dump alive) and the call's token."""
        self.capture, self.token = capture, token

    def __call__(self, grad_inputs: Any, grad_outputs: Any) -> None:
        """Report the gradients into the call's outputs and those it passed to its inputs."""
        owner = self.capture()
        if owner is None or not owner._installed:
            return
        owner._busy += 1
        # autograd runs this hook with the mode still pushed: every attribute the recorder
        # reads of a gradient would go through the mode's Python handler (10 us each)
        try:
            with owner._torch._C.DisableTorchFunction():
                owner._recorder.backward(self.token, grad_outputs, grad_inputs)
        finally:
            owner._busy -= 1
