"""Running a torch network for the difference finder: its layers, module hooks, a forward, its state."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tscore.plugin_api import (
    HookHandles,
    LayerInfo,
    ModuleRecorder,
    hook_layers,
    map_arrays,
    torch_style_named_layers,
    training_modes_restored,
)


def named_layers(model: Any) -> list[LayerInfo]:
    """Every module of ``model`` (shared ones once), root first, with kind, own state entries and settings."""
    import torch

    return torch_style_named_layers(model, torch.nn)


def install_module_hooks(model: Any, recorder: ModuleRecorder) -> HookHandles:
    """Call ``recorder.enter``/``leave`` around every module call of ``model``."""
    handles = HookHandles(label=f"torch module hooks on {type(model).__name__}")
    return hook_layers(model.named_modules(), recorder, handles)


def run_forward(
    model: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    train: bool,
    to_tensor: Callable[[np.ndarray], Any],
) -> Any:
    """Run ``model`` without gradients in the asked mode; every module gets its own mode back."""
    import torch

    device = next((p.device for p in model.parameters()), None)

    def on_device(array: np.ndarray) -> Any:
        tensor = to_tensor(array)
        return tensor.to(device) if device is not None else tensor

    call_args = map_arrays(tuple(args), on_device)
    call_kwargs = map_arrays(dict(kwargs), on_device)
    with training_modes_restored(model.modules()):
        model.train(train)
        with torch.no_grad():
            return model(*call_args, **call_kwargs)


def model_state(model: Any, to_numpy: Callable[[Any, bool], np.ndarray]) -> dict[str, np.ndarray]:
    """Copy the state dict to numpy."""
    return {name: to_numpy(value, True) for name, value in model.state_dict().items()}


def load_model_state(model: Any, params: Mapping[str, np.ndarray]) -> None:
    """Copy ``params`` into the state entries of the same names, cast to each entry's dtype."""
    import torch

    entries = model.state_dict(keep_vars=True)
    with torch.no_grad():
        for name, array in params.items():
            target = entries[name]
            source = torch.from_numpy(np.array(array, order="C"))  # ascontiguousarray makes 0-d 1-d
            target.copy_(source.to(dtype=target.dtype, device=target.device))
