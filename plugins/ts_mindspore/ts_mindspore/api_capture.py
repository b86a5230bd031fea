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

Backward, while autodiff records (``value_and_grad``): each differentiable
output of a dumped call gets a ``Tensor.register_hook`` (the gradients into the
call), and each floating tensor argument is passed through an
``ops.HookBackward`` identity (the gradient the call sends back to it, as msprobe
takes it). The record is written once all of them have arrived, or at removal
with what did. Parameters, in-place calls and calls that return a view keep
their arguments as given (a copy would be written into or viewed instead), so
their positions read ``None``.
"""

from __future__ import annotations

import inspect
import logging
import sys
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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
# Tensor's arithmetic operators by their base names: __add__, __radd__ and the in-place __iadd__
ARITHMETIC = (
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
# operators of Tensor that compute (comparisons included, as ptdbg and msprobe dump them)
OPERATORS = frozenset(
    {
        *(f"__{op}__" for base in ARITHMETIC for op in (base, f"r{base}", f"i{base}")),
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


# the targets of the last install, with the number of Primitive classes then and whether that install
# used the shared wrappers (see _known_targets)
_TARGETS: tuple[tuple[int, bool], list[tuple[str, Any, str, Any]]] | None = None


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


# calls that write into an argument, or return a view of it: their arguments are passed as they are
IN_PLACE_OPERATORS = frozenset(f"__i{base}__" for base in ARITHMETIC) | {"__setitem__"}
IN_PLACE_PRIMITIVES = frozenset(
    {"Assign", "AssignAdd", "AssignSub", "ScatterUpdate", "ScatterNdUpdate", "ScatterAdd", "ScatterNdAdd"}
    | {"ScatterSub", "ScatterMul", "ScatterDiv", "ScatterMax", "ScatterMin", "Depend", "UpdateState", "Load"}
)
VIEWS = frozenset(
    {"view", "view_as", "reshape", "expand", "expand_as", "broadcast_to", "narrow", "unsqueeze", "squeeze"}
    | {"transpose", "permute", "t", "flatten", "as_strided", "__getitem__", "select", "unfold", "diagonal"}
    | {"split", "chunk", "unbind", "tensor_split", "movedim", "swapaxes", "contiguous", "detach"}
)


# set on an operator the dump itself launches (ts_mindspore.pipeline_stats): never recorded
DUMPS_OWN = "_tscore_dumps_own"


class _Active:
    """The capture a set of wrappers reports to while it is installed; None: they call the original."""

    __slots__ = ("capture",)

    def __init__(self, capture: ApiCapture | None = None) -> None:
        self.capture = capture


# The wrappers of the APIs' own functions, made once per process and installed again by every dump:
# making 1,400 closures a step cost 5 ms, and each step's were cyclic garbage (a wrapper holds its
# capture, which holds its wrappers), 11,000 objects a step for Python's full collections.
_SHARED = _Active()
_SHARED_WRAPPERS: dict[tuple[int, str], Callable[..., Any]] = {}
# what a shared wrapper carries: the original it stands for. Found installed while no dump runs (a
# dump stopped before the one started inside it put it back), it is taken for that original
_WRAPS = "_tscore_shared_wrapper_of"


@dataclass(eq=False)
class _Backward:
    """A dumped call's backward record in the making: the gradients into its outputs and out to its inputs."""

    token: Any
    out: list[Any]  # per positional argument: the gradient the call sent it (None: not hooked or not yet)
    into: list[Any] = field(default_factory=list)  # per floating output: the gradient it received
    left_into: int = 0
    left_out: int = 0
    written: bool = False


def pynative_executor() -> Any:
    """Return MindSpore's PyNative executor (autodiff's state, the mixed-precision stack); None if absent."""
    try:
        from mindspore.graph.api import _pynative_executor
    except ImportError:  # before MindSpore 2.9
        try:
            from mindspore.common.api import _pynative_executor
        except ImportError:
            return None
    return _pynative_executor


def _put_back(owner: Any, name: str, original: Any) -> None:
    """Give ``owner`` its ``original`` again: by deleting its own attribute where it inherits it."""
    if name in vars(owner):
        delattr(owner, name)
    if getattr(owner, name, None) is not original:
        setattr(owner, name, original)


