"""Seeing every MindSpore API call in PyNative mode: wrappers on the public namespaces, restored on removal.

MindSpore has no hook that sees every call, so the capture replaces, while it
is installed, the attributes that user code and layers reach (FRAMEWORKS.md,
"MindSpore capture"):

* the functions of ``mindspore.ops`` and ``mindspore.ops.functional``
  (``Functional``), of ``mindspore.mint`` (``Mint``) and of
  ``mindspore.mint.nn.functional`` (``MintFunctional``);
* ``Tensor`` methods and operators (``Tensor``): most live on the C++ base
  class ``TensorPy``, so a wrapper is set on ``Tensor`` itself and deleted
  again afterwards, leaving the base class untouched;
* the ``__call__`` of ``Primitive`` and of every Primitive class that defines
  its own (``Primitive``): layers such as ``nn.Dense`` call ``MatMul`` and
  ``BiasAdd`` instances, and a function imported before the dump started
  (``from mindspore.ops import relu``) is seen at this level.

A call made inside a captured call is not recorded again (ptdbg's rule), nor
is anything the recorder itself runs. :meth:`ApiCapture.remove` puts back
every original object, checked by identity in the tests.

Backward: each differentiable output of a dumped call gets a
``Tensor.register_hook``; once every such output has received its gradient the
call's backward record is written with them (the gradients into the call).
The gradients the call passes on to its inputs are not reported: MindSpore
offers no per-call hook for them without adding an operation to the graph.
"""

from __future__ import annotations

import inspect
import logging
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from tscore.plugin_api import HookHandles, StepStopped

log = logging.getLogger(__name__)

# Tensor methods that describe a tensor, move it or hand it to Python rather than compute: not API calls.
NOT_COMPUTING = frozenset(
    {
        "asnumpy",
        "assign_value",
        "assign_value_cpp",
        "const_arg",
        "convert_bytes_to_tensor",
        "data_sync",
        "dim",
        "from_dlpack",
        "from_numpy",
        "get_bytes",
        "getitem_index_info",
        "setitem_index_info",
        "has_init",
        "hooks",
        "index_of_parent_",
        "init_data",
        "init_finished",
        "is_complex",
        "is_contiguous",
        "is_floating_point",
        "is_init",
        "is_meta",
        "is_pinned",
        "is_shared",
        "is_signed",
        "item",
        "itemsize",
        "move_to",
        "nbytes",
        "ndimension",
        "numel",
        "numpy",
        "offload",
        "offload_file_path",
        "parent_tensor_",
        "pin_memory",
        "register_hook",
        "remove_hook",
        "requires_grad_",
        "set_cast_dtype",
        "set_data",
        "set_device_address",
        "set_dtype",
        "set_init_flag",
        "set_param_info",
        "size",
        "storage",
        "storage_offset",
        "stride",
        "to_dlpack",
        "tolist",
        "untyped_storage",
        "wait_pipeline",
        "flush_from_cache",
        "virtual_flag",
        "device",
        "data",
        "param_info",
        "init",
        "init_flag",
        "symbolic_shape",
        "dtype",
        "shape",
        "ndim",
        "strides",
        "T",
        "H",
        "mT",
        "mH",
    }
)
# Primitives that read a tensor's description or route values rather than compute on them
NOT_COMPUTING_PRIMITIVES = frozenset(
    {"Shape", "TensorShape", "DType", "Rank", "Size", "ProxyOp", "Depend", "UpdateState", "Load", "Identity"}
)
# operators of Tensor that compute (comparisons included, as ptdbg and msprobe dump them)
OPERATORS = frozenset(
    {
        *(
            f"__{op}__"
            for base in (
                "add",
                "sub",
                "mul",
                "truediv",
                "floordiv",
                "mod",
                "pow",
                "matmul",
                "and",
                "or",
                "xor",
                "lshift",
                "rshift",
            )
            for op in (base, f"r{base}", f"i{base}")
        ),
        "__neg__",
        "__pos__",
        "__abs__",
        "__invert__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__eq__",
        "__ne__",
        "__getitem__",
        "__setitem__",
    }
)


