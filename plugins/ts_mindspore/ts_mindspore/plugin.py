"""tscore hooks for MindSpore.

Loading this module never imports MindSpore: a hook that is asked about an
object answers only if ``mindspore`` is already in ``sys.modules``. The module
refuses to load when MindSpore is not installed at all, so tscore skips it
with one warning.

Graph mode: MindSpore runs ``tscore`` functions at run time (see
``tscore.mindspore_jit``) and compiles ``tscore.save_grad``, which asks
:func:`ts_compiled_grad_hook` for an ``InsertGradientOf`` primitive while the
graph is being built. The gradient callback below lives in this module,
which MindSpore compiles into the backward graph; the callback it calls is a
tscore function, which MindSpore runs at run time with the real gradient.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from tscore import hookimpl
from tscore.module_hooks import HookHandles, LayerInfo, ModuleRecorder
from tscore.tensor_meta import FrameworkInfo, TensorMeta

if importlib.util.find_spec("mindspore") is None:
    raise ImportError("ts_mindspore needs MindSpore, which is not installed (pip install mindspore)")

log = logging.getLogger(__name__)

FRAMEWORK = "mindspore"

# How far up the stack to look for MindSpore's graph compiler.
_COMPILE_SEARCH_DEPTH = 64


def _ms() -> Any:
    """Return the mindspore module if it is imported, else None (never imports it)."""
    return sys.modules.get("mindspore")


def _as_tensor(obj: object) -> Any:
    ms = _ms()
    if ms is not None and isinstance(obj, ms.Tensor):
        return obj
    return None


@hookimpl
def ts_framework_info() -> FrameworkInfo:
    """Name MindSpore, its installed version and whether it is imported."""
    return FrameworkInfo.installed(FRAMEWORK)


@hookimpl
def ts_is_tensor(obj: object) -> bool | None:
    """Claim ``mindspore.Tensor`` and ``Parameter``."""
    return True if _as_tensor(obj) is not None else None


@hookimpl
def ts_tensor_meta(obj: object) -> TensorMeta | None:
    """Describe a MindSpore tensor without copying it."""
    tensor = _as_tensor(obj)
    if tensor is None:
        return None
    return TensorMeta(
        framework=FRAMEWORK,
        dtype=str(tensor.dtype),
        shape=tuple(int(d) for d in tensor.shape),
        device=str(getattr(tensor, "device", "") or _ms().get_context("device_target")),
    )


def _ml_dtype(name: str) -> np.dtype | None:
    """Return the ml_dtypes type called ``name`` (MindSpore registers look-alikes of its own)."""
    found = getattr(ml_dtypes, name, None)
    return np.dtype(found) if found is not None else None


@hookimpl
def ts_to_numpy(obj: object, copy: bool) -> np.ndarray | None:
    """Copy a MindSpore tensor or Parameter to a host numpy array of the same dtype.

    MindSpore hands bfloat16 and float8 out as numpy dtypes of its own; they
    are reinterpreted, bit for bit, as the ``ml_dtypes`` types of the same
    name. Formats ml_dtypes lacks (``hifloat8``) are widened to float32.
    """
    tensor = _as_tensor(obj)
    if tensor is None:
        return None
    array = tensor.asnumpy()
    if array.dtype.kind == "V" and array.dtype.fields is None:
        target = _ml_dtype(array.dtype.name)
        if target is None or target.itemsize != array.dtype.itemsize:
            array = tensor.astype(_ms().float32).asnumpy()
        else:
            carrier = np.dtype(f"u{array.dtype.itemsize}")
            array = array.view(carrier).view(target)
    # asnumpy() shares the tensor's memory on CPU: copy when asked.
    return np.array(array, copy=True, order="C") if copy else np.asarray(array, order="C")


@hookimpl
def ts_from_numpy(array: np.ndarray, framework: str, like: object | None) -> Any:
    """Make a MindSpore tensor from a numpy array (ml_dtypes bfloat16/float8 included)."""
    if framework != FRAMEWORK and _as_tensor(like) is None:
        return None
    import mindspore as ms

    if array.dtype.kind == "V":
        ms_dtype = getattr(ms, array.dtype.name, None)
        if ms_dtype is None:
            raise TypeError(f"MindSpore has no dtype {array.dtype.name!r}")
        return ms.Tensor(array.astype(np.float32), dtype=ms_dtype)
    return ms.Tensor(np.array(array, copy=True, order="C"))


def _pass_gradient_through(callback: Callable[[object], None]) -> Callable[[Any], Any]:
    """Wrap ``callback`` as an ``InsertGradientOf`` function: see the gradient, return it unchanged."""
    from mindspore import mutable

    def save_then_pass(grad: Any) -> Any:
        # mutable: a gradient that is constant (ones, from ``sum()``) would
        # otherwise make MindSpore run the callback once while compiling,
        # and never again.
        callback(mutable(grad))
        return grad

    return save_then_pass


@hookimpl
def ts_attach_grad_hook(tensor: object, callback: Callable[[object], None]) -> Any:
    """Return ``tensor`` through an ``InsertGradientOf`` whose backward hands the gradient to ``callback``."""
    if _as_tensor(tensor) is None:
        return None
    from mindspore import ops

    return ops.InsertGradientOf(_pass_gradient_through(callback))(tensor)


def _compiling() -> bool:
    """Say whether MindSpore's graph compiler is on the stack (it calls us to evaluate constants)."""
    frame = sys._getframe(1)
    for _ in range(_COMPILE_SEARCH_DEPTH):
        if frame is None:
            return False
        if frame.f_code.co_name == "compile" and str(frame.f_globals.get("__name__", "")).startswith(
            "mindspore."
        ):
            return True
        frame = frame.f_back
    return False


