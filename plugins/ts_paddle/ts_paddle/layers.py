"""Paddle layers for the difference finder: neutral kinds, settings, hooks, a forward, the state."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tscore.plugin_api import (
    HookHandles,
    LayerInfo,
    ModuleRecorder,
    hook_layers,
    kind_by_class,
    map_arrays,
    training_modes_restored,
)

# (class name under paddle.nn, neutral kind); subclasses come before their bases.
_KINDS: tuple[tuple[str, str], ...] = (
    ("Linear", "linear"),
    ("Conv1D", "conv1d"),
    ("Conv2D", "conv2d"),
    ("Conv3D", "conv3d"),
    ("Conv1DTranspose", "conv_transpose1d"),
    ("Conv2DTranspose", "conv_transpose2d"),
    ("Conv3DTranspose", "conv_transpose3d"),
    ("BatchNorm1D", "batchnorm1d"),
    ("BatchNorm2D", "batchnorm2d"),
    ("BatchNorm3D", "batchnorm3d"),
    ("SyncBatchNorm", "batchnorm"),
    ("BatchNorm", "batchnorm"),
    ("InstanceNorm1D", "instancenorm1d"),
    ("InstanceNorm2D", "instancenorm2d"),
    ("InstanceNorm3D", "instancenorm3d"),
    ("LayerNorm", "layernorm"),
    ("GroupNorm", "groupnorm"),
    ("Embedding", "embedding"),
    ("PReLU", "prelu"),
    ("LSTM", "lstm"),
    ("GRU", "gru"),
    ("SimpleRNN", "rnn"),
    ("MultiHeadAttention", "multihead_attention"),
    ("MaxPool1D", "maxpool1d"),
    ("MaxPool2D", "maxpool2d"),
    ("MaxPool3D", "maxpool3d"),
    ("AvgPool1D", "avgpool1d"),
    ("AvgPool2D", "avgpool2d"),
    ("AvgPool3D", "avgpool3d"),
    ("AdaptiveAvgPool1D", "adaptive_avgpool1d"),
    ("AdaptiveAvgPool2D", "adaptive_avgpool2d"),
    ("Dropout", "dropout"),
    ("ReLU", "relu"),
    ("ReLU6", "relu6"),
    ("LeakyReLU", "leaky_relu"),
    ("GELU", "gelu"),
    ("Silu", "silu"),
    ("Sigmoid", "sigmoid"),
    ("Tanh", "tanh"),
    ("Softmax", "softmax"),
    ("Flatten", "flatten"),
    ("Identity", "identity"),
    ("Sequential", "sequential"),
    ("LayerList", "modulelist"),
)


def layer_kind(layer: Any) -> str:
    """Return the neutral kind of a paddle layer, ``""`` when tscore has no rules for it."""
    import paddle

    return kind_by_class(layer, paddle.nn, _KINDS)


def _ints(value: Any, dims: int) -> list[int]:
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)] * dims


def _padding(layer: Any, dims: int) -> list[list[int]] | str:
    """Neutral padding of a convolution: ``[[before, after], ...]`` per spatial dim, or ``"same"``."""
    algorithm = getattr(layer, "_padding_algorithm", "EXPLICIT")
    if algorithm == "SAME":
        return "same"
    if algorithm == "VALID":
        return [[0, 0]] * dims
    given = getattr(layer, "_updated_padding", None)
    return _pairs(layer._padding if given is None else given, dims)


def _pairs(given: Any, dims: int) -> list[list[int]]:
    """Explicit padding as ``[[before, after], ...]``: from one value per dim, or a before/after pair each."""
    values = _ints(given, dims)
    if len(values) == 2 * dims:
        return [[values[2 * i], values[2 * i + 1]] for i in range(dims)]
    return [[v, v] for v in values[:dims]]


def _pool_config(layer: Any, dims: int) -> dict[str, Any]:
    """Kernel, stride, padding and ``ceil_mode`` of a Paddle pooling layer (``ksize`` or ``kernel_size``)."""
    kernel = getattr(layer, "ksize", None)
    kernel = getattr(layer, "kernel_size", None) if kernel is None else kernel
    stride = kernel if layer.stride is None else layer.stride
    padding = layer.padding
    if isinstance(padding, str):
        pads: list[list[int]] | str = "same" if padding.upper() == "SAME" else [[0, 0]] * dims
    else:
        pads = _pairs(padding, dims)
    return {
        "kernel_size": _ints(kernel, dims),
        "stride": _ints(stride, dims),
        "padding": pads,
        "ceil_mode": bool(layer.ceil_mode),
    }


def layer_config(layer: Any, kind: str) -> dict[str, Any]:
    """Return the settings that change what ``layer`` computes, in tscore's neutral meaning."""
    if kind == "linear":
        return {"bias": layer.bias is not None}
    if kind.startswith("conv") and kind[-2:] in ("1d", "2d", "3d"):
        dims = int(kind[-2])
        return {
            "kernel_size": _ints(layer._kernel_size, dims),
            "stride": _ints(layer._stride, dims),
            "dilation": _ints(layer._dilation, dims),
            "groups": int(layer._groups),
            "bias": layer.bias is not None,
            "padding": _padding(layer, dims),
        }
    if kind.startswith(("maxpool", "avgpool")) and kind[-2:] in ("1d", "2d", "3d"):
        return _pool_config(layer, int(kind[-2]))
    if kind.startswith("batchnorm"):
        # Paddle's momentum weighs the running value; torch's (the neutral meaning) the new batch.
        return {"eps": float(layer._epsilon), "momentum": round(1.0 - float(layer._momentum), 12)}
    if kind.startswith("instancenorm") or kind in ("layernorm", "groupnorm"):
        return {"eps": float(layer._epsilon)}
    if kind == "gelu":
        return {"approximate": "tanh" if getattr(layer, "_approximate", False) else "none"}
    if kind == "dropout":
        return {"p": float(layer.p)}
    if kind in ("lstm", "gru", "rnn"):
        return {
            "hidden_size": int(layer.hidden_size),
            "num_layers": int(layer.num_layers),
            "bidirectional": int(layer.num_directions) == 2,
            "batch_first": not bool(layer.time_major),
        }
    if kind == "multihead_attention":
        return {"num_heads": int(layer.num_heads)}
    return {}