def _public_functions(namespace: Any) -> Iterator[tuple[str, Any]]:
    """``(name, function)`` for the public plain functions of a module (not classes, not Primitives)."""
    for name, value in list(vars(namespace).items()):
        if name.startswith("_") or not callable(value) or inspect.isclass(value):
            continue
        if inspect.isfunction(value) or inspect.isbuiltin(value):
            yield name, value


# the targets of the last install, with the number of Primitive classes then (see _known_targets)
_TARGETS: tuple[int, list[tuple[str, Any, str, Any]]] | None = None


def _primitive_classes(root: type) -> Iterator[type]:
    """``root`` and every subclass already defined, each once."""
    stack, seen = [root], set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        yield cls
        stack.extend(cls.__subclasses__())


class ApiCapture:
    """Report MindSpore API calls to a dump recorder while installed; every attribute restored on removal."""

    def __init__(self, recorder: Any) -> None:
        """Prepare; nothing is replaced until :meth:`install`."""
        self._ms = sys.modules["mindspore"]
        self._recorder = recorder
        self._busy = 0
        self._installed = False
        # (owner, attribute, original, whether the owner held it itself rather than inherited it)
        self._patched: list[tuple[Any, str, Any, bool]] = []
        self._wrappers: dict[tuple[int, str], Callable[..., Any]] = {}
        self._hooks: list[Any] = []
        names = ("float16", "float32", "float64", "bfloat16", "complex64", "complex128")
        self._float_types = frozenset(getattr(self._ms, n) for n in names if hasattr(self._ms, n))

    # ------------------------------------------------------------ installing

    def targets(self) -> list[tuple[str, Any, str, Any]]:
        """Every ``(prefix, owner, attribute, original)`` the capture replaces while installed."""
        ms = self._ms
        import mindspore.mint.nn.functional as mint_functional
        import mindspore.ops.functional as ops_functional

        found: list[tuple[str, Any, str, Any]] = []
        for prefix, namespace in (
            ("Functional", ms.ops),
            ("Functional", ops_functional),
            ("Mint", ms.mint),
            ("MintFunctional", mint_functional),
        ):
            found += [(prefix, namespace, name, fn) for name, fn in _public_functions(namespace)]
        tensor = ms.Tensor
        names: set[str] = set()
        for cls in tensor.__mro__[:-1]:  # Tensor, then the C++ TensorPy; not object
            for name, value in vars(cls).items():
                computing = name in OPERATORS or not (name.startswith("_") or name in NOT_COMPUTING)
                if computing and name not in names and callable(value) and not inspect.isclass(value):
                    names.add(name)
                    found.append(("Tensor", tensor, name, getattr(tensor, name)))
        primitive = ms.ops.Primitive
        for cls in _primitive_classes(primitive):
            call = vars(cls).get("__call__")
            if call is not None and inspect.isfunction(call):
                found.append(("Primitive", cls, "__call__", call))
        return found

    def _known_targets(self) -> list[tuple[str, Any, str, Any]]:
        """Return the targets of an earlier install while every one is still in place; else find them anew.

        Finding them walks 3,000 attributes and every Primitive class (45 ms, a sixth of a small
        encoder's step); checking that each owner still holds the same object costs 1 ms. A new
        Primitive class or function, or one the user replaced, makes the list found again.
        """
        global _TARGETS
        count = sum(1 for _ in _primitive_classes(self._ms.ops.Primitive))
        if (
            _TARGETS is not None
            and _TARGETS[0] == count
            and all(getattr(owner, name, None) is original for _, owner, name, original in _TARGETS[1])
        ):
            return _TARGETS[1]
        found = self.targets()
        _TARGETS = (count, found)
        return found

    def install(self) -> HookHandles:
        """Replace every target with its wrapper; the returned handles put the originals back."""
        try:
            for prefix, owner, name, original in self._known_targets():
                if prefix == "Primitive":
                    wrapper = self._primitive_wrapper(original)
                else:
                    wrapper = self._wrapper(prefix, name, original)
                own = name in vars(owner)
                try:
                    setattr(owner, name, wrapper)
                except (AttributeError, TypeError) as exc:  # a read-only attribute: say so, go on
                    log.debug(
                        "dump: %s.%s cannot be wrapped (%s)", getattr(owner, "__name__", owner), name, exc
                    )
                    continue
                self._patched.append((owner, name, original, own))
        except BaseException:
            self.remove()
            raise
        self._installed = True
        return HookHandles([self.remove], label="MindSpore API capture")

    def remove(self) -> None:
        """Put back every original (deleting what the owner only inherited); drop pending hooks."""
        self._installed = False
        patched, self._patched = self._patched, []
        for owner, name, original, own in reversed(patched):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        hooks, self._hooks = self._hooks, []
        for handle in hooks:
            handle.remove()

    # ------------------------------------------------------------ wrappers

    def _wrapper(self, prefix: str, api: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """One wrapper per original and prefix: ``ops.relu is ops.functional.relu`` stays true."""
        key = (id(original), prefix)
        known = self._wrappers.get(key)
        if known is not None:
            return known
        capture = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if capture._busy or capture._recorder.busy:
                return original(*args, **kwargs)
            return capture.call(prefix, api, original, args, kwargs)

        wrapper.__name__ = getattr(original, "__name__", api)
        wrapper.__qualname__ = getattr(original, "__qualname__", api)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        self._wrappers[key] = wrapper
        return wrapper

    def _primitive_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a Primitive class's ``__call__``: the API is the instance's class name (``MatMul``)."""
        capture = self

        def __call__(primitive: Any, *args: Any, **kwargs: Any) -> Any:
            name = type(primitive).__name__
            if capture._busy or capture._recorder.busy:
                return original(primitive, *args, **kwargs)
            if name in NOT_COMPUTING_PRIMITIVES:  # neither it nor what it calls is recorded
                capture._busy += 1
                try:
                    return original(primitive, *args, **kwargs)
                finally:
                    capture._busy -= 1
            return capture.call(
                "Primitive",
                name,
                lambda *a, **k: original(primitive, *a, **k),
                args,
                kwargs,
            )

        __call__.__qualname__ = getattr(original, "__qualname__", "__call__")
        __call__.__doc__ = getattr(original, "__doc__", None)
        return __call__

    def call(
        self, prefix: str, api: str, run: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run one top-level API call, telling the recorder before and after."""
        self._busy += 1
        try:
            token = self._recorder.begin(prefix, api, args, kwargs)
            output = run(*args, **kwargs)
            if token is not None:
                self._recorder.end(token, output)
                if self._recorder.backward_wanted:
                    self._hook_backward(token, output)
            return output
        except StepStopped:  # the cells this unwinds would leave their float16 switched on
            from ts_mindspore.mixed_precision import open_mixed_precision_cells, pop_mixed_precision

            pop_mixed_precision(open_mixed_precision_cells())
            raise
        finally:
            self._busy -= 1

    def _hook_backward(self, token: Any, output: Any) -> None:
        """Have the gradients into the call's differentiable outputs written as its backward record."""
        tensor = self._ms.Tensor
        outputs = output if isinstance(output, (tuple, list)) else (output,)
        wanted = [t for t in outputs if isinstance(t, tensor) and t.dtype in self._float_types]
        if not wanted:
            return
        grads: list[Any] = [None] * len(wanted)
        left = [len(wanted)]
        capture = weakref.ref(self)

        def receiver(position: int) -> Callable[[Any], None]:
            def on_grad(grad: Any) -> None:
                owner = capture()
                if owner is None or not owner._installed or grads[position] is not None:
                    return
                grads[position] = grad
                left[0] -= 1
                if left[0] == 0:
                    owner._busy += 1
                    try:
                        owner._recorder.backward(token, tuple(grads), ())
                    except Exception:  # a dump never stops training: say so and go on
                        log.exception("dump: the backward record of %s failed", token.name.ptdbg)
                    finally:
                        owner._busy -= 1

            return on_grad

        for position, value in enumerate(wanted):
            try:
                self._hooks.append(value.register_hook(receiver(position)))
            except RuntimeError:  # a tensor that takes no hook (no gradient flows through it)
                return