@hookimpl
def ts_compiled_grad_hook(callback: Callable[[object], None]) -> Any:
    """While MindSpore compiles a graph, give it an ``InsertGradientOf`` that calls ``callback``."""
    if _ms() is None or not _compiling():
        return None
    from mindspore import ops

    return ops.InsertGradientOf(_pass_gradient_through(callback))


def _trainable_names(net: Any) -> list[str]:
    """Names of ``net``'s trainable parameters, in ``trainable_params()`` order.

    ``Parameter.name`` changes when a Cell is wrapped in another one, so the
    names come from ``parameters_and_names()`` of ``net`` itself.
    """
    by_id = {id(p): name for name, p in net.parameters_and_names()}
    return [by_id.get(id(p), p.name) for p in net.trainable_params()]


@hookimpl
def ts_model_grads(model: object, grads: object | None) -> dict[str, object] | None:
    """Name the gradients that ``grad``/``value_and_grad`` returned for ``model.trainable_params()``.

    Accepts the plain tuple of gradients or the ``(name, grad)`` pairs of
    ``return_ids=True``. Keys are ``{name}_{index}``.
    """
    ms = _ms()
    if ms is None or not isinstance(model, ms.nn.Cell):
        return None
    if grads is None:
        raise ValueError(
            "get_grads: MindSpore parameters do not keep their gradients; pass the gradients "
            "that ms.grad/value_and_grad returned for net.trainable_params()"
        )
    values = list(grads)  # type: ignore[call-overload]
    if values and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) for v in values):
        return {f"{name}_{index}": grad for index, (name, grad) in enumerate(values)}
    names = _trainable_names(model)
    if len(values) != len(names):
        raise ValueError(
            f"get_grads: {len(values)} gradients for {len(names)} trainable parameters of "
            f"{type(model).__name__}; pass the gradients of net.trainable_params() in order"
        )
    return {f"{name}_{index}": grad for index, (name, grad) in enumerate(zip(names, values, strict=True))}


@hookimpl
def ts_seed_all(seed: int, deterministic: bool) -> str | None:
    """Seed MindSpore; with ``deterministic`` switch on its deterministic kernels."""
    try:
        import mindspore as ms
    except ImportError as exc:
        log.warning("seed_all: mindspore is installed but does not import (%s); not seeded", exc)
        return None
    ms.set_seed(seed)
    if deterministic:
        ms.set_deterministic(True)
    return FRAMEWORK


@hookimpl
def ts_current_rank() -> int | None:
    """Return the rank of MindSpore's communication group when it is initialised."""
    if _ms() is None:
        return None
    try:
        from mindspore.communication import get_rank

        return int(get_rank())
    except Exception:  # not initialised: MindSpore raises RuntimeError or ValueError
        return None


@hookimpl
def ts_weight_rules(kind: str, source: str, target: str) -> dict[str, Any] | None:
    """Name torch layers' parameters as ``mindspore.nn`` names them (BatchNorm: weight -> gamma ...)."""
    from ts_mindspore.weight_rules import weight_rules

    return weight_rules(kind, source, target)


def _cell(model: object) -> Any:
    ms = _ms()
    return model if ms is not None and isinstance(model, ms.nn.Cell) else None


@hookimpl
def ts_named_layers(model: object) -> list[LayerInfo] | None:
    """List every cell of a ``mindspore.nn.Cell`` with its kind, own parameters and settings."""
    if _cell(model) is None:
        return None
    from ts_mindspore.cells import named_layers

    return named_layers(model)


@hookimpl
def ts_install_module_hooks(model: object, recorder: ModuleRecorder) -> HookHandles | None:
    """Report every cell call through cell forward pre-hooks and hooks, in PyNative mode until removed."""
    if _cell(model) is None:
        return None
    from ts_mindspore.cells import install_cell_hooks

    return install_cell_hooks(model, recorder)


@hookimpl
def ts_run_forward(model: object, args: Sequence[Any], kwargs: Mapping[str, Any], train: bool) -> Any:
    """Run a ``mindspore.nn.Cell`` with ``set_train(train)``; restore every cell's mode."""
    if _cell(model) is None:
        return None
    from ts_mindspore.cells import run_forward

    return run_forward(model, args, kwargs, train, lambda a: ts_from_numpy(a, FRAMEWORK, None))


@hookimpl
def ts_model_state(model: object) -> dict[str, np.ndarray] | None:
    """Copy a cell's parameters to numpy, named by ``parameters_and_names()``."""
    if _cell(model) is None:
        return None
    from ts_mindspore.cells import model_state

    return model_state(model, ts_to_numpy)


@hookimpl
def ts_load_model_state(model: object, params: Mapping[str, np.ndarray]) -> bool | None:
    """Copy arrays into a cell's parameters of the same names (``Parameter.set_data``)."""
    if _cell(model) is None:
        return None
    from ts_mindspore.cells import load_model_state

    load_model_state(model, params, lambda a: ts_from_numpy(a, FRAMEWORK, None))
    return True
