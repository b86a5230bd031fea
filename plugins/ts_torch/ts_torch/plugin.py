"""tscore hooks for PyTorch.

Loading this module never imports torch: a hook that is asked about an
object answers only if ``torch`` is already in ``sys.modules`` (an object
cannot be a torch tensor otherwise). The module refuses to load when torch is
not installed at all, so tscore skips it with one warning.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np

from tscore import hookimpl
from tscore.checkpoint.contents import CheckpointContents
from tscore.errors import UnsupportedObjectError
from tscore.module_hooks import HookHandles, LayerInfo, ModuleRecorder
from tscore.tensor_meta import FrameworkInfo, TensorMeta

if TYPE_CHECKING:
    import torch

if importlib.util.find_spec("torch") is None:
    raise ImportError("ts_torch needs PyTorch, which is not installed (pip install torch)")

log = logging.getLogger(__name__)

FRAMEWORK = "torch"

# torch dtypes that numpy cannot hold, by name, with the ml_dtypes type of the
# same bits and the integer type of the same width (same name in torch and
# numpy) that carries the bits across.
_BIT_CAST = {
    "bfloat16": (ml_dtypes.bfloat16, np.int16),
    "float8_e4m3fn": (ml_dtypes.float8_e4m3fn, np.uint8),
    "float8_e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, np.uint8),
    "float8_e5m2": (ml_dtypes.float8_e5m2, np.uint8),
    "float8_e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, np.uint8),
    "float8_e8m0fnu": (ml_dtypes.float8_e8m0fnu, np.uint8),
}


def _torch() -> Any:
    """Return the torch module if it is imported, else None (never imports it)."""
    return sys.modules.get("torch")


def _as_tensor(obj: object) -> torch.Tensor | None:
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        return obj
    return None


def _dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


@hookimpl
def ts_framework_info() -> FrameworkInfo:
    """Name PyTorch, its installed version and whether it is imported."""
    return FrameworkInfo.installed(FRAMEWORK)


@hookimpl
def ts_is_tensor(obj: object) -> bool | None:
    """Claim ``torch.Tensor`` and its subclasses (``nn.Parameter``)."""
    return True if _as_tensor(obj) is not None else None


@hookimpl
def ts_tensor_meta(obj: object) -> TensorMeta | None:
    """Describe a torch tensor without copying it."""
    tensor = _as_tensor(obj)
    if tensor is None:
        return None
    return TensorMeta(
        framework=FRAMEWORK,
        dtype=str(tensor.dtype),
        shape=tuple(int(d) for d in tensor.shape),
        device=str(tensor.device),
    )


@hookimpl
def ts_to_numpy(obj: object, copy: bool) -> np.ndarray | None:
    """Copy a torch tensor to a host numpy array of the same dtype.

    Works for tensors that require grad, views, conjugated or negated views,
    sparse and quantized tensors (dequantized), tensors on any device;
    bfloat16 and float8 become ``ml_dtypes`` arrays, complex32 complex64.
    """
    tensor = _as_tensor(obj)
    if tensor is None:
        return None
    torch = _torch()
    t = tensor.detach()
    if t.device.type == "meta":
        raise UnsupportedObjectError("cannot convert a torch tensor on the 'meta' device: it has no values")
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_quantized:
        t = t.dequantize()
    t = t.resolve_conj().resolve_neg()
    copied = t.device.type != "cpu"
    t = t.cpu().contiguous()
    name = _dtype_name(t)
    if name in _BIT_CAST:
        target, carrier = _BIT_CAST[name]
        array = t.view(getattr(torch, np.dtype(carrier).name)).numpy().view(target)
    elif t.dtype == torch.complex32:
        array, copied = t.to(torch.complex64).numpy(), True
    else:
        array = t.numpy()
    # A CPU tensor's .numpy() shares its memory: copy when asked, so that a
    # later in-place update of the tensor cannot change the array.
    if copy and not copied:
        return np.array(array, copy=True, order="C")
    return np.asarray(array, order="C")


@hookimpl
def ts_from_numpy(array: np.ndarray, framework: str, like: object | None) -> Any:
    """Make a torch tensor from a numpy array (ml_dtypes bfloat16/float8 included)."""
    like_tensor = _as_tensor(like)
    if framework != FRAMEWORK and like_tensor is None:
        return None
    import torch

    for name, (source, carrier) in _BIT_CAST.items():
        if array.dtype == np.dtype(source):
            tensor = torch.from_numpy(np.asarray(array, order="C").view(carrier).copy())
            tensor = tensor.view(getattr(torch, name))
            break
    else:
        tensor = torch.from_numpy(np.array(array, copy=True, order="C"))
    return tensor.to(like_tensor.device) if like_tensor is not None else tensor


@hookimpl
def ts_attach_grad_hook(tensor: object, callback: Callable[[object], None]) -> Any:
    """Return a view of ``tensor`` whose gradient is handed to ``callback`` in backward."""
    t = _as_tensor(tensor)
    if t is None:
        return None
    if not t.requires_grad:
        log.warning(
            "save_grad: the torch tensor does not require grad, so no gradient will reach it; "
            "nothing will be saved for it"
        )
        return t
    out = t.view_as(t)

    def save_then_pass(grad: torch.Tensor) -> None:
        callback(grad)

    out.register_hook(save_then_pass)
    return out


@hookimpl
def ts_model_grads(model: object, grads: object | None) -> dict[str, object] | None:
    """Name the gradients of a ``torch.nn.Module``'s trainable parameters.

    Keys are ``{name}_{index}`` with the index among parameters that require
    grad. Without ``grads`` they are read from ``.grad`` (parameters whose
    ``.grad`` is None are left out); with ``grads`` (from
    ``torch.autograd.grad``) they are paired with the parameters in order.
    """
    torch = _torch()
    if torch is None or not isinstance(model, torch.nn.Module):
        return None
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    if grads is None:
        values = [p.grad for _, p in trainable]
    else:
        values = list(grads)  # type: ignore[call-overload]
        if len(values) != len(trainable):
            raise ValueError(
                f"get_grads: {len(values)} gradients for {len(trainable)} trainable parameters "
                f"of {type(model).__name__}; pass the gradients of all trainable parameters in order"
            )
    return {
        f"{name}_{index}": grad
        for index, ((name, _), grad) in enumerate(zip(trainable, values, strict=True))
        if grad is not None
    }


@hookimpl
def ts_seed_all(seed: int, deterministic: bool) -> str | None:
    """Seed torch on every device; with ``deterministic`` switch on deterministic algorithms."""
    try:
        import torch
    except ImportError as exc:  # installed but broken (for instance torch_npu without CANN)
        log.warning("seed_all: torch is installed but does not import (%s); not seeded", exc)
        return None
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    return FRAMEWORK


@hookimpl
def ts_current_rank() -> int | None:
    """Return the rank of ``torch.distributed`` when it is initialised."""
    torch = _torch()
    if torch is None or not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return None
    return int(torch.distributed.get_rank())


@hookimpl
def ts_load_checkpoint(path: str, kind: str, trust: bool) -> CheckpointContents | None:
    """Read a torch ``.pth``/``.pt`` file: a state dict, a dict holding one, or (trusted) a module."""
    if kind != "pth":
        return None
    from ts_torch.checkpoints import read_pth

    return read_pth(path, trust, ts_to_numpy)


@hookimpl
def ts_save_checkpoint(params: Mapping[str, np.ndarray], path: str, format: str) -> bool | None:
    """Write ``format="pth"``: a plain state dict of torch tensors."""
    if format not in ("pth", "pt"):
        return None
    from ts_torch.checkpoints import write_pth

    write_pth(params, path, ts_from_numpy)
    return True


@hookimpl
def ts_layer_params(model: object) -> Sequence[tuple[str, str, Sequence[str]]] | None:
    """List a ``torch.nn.Module``'s layers with their neutral kinds and state-dict entries."""
    torch = _torch()
    if torch is None or not isinstance(model, torch.nn.Module):
        return None
    from ts_torch.layers import layer_params

    return layer_params(model)