class ApiCapture:
    """Report MindSpore API calls to a dump recorder while installed; every attribute restored on removal."""

    def __init__(self, recorder: Any, after_call: Callable[[], None] | None = None) -> None:
        """Prepare; nothing is replaced until :meth:`install`.

        :param after_call: run when each recorded call returns, in the user's frame: it may raise
            (an error of the user's operators that the dump took in while recording the call).
        """
        self._ms = sys.modules["mindspore"]
        self._recorder = recorder
        self._after_call = after_call
        self._busy = 0
        self._installed = False
        # (owner, attribute, original, whether the owner held it itself rather than inherited it)
        self._patched: list[tuple[Any, str, Any, bool]] = []
        # the wrappers' slot: the shared one, unless another capture holds it (a dump inside a dump,
        # whose wrappers then wrap the outer dump's)
        self._active = _SHARED
        self._wrappers = _SHARED_WRAPPERS
        self._hooks: list[Any] = []
        self._pending: set[_Backward] = set()  # calls whose backward record waits for a gradient
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
        if self._wrappers is _SHARED_WRAPPERS:  # no other dump runs: a shared wrapper found is a leftover
            found = [(prefix, owner, name, getattr(fn, _WRAPS, fn)) for prefix, owner, name, fn in found]
        return found

    def _known_targets(self) -> list[tuple[str, Any, str, Any]]:
        """Return the targets of an earlier install while every one is still in place; else find them anew.

        Finding them walks 3,000 attributes and every Primitive class (45 ms, a sixth of a small
        encoder's step); checking that each owner still holds the same object costs 1 ms. A new
        Primitive class or function, or one the user replaced, makes the list found again.
        """
        global _TARGETS
        count = sum(1 for _ in _primitive_classes(self._ms.ops.Primitive))
        shared = self._wrappers is _SHARED_WRAPPERS
        if (
            _TARGETS is not None
            and _TARGETS[0] == (count, shared)
            and all(getattr(owner, name, None) is original for _, owner, name, original in _TARGETS[1])
        ):
            return _TARGETS[1]
        found = self.targets()
        _TARGETS = ((count, shared), found)
        if shared:  # the wrappers of functions no longer there go: each holds its original alive
            wanted = {(id(fn), prefix) for prefix, _, _, fn in found}
            for key in [key for key in _SHARED_WRAPPERS if key not in wanted]:
                del _SHARED_WRAPPERS[key]
        return found

    def install(self) -> HookHandles:
        """Replace every target with its wrapper; the returned handles put the originals back."""
        if _SHARED.capture is not None:
            self._active, self._wrappers = _Active(), {}
        self._active.capture = self
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
        # a dump started inside another that has stopped already: what it wrapped were that dump's
        # wrappers, which would stay installed; the originals they stand for go back instead
        outer_gone = self._wrappers is not _SHARED_WRAPPERS and _SHARED.capture is None
        for owner, name, original, own in reversed(patched):
            if outer_gone and hasattr(original, _WRAPS):
                _put_back(owner, name, getattr(original, _WRAPS))
            elif own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        if self._active.capture is self:
            self._active.capture = None  # a wrapper someone kept calls the original from now on
        self.flush_backward()
        self._pending.clear()  # calls whose outputs never got a gradient: no backward ran for them
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
        active = self._active

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            capture = active.capture
            if capture is None or capture._busy or capture._recorder.busy:
                return original(*args, **kwargs)
            return capture.call(prefix, api, original, args, kwargs)

        wrapper.__name__ = getattr(original, "__name__", api)
        wrapper.__qualname__ = getattr(original, "__qualname__", api)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        # MindSpore's graph compiler unwraps a function before parsing it (inspect.unwrap): a
        # @jit construct that calls this API (nn.Adam's) compiles the original, not the wrapper
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        self._keep(key, wrapper, original)
        return wrapper

    def _keep(self, key: tuple[int, str], wrapper: Callable[..., Any], original: Callable[..., Any]) -> None:
        """Keep a new wrapper for the next install; a shared one says which original it stands for."""
        if self._wrappers is _SHARED_WRAPPERS:
            setattr(wrapper, _WRAPS, original)
        self._wrappers[key] = wrapper

    def _primitive_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a Primitive class's ``__call__``: the API is the instance's class name (``MatMul``)."""
        key = (id(original), "Primitive")
        known = self._wrappers.get(key)
        if known is not None:
            return known
        active = self._active

        def __call__(primitive: Any, *args: Any, **kwargs: Any) -> Any:
            capture = active.capture
            if (
                capture is None
                or capture._busy
                or capture._recorder.busy
                or getattr(primitive, DUMPS_OWN, False)
            ):
                return original(primitive, *args, **kwargs)
            name = type(primitive).__name__
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
        self._keep(key, __call__, original)
        return __call__

    def call(
        self, prefix: str, api: str, run: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run one top-level API call, telling the recorder before and after."""
        self._busy += 1
        try:
            if self._pending:  # a forward call after a backward: what had not come by then never will
                self.flush_backward()
            token = self._recorder.begin(prefix, api, args, kwargs)
            state = None
            if token is not None and self._recorder.backward_wanted and self._recording_grads():
                state = _Backward(token, [None] * len(args))
                if self._recorder.config_wants("backward", "output"):  # data_mode keeps what it sends back
                    args = self._hook_inputs(state, prefix, api, args, kwargs)
            output = run(*args, **kwargs)
            if token is not None:
                self._recorder.end(token, output)
                if state is not None:
                    self._hook_backward(state, output)
            if self._after_call is not None:
                self._after_call()
            return output
        except StepStopped:  # the cells this unwinds would leave their float16 switched on
            from ts_mindspore.mixed_precision import open_mixed_precision_cells, pop_mixed_precision

            pop_mixed_precision(open_mixed_precision_cells())
            raise
        finally:
            self._busy -= 1

    def _recording_grads(self) -> bool:
        """Say whether autodiff records this call (inside ``value_and_grad``): only then has it a backward."""
        executor = pynative_executor()
        return executor is not None and bool(executor.grad_flag())

    def _hook_inputs(
        self, state: _Backward, prefix: str, api: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Any, ...]:
        """Pass each floating tensor argument through ``ops.HookBackward``: what the call sends it comes back.

        The identity changes no value. Parameters and in-place calls keep their arguments: the
        call must write into the tensor it was given, not into a copy.
        """
        name = api.lower()
        in_place = (
            (api.endswith("_") and not api.endswith("__"))  # relu_, add_, clamp_: any prefix
            or api in IN_PLACE_OPERATORS
            or api in IN_PLACE_PRIMITIVES
            or name.startswith("inplace")
            or bool(kwargs.get("inplace"))
        )
        if in_place or name in VIEWS:
            return args
        ms = self._ms
        hooked = list(args)
        for position, value in enumerate(args):
            if (
                isinstance(value, ms.Tensor)
                and not isinstance(value, ms.Parameter)
                and value.dtype in self._float_types
            ):
                state.left_out += 1
                hooked[position] = ms.ops.HookBackward(self._receiver(state, position, "out"))(value)
        return tuple(hooked)

    def _receiver(self, state: _Backward, position: int, side: str) -> Callable[[Any], None]:
        """Return a gradient hook that files ``grad`` in ``state`` and writes the record once it is whole."""
        capture = weakref.ref(self)

        def on_grad(grad: Any) -> None:
            owner = capture()
            if owner is None or not owner._installed:
                return None
            if isinstance(grad, tuple) and len(grad) == 1:  # HookBackward hands a 1-tuple
                grad = grad[0]
            into = side == "into"
            grads = state.into if into else state.out
            if grads[position] is not None:
                return None
            grads[position] = grad
            if into:
                state.left_into -= 1
            else:
                state.left_out -= 1
            if state.left_into == 0 and state.left_out == 0:
                owner._write_backward(state)
            return None  # the gradient goes on unchanged

        return on_grad

    def _write_backward(self, state: _Backward) -> None:
        if state.written:
            return
        state.written = True
        self._pending.discard(state)
        self._busy += 1
        try:
            self._recorder.backward(state.token, tuple(state.into), tuple(state.out))
        except Exception:  # a dump never stops training: say so and go on
            log.exception("dump: the backward record of %s failed", state.token.name.ptdbg)
        finally:
            self._busy -= 1

    def _hook_backward(self, state: _Backward, output: Any) -> None:
        """Have the gradients into the call's outputs and out to its inputs written as its backward record."""
        tensor = self._ms.Tensor
        outputs = output if isinstance(output, (tuple, list)) else (output,)
        wanted = [t for t in outputs if isinstance(t, tensor) and t.dtype in self._float_types]
        if not wanted:
            return
        state.into = [None] * len(wanted)
        state.left_into = len(wanted)
        self._pending.add(state)
        for position, value in enumerate(wanted):
            try:
                self._hooks.append(value.register_hook(self._receiver(state, position, "into")))
            except RuntimeError:  # a tensor that takes no hook (no gradient flows through it)
                self._pending.discard(state)
                return

    def flush_backward(self) -> None:
        """Write the backward records whose outputs got their gradients but some input never did.

        The others stay pending: their backward has not run yet.
        """
        for state in list(self._pending):
            if state.left_into == 0:
                self._write_backward(state)