def _state_entries(model: Any) -> Iterator[tuple[str, Any]]:
    """Yield ``(name, tensor)`` for every state entry once: RNN layers list each weight twice."""
    seen: set[int] = set()
    for name, value in model.state_dict().items():
        if id(value) not in seen:
            seen.add(id(value))
            yield name, value


def named_layers(model: Any) -> list[LayerInfo]:
    """Every sublayer, the root first, with kind, own state entries and settings."""
    seen: set[int] = set()
    layers = []
    for path, layer in model.named_sublayers(include_self=True):
        prefix = f"{path}." if path else ""
        own = []
        entries = [
            *layer.named_parameters(include_sublayers=False),
            *layer.named_buffers(include_sublayers=False),
        ]
        for name, value in entries:
            if id(value) not in seen and getattr(value, "persistable", True):
                seen.add(id(value))
                own.append(prefix + name)
        kind = layer_kind(layer)
        layers.append(
            LayerInfo(
                path=path,
                type_name=type(layer).__name__,
                kind=kind,
                params=tuple(own),
                config=layer_config(layer, kind),
                layer=layer,
            )
        )
    return layers


def install_module_hooks(model: Any, recorder: ModuleRecorder) -> HookHandles:
    """Call ``recorder.enter``/``leave`` around every sublayer call (Paddle offers torch's hook API)."""
    handles = HookHandles(label=f"paddle layer hooks on {type(model).__name__}")
    return hook_layers(model.named_sublayers(include_self=True), recorder, handles)


def run_forward(
    model: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    train: bool,
    to_tensor: Callable[[np.ndarray], Any],
) -> Any:
    """Run ``model`` without gradients in the asked mode; every sublayer gets its own mode back."""
    import paddle

    call_args = map_arrays(tuple(args), to_tensor)
    call_kwargs = map_arrays(dict(kwargs), to_tensor)
    with training_modes_restored(layer for _, layer in model.named_sublayers(include_self=True)):
        model.train() if train else model.eval()
        with paddle.no_grad():
            return model(*call_args, **call_kwargs)


def model_state(model: Any, to_numpy: Callable[[Any, bool], np.ndarray]) -> dict[str, np.ndarray]:
    """Copy every state entry to numpy, each once, by its state-dict name."""
    return {name: to_numpy(value, True) for name, value in _state_entries(model)}


def load_model_state(
    model: Any, params: Mapping[str, np.ndarray], to_tensor: Callable[[np.ndarray], Any]
) -> None:
    """Copy ``params`` into the entries of the same names, cast to each entry's dtype."""
    entries = dict(_state_entries(model))
    for name, array in params.items():
        target = entries[name]
        target.set_value(to_tensor(np.asarray(array, order="C")).astype(target.dtype))
