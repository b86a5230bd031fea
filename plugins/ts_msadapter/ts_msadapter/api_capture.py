"""Seeing a mindtorch network's API calls under torch's names: wrappers on its namespaces, put back after.

mindtorch (mindnlp 0.5.1) has ``torch.overrides.TorchFunctionMode`` but cannot
enter it (``NameError: _push_mode``), so the capture replaces, while it is
installed, the attributes that user code and layers reach, and names each call
as the torch plugin names the same call on real torch, so that the two dumps
pair by name:

* the functions of mindtorch's op modules, reached as ``torch.relu`` (``Torch``);
* the functions of ``mindtorch.nn.functional``, which mindtorch's layers call
  as torch's do (``Functional``: ``F.linear``, ``F.conv2d``, ``F.gelu``). A
  function that torch writes in Python hands its arguments to
  ``__torch_function__`` its own way (``F.layer_norm`` passes ``weight``,
  ``bias`` and ``eps`` by keyword, defaults included); the call is recorded
  arranged the same way (``torch_functional_calls.json``, read off real torch by
  ``tests/msadapter/make_torch_conventions.py``), so that values pair one by one;
* the methods mindtorch puts on its ``Tensor`` class (MindSpore's), and its
  operators under the names torch's ``__torch_function__`` gives them
  (``x + y`` is ``Tensor.add``, ``2 / x`` is ``Tensor.__rdiv__``).

A call made inside a captured call is not recorded again (ptdbg's rule), nor
is anything the recorder itself runs. Forward calls only: mindtorch's backward
does not reach the hooks a record of the gradients would need (the issue
notes). :meth:`ApiCapture.remove` puts back every original object, checked by
identity in the tests.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tscore.plugin_api import TORCH_STYLE_NOT_COMPUTING, HookHandles, read_package_json

log = logging.getLogger(__name__)

# Tensor operators under the names torch's __torch_function__ reports them with (read off real torch)
OPERATOR_NAMES = {
    "__add__": "add",
    "__radd__": "add",
    "__iadd__": "add_",
    "__sub__": "sub",
    "__isub__": "sub_",
    "__rsub__": "__rsub__",
    "__mul__": "mul",
    "__rmul__": "mul",
    "__imul__": "mul_",
    "__truediv__": "div",
    "__itruediv__": "div_",
    "__rtruediv__": "__rdiv__",
    "__matmul__": "matmul",
    "__rmatmul__": "__rmatmul__",
    "__pow__": "pow",
    "__ipow__": "pow_",
    "__rpow__": "__rpow__",
    "__neg__": "neg",
    "__abs__": "abs",
    "__gt__": "gt",
    "__ge__": "ge",
    "__lt__": "lt",
    "__le__": "le",
    "__eq__": "eq",
    "__ne__": "ne",
    "__getitem__": "__getitem__",
    "__setitem__": "__setitem__",
    "__floordiv__": "floor_divide",
    "__mod__": "remainder",
    "__and__": "__and__",
    "__or__": "__or__",
    "__xor__": "__xor__",
    "__invert__": "bitwise_not",
}
# mindtorch's own code defines the functions this capture wraps; anything else on a namespace is a re-export
_OPS_MODULES = "mindtorch.ops."
_TENSOR_OWNER = "TensorPlaceHolder."


@functools.lru_cache(maxsize=1)
def torch_conventions() -> dict[str, dict[str, list[str]]]:
    """How real torch's functional API hands each call's arguments over: positional and keyword names."""
    return dict(read_package_json("ts_msadapter", "torch_functional_calls.json")["functional"])


class Arranger:
    """Arrange one function's arguments as real torch hands them to ``__torch_function__``."""

    def __init__(self, function: Callable[..., Any], convention: Mapping[str, list[str]]) -> None:
        """Bind to ``function``'s signature (mindtorch's, torch's); ValueError when the names differ."""
        self.signature = inspect.signature(function)
        names = set(self.signature.parameters)
        self.positional = list(convention["positional"])
        self.keyword = list(convention["keyword"])
        missing = [n for n in (*self.positional, *self.keyword) if n not in names]
        if missing:
            raise ValueError(f"{getattr(function, '__name__', function)} has no parameters {missing}")

    def __call__(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Return ``(args, kwargs)`` as torch would pass them; the call as made when it does not bind."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:
            return args, dict(kwargs)
        bound.apply_defaults()
        values = bound.arguments
        return tuple(values[n] for n in self.positional), {n: values[n] for n in self.keyword}


@functools.lru_cache(maxsize=1024)
def arranger(api: str, function: Callable[..., Any]) -> Arranger | None:
    """Return how to arrange a call of mindtorch's ``function`` (torch's ``api``); made once per function."""
    convention = torch_conventions().get(api)
    if convention is None:
        return None
    try:
        return Arranger(function, convention)
    except (TypeError, ValueError) as exc:  # mindtorch's signature differs: recorded as called
        log.debug("mindtorch's %s is recorded as called: %s", api, exc)
        return None


def _functions(namespace: Any, owner: str) -> Iterator[tuple[str, Any]]:
    """Yield the public plain functions of a module whose code lives in ``owner`` (a module prefix)."""
    for name, value in list(vars(namespace).items()):
        if name.startswith("_") or not isinstance(value, types.FunctionType):
            continue
        if str(getattr(value, "__module__", "")).startswith(owner):
            yield name, value


class ApiCapture:
    """Report mindtorch's API calls to a dump recorder while installed; nothing is left once removed."""

    def __init__(self, recorder: Any) -> None:
        """Find what to wrap; nothing is replaced until :meth:`install`."""
        self._recorder = recorder
        self._busy = 0
        self._saved: list[tuple[Any, str, Any]] = []  # (owner, attribute, original)

    def targets(self) -> list[tuple[str, str, Any, str, Any]]:
        """List ``(prefix, api, owner, attribute, original)`` for every function and method to wrap."""
        mindtorch = sys.modules["mindtorch"]
        functional = sys.modules.get("mindtorch.nn.functional") or mindtorch.nn.functional
        found: list[tuple[str, str, Any, str, Any]] = []
        for name, value in _functions(mindtorch, _OPS_MODULES):
            if name not in TORCH_STYLE_NOT_COMPUTING:
                found.append(("Torch", name, mindtorch, name, value))
        for name, value in _functions(functional, "mindtorch.nn.functional"):
            found.append(("Functional", name, functional, name, value))
        tensor = mindtorch.Tensor
        for name, value in list(vars(tensor).items()):
            if not isinstance(value, types.FunctionType):
                continue
            if not str(getattr(value, "__qualname__", "")).startswith(_TENSOR_OWNER):
                continue
            api = OPERATOR_NAMES.get(name, None if name.startswith("_") else name)
            if api is not None and api not in TORCH_STYLE_NOT_COMPUTING:
                found.append(("Tensor", api, tensor, name, value))
        return found

    def install(self) -> HookHandles:
        """Replace every target with its wrapper; the handles put the originals back."""
        try:
            for prefix, api, owner, attribute, original in self.targets():
                arrange = arranger(api, original) if prefix == "Functional" else None
                setattr(owner, attribute, self._wrapper(prefix, api, original, arrange))
                self._saved.append((owner, attribute, original))
        except BaseException:
            self.remove()
            raise
        return HookHandles([self.remove], label="mindtorch API capture")

    def remove(self) -> None:
        """Put every original back, the last replaced first."""
        saved, self._saved = self._saved, []
        for owner, attribute, original in reversed(saved):
            setattr(owner, attribute, original)

    def _wrapper(
        self, prefix: str, api: str, original: Callable[..., Any], arrange: Arranger | None = None
    ) -> Callable[..., Any]:
        capture = self

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return capture.call(prefix, api, original, args, kwargs, arrange)

        return wrapper

    def call(
        self,
        prefix: str,
        api: str,
        original: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        arrange: Arranger | None = None,
    ) -> Any:
        """Run one call, telling the recorder before and after when it is made at the top level.

        :param arrange: how torch hands this function's arguments over: the record's inputs are
            arranged so; the call itself gets them as the caller wrote them.
        """
        if self._busy or self._recorder.busy:
            return original(*args, **kwargs)
        self._busy += 1
        try:
            shown = arrange(args, kwargs) if arrange is not None else (args, kwargs)
            token = self._recorder.begin(prefix, api, *shown)
            output = original(*args, **kwargs)
            if token is not None:
                self._recorder.end(token, output)
            return output
        finally:
            self._busy -= 1