def _module(model: object) -> Any:
    torch = _torch()
    return model if torch is not None and isinstance(model, torch.nn.Module) else None


@hookimpl
def ts_named_layers(model: object) -> list[LayerInfo] | None:
    """List every module of a ``torch.nn.Module`` with its kind, own state entries and settings."""
    if _module(model) is None:
        return None
    from ts_torch.modules import named_layers

    return named_layers(model)


@hookimpl
def ts_install_module_hooks(model: object, recorder: ModuleRecorder) -> HookHandles | None:
    """Report every module call of a ``torch.nn.Module`` through forward pre-hooks and hooks."""
    if _module(model) is None:
        return None
    from ts_torch.modules import install_module_hooks

    return install_module_hooks(model, recorder)


@hookimpl
def ts_run_forward(model: object, args: Sequence[Any], kwargs: Mapping[str, Any], train: bool) -> Any:
    """Run a ``torch.nn.Module`` under ``no_grad`` on its parameters' device; restore every module's mode."""
    if _module(model) is None:
        return None
    from ts_torch.modules import run_forward

    return run_forward(model, args, kwargs, train, lambda a: ts_from_numpy(a, FRAMEWORK, None))


@hookimpl
def ts_model_state(model: object) -> dict[str, np.ndarray] | None:
    """Copy a ``torch.nn.Module``'s state dict to numpy."""
    if _module(model) is None:
        return None
    from ts_torch.modules import model_state

    return model_state(model, ts_to_numpy)


@hookimpl
def ts_load_model_state(model: object, params: Mapping[str, np.ndarray]) -> bool | None:
    """Copy arrays into a ``torch.nn.Module``'s state entries of the same names."""
    if _module(model) is None:
        return None
    from ts_torch.modules import load_model_state

    load_model_state(model, params)
    return True
