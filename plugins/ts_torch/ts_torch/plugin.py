"""tscore backend for PyTorch.

Loading this module never imports torch: :class:`TorchBackend` claims an
object only when ``torch`` is already in ``sys.modules`` (an object cannot be
a torch tensor otherwise). The module refuses to load when torch is not
installed at all, so tscore skips it with one warning. torch's parameter
names and layouts are tscore's neutral form, so it states no weight
convention.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from tscore.plugin_api import (
    Backend,
    CheckpointContents,
    HookHandles,
    LayerInfo,
    ModuleRecorder,
    PendingArray,
    RunSetting,
    UnsupportedObjectError,
    layout_from_attributes,
    memory_stats,
    memory_stats_dtypes,
    read_package_json,
)

if importlib.util.find_spec("torch") is None:
    raise ImportError("ts_torch needs PyTorch, which is not installed (pip install torch)")

from ts_torch.device_copies import copy_to_host, device_stats, stats_to_host
from ts_torch.fused_stats import launch as launch_fused_stats
from ts_torch.numeric_settings import run_settings
from ts_torch.tensor_memory import laid_out_in_own_memory, plain_tensor

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


_WIDE_ENOUGH: tuple[Any, ...] = ()  # float32 and float64, filled once torch is imported


def _dtype_name(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _synchronize(torch: Any, device: Any) -> None:
    """Wait for every stream of ``device`` (torch.accelerator where torch has it, else CUDA's)."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "synchronize"):
        accelerator.synchronize(device)
    elif device.type == "cuda":
        torch.cuda.synchronize(device)


@functools.cache
def _host_dtypes(torch: Any) -> dict[Any, np.dtype]:
    """Map the torch dtypes whose CPU tensors the compiled statistics read to their numpy dtypes."""
    # by the name torch, numpy and ml_dtypes share (uint16-64: torch 2.3 and later)
    return {getattr(torch, d.name): d for d in memory_stats_dtypes() if hasattr(torch, d.name)}


def _host_stats(tensor: Any) -> tuple[float, float, float, float] | None:
    """Max, min, mean and norm of a CPU tensor in one compiled pass over its memory (``memory_stats``).

    A third to a half of the time of torch's three reductions and four reads (``nox -s
    bench_host_stats``), and the mean and norm are summed in float64. None where the kernel
    cannot read the tensor as it lies (sparse, quantized, negated, complex and other dtypes, a
    subclass, a storage that does not hold its elements: :mod:`ts_torch.tensor_memory`) or was
    not built: torch's reductions do those. A strided view is read through a contiguous copy.
    """
    torch = sys.modules["torch"]
    dtype = _host_dtypes(torch).get(tensor.dtype)
    # quantized tensors have dtypes of their own (qint8 ...), none of them in the map
    if dtype is None or not plain_tensor(tensor) or tensor.layout != torch.strided or tensor.is_neg():
        return None
    t = tensor if tensor.is_contiguous() else tensor.contiguous()
    if not laid_out_in_own_memory(t):  # a storage FSDP freed, a tensor inside vmap
        return None
    return memory_stats(t.data_ptr(), dtype, t.numel())


def runs_behind_host(tensor: Any) -> bool:
    """Whether reading a value of ``tensor`` waits for its device: every device but the CPU."""
    return not tensor.is_cpu


class TorchBackend(Backend):
    """Tensors, gradients, checkpoints and networks of PyTorch."""

    framework = FRAMEWORK
    checkpoint_kinds = ("pth", "pt")

    def imported(self) -> Any:
        """Return torch if the program imported it; None where ``torch`` is a torch-API layer's stand-in.

        mindnlp's ``mindtorch`` answers ``import torch`` with itself (its classes are MindSpore's):
        those tensors and networks are the MSAdapter backend's, not this one's.
        """
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        loader = getattr(getattr(torch, "__spec__", None), "loader", None)
        folder = os.path.basename(os.path.dirname(str(getattr(torch, "__file__", "") or "")))
        if type(loader).__module__.startswith("mindtorch") or folder == "mindtorch":
            return None
        return torch

    def tensor_types(self) -> tuple[type, ...]:
        """``torch.Tensor`` and its subclasses (``nn.Parameter``)."""
        global _WIDE_ENOUGH
        torch = sys.modules["torch"]
        _WIDE_ENOUGH = (torch.float32, torch.float64)
        return (torch.Tensor,)

    def model_types(self) -> tuple[type, ...]:
        """``torch.nn.Module``."""
        return (sys.modules["torch"].nn.Module,)

    def tensor_device(self, tensor: Any) -> str:
        """``cpu``, ``cuda:0``, ``npu:0``."""
        return "cpu" if tensor.is_cpu else str(tensor.device)

    def model_device(self, model: Any) -> str:
        """Return the device of the first parameter or buffer."""
        import itertools

        first = next(itertools.chain(model.parameters(), model.buffers()), None)
        return "cpu" if first is None else str(first.device)

    def to_numpy(self, tensor: Any, copy: bool) -> np.ndarray:
        """Copy a torch tensor to a host numpy array of the same dtype.

        Works for tensors that require grad, views, conjugated or negated views,
        sparse and quantized tensors (dequantized), tensors on any device;
        bfloat16 and float8 become ``ml_dtypes`` arrays, complex32 complex64.
        """
        torch = sys.modules["torch"]
        t = tensor.detach()
        if t.device.type == "meta":
            raise UnsupportedObjectError(
                "cannot convert a torch tensor on the 'meta' device: it has no values"
            )
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

    def from_numpy(self, array: np.ndarray, like: Any | None) -> Any:
        """Make a torch tensor from a numpy array (ml_dtypes bfloat16/float8 included)."""
        import torch

        for name, (source, carrier) in _BIT_CAST.items():
            if array.dtype == np.dtype(source):
                tensor = torch.from_numpy(np.asarray(array, order="C").view(carrier).copy())
                tensor = tensor.view(getattr(torch, name))
                break
        else:
            tensor = torch.from_numpy(np.array(array, copy=True, order="C"))
        return tensor.to(like.device) if like is not None else tensor

    def attach_grad_hook(self, tensor: Any, callback: Callable[[object], None]) -> Any:
        """Return a view of ``tensor`` whose gradient is handed to ``callback`` in backward."""
        if not tensor.requires_grad:
            log.warning(
                "save_grad: the torch tensor does not require grad, so no gradient will reach it; "
                "nothing will be saved for it"
            )
            return tensor
        out = tensor.view_as(tensor)

        def save_then_pass(grad: Any) -> None:
            callback(grad)

        out.register_hook(save_then_pass)
        return out

    def model_grads(self, model: Any, grads: object | None) -> dict[str, object]:
        """Name the gradients of a ``torch.nn.Module``'s trainable parameters.

        Keys are ``{name}_{index}`` with the index among parameters that require
        grad. Without ``grads`` they are read from ``.grad`` (parameters whose
        ``.grad`` is None are left out); with ``grads`` (from
        ``torch.autograd.grad``) they are paired with the parameters in order.
        """
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

    def seed(self, seed: int, deterministic: bool) -> None:
        """Seed torch on every device; with ``deterministic`` switch on deterministic algorithms."""
        import torch

        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
        if deterministic:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True)
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False

    def install_api_hooks(self, recorder: Any) -> HookHandles:
        """Report every torch API call through a ``TorchFunctionMode``; backward through ``grad_fn`` hooks.

        The compiled capture (:mod:`ts_torch.compiled_capture`) where the dump takes summaries
        and the extension builds; the Python one (:mod:`ts_torch.api_capture`) otherwise.
        """
        from ts_torch.compiled_capture import compiled_capture_for

        compiled = compiled_capture_for(recorder, self)
        if compiled is not None:
            return compiled.install()
        from ts_torch.api_capture import ApiCapture

        return ApiCapture(recorder).install()

    def tensor_stats(self, tensor: Any) -> Any:
        """Max, min, mean and L2 norm (None when empty): four floats on the CPU, else left on the device.

        On the CPU, one compiled pass over the tensor's memory (:func:`_host_stats`, sums in
        float64), else three reductions (``aminmax``, ``sum``, ``vector_norm``); on any other
        device two (``aminmax``, ``var_mean``: :mod:`ts_torch.device_copies`), which
        :meth:`stats_to_host` turns into the four numbers. The reductions run in float32 for half
        types and float64 for integers, with no autograd graph (the API capture runs the recorder with
        gradients off; otherwise the tensor is detached); nothing leaves the device here.
        """
        import torch

        if tensor.is_meta:
            raise UnsupportedObjectError("a tensor on the 'meta' device has no values to summarise")
        count = tensor.numel()
        if count == 0:
            return None
        if tensor.is_cpu:
            found = _host_stats(tensor)
            if found is not None:
                return found
        elif (fused := launch_fused_stats(tensor)) is not None:
            return fused  # one pass, halves read as they are (ts_torch.fused_stats)
        t = tensor.detach() if tensor.requires_grad and torch.is_grad_enabled() else tensor
        if t.dtype not in _WIDE_ENOUGH:
            if t.is_complex():
                t = t.abs()
            t = t.to(torch.float32 if t.is_floating_point() else torch.float64)
        if not t.is_cpu:  # two passes, gathered and copied to the host a batch at a time
            return device_stats(t)
        low, high = torch.aminmax(t)
        # numbers at once (the CPU has no queue to wait for): four 0-d tensors held until the
        # writer reads them would live through the step's garbage collections
        return high.item(), low.item(), t.sum().item() / count, torch.linalg.vector_norm(t).item()

    def stats_to_host(self, stats: Sequence[Any]) -> Callable[[], Sequence[Sequence[float | None]]] | None:
        """Gather the statistics of many device tensors with one ``stack`` and one asynchronous copy."""
        return stats_to_host(stats)

    def copy_to_host(self, tensor: Any) -> PendingArray | None:
        """Copy a CUDA tensor into pinned memory on a side stream; None for tensors in host memory."""
        return copy_to_host(tensor, self.to_numpy)

    def run_settings(self, device: str) -> Sequence[RunSetting]:
        """Report TF32 (matmul, cuDNN), float32 matmul precision, determinism, cuDNN benchmark, autocast."""
        return run_settings(device)

    def tensor_requires_grad(self, tensor: Any) -> bool | None:
        """Return ``tensor.requires_grad``."""
        return bool(tensor.requires_grad)

    def tensor_abs_max(self, tensor: Any) -> Any:
        """Return the largest |x|: one ``aminmax`` on the tensor's device, NaN and inf kept.

        A float for a tensor in host memory; on a device, a 0-d tensor left there, unread
        (:meth:`read_scalars` reads many at once). None for integer, bool, complex, empty and meta
        tensors: they cannot overflow to inf.
        """
        import torch

        if not tensor.is_floating_point() or tensor.is_meta or tensor.numel() == 0:
            return None
        t = tensor.detach() if tensor.requires_grad and torch.is_grad_enabled() else tensor
        if runs_behind_host(t):  # reading it would wait for the device: NaN carries through maximum
            low, high = torch.aminmax(t)
            return torch.maximum(high, low.neg())
        low, high = (float(v) for v in torch.aminmax(t))  # one kernel; the rest is two numbers
        if low != low or high != high:
            return math.nan
        return max(high, -low)

    def tensor_finite_probe(self, tensor: Any) -> Any:
        """Return the sum of a float32 or float64 tensor: finite when every element is.

        One ``torch.sum`` (about five times cheaper than ``aminmax`` on a CPU): a float for a
        tensor in host memory. On any other device, the largest magnitude, left there as a 0-d
        tensor (:meth:`tensor_abs_max`): exact, where a sum of finite values may be inf.
        None for other dtypes (half types go to :meth:`tensor_abs_max`, whose value their near
        misses need), empty and meta tensors.
        """
        import torch

        if tensor.dtype not in (torch.float32, torch.float64) or tensor.is_meta or tensor.numel() == 0:
            return None
        t = tensor.detach() if tensor.requires_grad and torch.is_grad_enabled() else tensor
        if runs_behind_host(t):
            # read later, after in-place calls may have changed the tensor: a probe that finite values
            # can never make inf (a sum can), so that a non-finite one is an overflow for sure
            return self.tensor_abs_max(t)
        return float(torch.sum(t))

    def read_scalars(self, values: Sequence[Any]) -> Sequence[float]:
        """Read many one-element tensors: one ``stack`` and one ``tolist()`` per device and dtype.

        The device is synchronised first: a probe may have been made on another stream than the
        current one (a backward's).
        """
        import torch

        groups: dict[tuple[Any, Any], list[int]] = {}
        for index, value in enumerate(values):
            groups.setdefault((value.device, value.dtype), []).append(index)
        found = [math.nan] * len(values)
        synced: set[Any] = set()
        with torch.no_grad():
            for (device, _), indices in groups.items():
                if device.type != "cpu" and device not in synced:  # probes made on any stream, backward's too
                    synced.add(device)
                    _synchronize(torch, device)
                read = torch.stack([values[i].reshape(()) for i in indices]).tolist()
                for index, value in zip(indices, read, strict=True):
                    found[index] = float(value)
        return found

    def tensor_key(self, tensor: Any) -> Any:
        """Identify the contents: memory, version counter (it moves on every in-place change), layout.

        One flat tuple of numbers (shape, -1, strides): Python's garbage collector stops tracking
        it at once, where a tuple holding ``torch.Size`` would stay tracked for the whole step.
        """
        if tensor.is_inference():  # no version counter: no way to tell an unchanged tensor
            return None
        return (tensor.data_ptr(), tensor._version, tensor.dtype, *tensor.shape, -1, *tensor.stride())

    def dump_api_names(self) -> Mapping[str, Mapping[str, Any]]:
        """Answer ``ts_dump_api_names``: torch's dumped APIs as neutral operations (a data file)."""
        return read_package_json("ts_torch", "dump_api_names.json")  # type: ignore[no-any-return]

    def current_rank(self) -> int | None:
        """Return the rank of ``torch.distributed`` when it is initialised."""
        torch = sys.modules["torch"]
        distributed = getattr(torch, "distributed", None)
        if distributed is None or not distributed.is_available() or not distributed.is_initialized():
            return None
        return int(distributed.get_rank())

    def load_checkpoint(self, path: str, kind: str, trust: bool) -> CheckpointContents:
        """Read a torch ``.pth``/``.pt`` file: a state dict, a dict holding one, or (trusted) a module."""
        from ts_torch.checkpoints import read_pth

        return read_pth(path, trust, self.to_numpy)

    def save_checkpoint(self, params: Mapping[str, np.ndarray], path: str, format: str) -> None:
        """Write a plain state dict of torch tensors."""
        from ts_torch.checkpoints import write_pth

        write_pth(params, path, lambda a, framework, like: self.from_numpy(a, None))

    def layer_params(self, model: Any) -> Sequence[tuple[str, str, Sequence[str]]]:
        """List a module's layers with their neutral kinds and state-dict entries."""
        from ts_torch.layers import layer_params

        return layer_params(model)

    def named_layers(self, model: Any) -> list[LayerInfo]:
        """List every module with its kind, own state entries and settings."""
        from ts_torch.modules import named_layers

        return named_layers(model)

    def layer_layout(self, layer: Any, kind: str) -> str | None:
        """Say channels first for every torch layer with channels (``channels_last`` memory keeps shapes)."""
        return layout_from_attributes(layer, kind, (), default="channels_first")

    def install_module_hooks(self, model: Any, recorder: ModuleRecorder) -> HookHandles:
        """Report every module call through forward pre-hooks and hooks."""
        from ts_torch.modules import install_module_hooks

        return install_module_hooks(model, recorder)

    def run_forward(self, model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], train: bool) -> Any:
        """Run the module under ``no_grad`` on its parameters' device; restore every module's mode."""
        from ts_torch.modules import run_forward

        return run_forward(model, args, kwargs, train, lambda a: self.from_numpy(a, None))

    def model_state(self, model: Any) -> dict[str, np.ndarray]:
        """Copy the state dict to numpy."""
        from ts_torch.modules import model_state

        return model_state(model, self.to_numpy)

    def load_model_state(self, model: Any, params: Mapping[str, np.ndarray]) -> None:
        """Copy arrays into the state entries of the same names."""
        from ts_torch.modules import load_model_state

        load_model_state(model, params)


plugin = TorchBackend()
