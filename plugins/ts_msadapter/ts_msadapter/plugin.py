"""tscore plugin for torch-API networks running on MindSpore through mindnlp 0.5.1's ``mindtorch``.

Loading this module imports neither MindSpore nor mindtorch:
:class:`MsAdapterBackend` claims an object only once ``mindtorch`` is in
``sys.modules`` (:func:`ts_msadapter.enable`, or the user's ``import
mindnlp``). Its networks are ``mindtorch.nn.Module`` (what ``torch.nn.Module``
is in that process) and its tensors are MindSpore tensors under torch's name,
converted bit for bit (bfloat16 kept). State dicts keep torch's names, so a
real torch network's weights load by name (``auto_conv_ckpt=2``).
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tscore.plugin_api import (
    Backend,
    HookHandles,
    LayerInfo,
    ModuleRecorder,
    array_stats,
    hook_layers,
    layout_from_attributes,
    map_arrays,
    torch_style_layer_params,
    torch_style_named_layers,
    training_modes_restored,
)

if importlib.util.find_spec("mindspore") is None or importlib.util.find_spec("mindtorch") is None:
    raise ImportError(
        "ts_msadapter needs MindSpore and mindnlp 0.5.1 (its mindtorch), which are not installed"
    )

log = logging.getLogger(__name__)


def _widened(array: np.ndarray) -> np.ndarray:
    """Reinterpret MindSpore's own numpy look-alike of bfloat16 as ``ml_dtypes.bfloat16``, bit for bit."""
    import ml_dtypes

    found = getattr(ml_dtypes, array.dtype.name, None)
    if found is None or np.dtype(found).itemsize != array.dtype.itemsize:
        raise TypeError(f"no ml_dtypes type for MindSpore's {array.dtype.name}")
    return array.view(np.dtype(f"u{array.dtype.itemsize}")).view(found)


class MsAdapterBackend(Backend):
    """Tensors and networks of mindtorch (torch's API computed by MindSpore)."""

    framework = "msadapter"
    module = "mindtorch"
    distribution = "mindnlp"
    import_to_seed = False  # mindtorch imports only after ts_msadapter.enable() on MindSpore 2.10
    builds_on = "mindspore"  # its tensors are MindSpore's: beside ts_mindspore, this backend answers first

    def _mindtorch(self) -> Any:
        return sys.modules["mindtorch"]

    def tensor_types(self) -> tuple[type, ...]:
        """Return mindtorch's tensor class (MindSpore's, under torch's name)."""
        return (self._mindtorch().Tensor,)

    def model_types(self) -> tuple[type, ...]:
        """Return mindtorch's ``nn.Module``."""
        return (self._mindtorch().nn.Module,)

    def to_numpy(self, tensor: Any, copy: bool) -> np.ndarray:
        """Copy a mindtorch tensor to a host array of the same dtype (bfloat16 as ``ml_dtypes``)."""
        array = tensor.asnumpy()
        if array.dtype.kind == "V" and array.dtype.fields is None:
            array = _widened(array)
        return np.array(array, copy=True, order="C") if copy else np.asarray(array, order="C")

    def from_numpy(self, array: np.ndarray, like: Any | None) -> Any:
        """Make a mindtorch tensor from an array (bfloat16 through float32, which holds it exactly)."""
        mindtorch = self._mindtorch()
        if array.dtype.kind == "V":
            dtype = getattr(mindtorch, array.dtype.name, None)
            if dtype is None:
                raise TypeError(f"mindtorch has no dtype {array.dtype.name!r}")
            return mindtorch.tensor(array.astype(np.float32), dtype=dtype)
        return mindtorch.tensor(np.array(array, copy=True, order="C"))

    def model_state(self, model: Any) -> dict[str, np.ndarray]:
        """Return the network's ``state_dict()`` as arrays, under torch's names."""
        return {name: self.to_numpy(value, copy=True) for name, value in model.state_dict().items()}

    def load_model_state(self, model: Any, params: Mapping[str, np.ndarray]) -> None:
        """Copy arrays into the network's parameters and buffers of those names, cast to each one's dtype.

        :raises KeyError: naming the names the network does not have.
        """
        entries = model.state_dict()
        unknown = [name for name in params if name not in entries]
        if unknown:
            raise KeyError(f"the network has no entries named {unknown[:5]}")
        converted = {
            name: self.from_numpy(array, None).to(entries[name].dtype) for name, array in params.items()
        }
        model.load_state_dict(converted, strict=False)

    def layer_params(self, model: Any) -> Sequence[tuple[str, str, Sequence[str]]]:
        """List a network's layers with their neutral kinds and state-dict entries (torch's names)."""
        return torch_style_layer_params(model, self._mindtorch().nn)

    def named_layers(self, model: Any) -> list[LayerInfo]:
        """List every module with its kind, own state entries and settings, read as torch's."""
        return torch_style_named_layers(model, self._mindtorch().nn)

    def layer_layout(self, layer: Any, kind: str) -> str | None:
        """Mindtorch's modules compute as torch's: channels first."""
        return layout_from_attributes(layer, kind, (), default="channels_first")

    def install_module_hooks(self, model: Any, recorder: ModuleRecorder) -> HookHandles:
        """Report every module call through mindtorch's forward pre-hooks and hooks (torch's API)."""
        handles = HookHandles(label=f"mindtorch module hooks on {type(model).__name__}")
        return hook_layers(model.named_modules(), recorder, handles)

    def run_forward(self, model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], train: bool) -> Any:
        """Run the network without gradients in the asked mode; every module gets its mode back."""
        mindtorch = self._mindtorch()

        def to_tensor(array: np.ndarray) -> Any:
            return self.from_numpy(array, None)

        call_args = map_arrays(tuple(args), to_tensor)
        call_kwargs = map_arrays(dict(kwargs), to_tensor)
        with training_modes_restored(model.modules()):
            model.train(train)
            with mindtorch.no_grad():
                return model(*call_args, **call_kwargs)

    def install_api_hooks(self, recorder: Any) -> HookHandles:
        """Report mindtorch's forward API calls under torch's names (:mod:`ts_msadapter.api_capture`)."""
        from ts_msadapter.api_capture import ApiCapture

        return ApiCapture(recorder).install()

    def tensor_stats(self, tensor: Any) -> Any:
        """Max, min, mean and L2 norm of a mindtorch tensor, from a host copy (MindSpore's CPU: no copy)."""
        return array_stats(self.to_numpy(tensor, copy=False))

    def tensor_device(self, tensor: Any) -> str:
        """Return MindSpore's device target (``cpu``, ``ascend``), where every tensor of the process lives.

        Not ``Tensor.device``: in PyNative it waits for every queued kernel.
        """
        return str(sys.modules["mindspore"].get_context("device_target")).lower()

    def tensor_requires_grad(self, tensor: Any) -> bool | None:
        """Return ``tensor.requires_grad`` (mindtorch keeps torch's flag)."""
        found = getattr(tensor, "requires_grad", None)
        return found if isinstance(found, bool) else None

    def seed(self, seed: int, deterministic: bool) -> None:
        """Seed mindtorch's generator (and MindSpore's, which it computes with)."""
        self._mindtorch().manual_seed(seed)
        sys.modules["mindspore"].set_seed(seed)


plugin = MsAdapterBackend()
