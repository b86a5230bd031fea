"""Which neutral layer kind each torch module is, and its settings, for weight maps and pairing.

The table is checked in order, so a subclass (``class MyNorm(nn.LayerNorm)``)
gets its base's kind and more specific classes come before their bases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tscore.plugin_api import kind_by_class

# (attribute path under torch.nn, neutral kind)
_KINDS: tuple[tuple[str, str], ...] = (
    ("Linear", "linear"),
    ("Conv1d", "conv1d"),
    ("Conv2d", "conv2d"),
    ("Conv3d", "conv3d"),
    ("ConvTranspose1d", "conv_transpose1d"),
    ("ConvTranspose2d", "conv_transpose2d"),
    ("ConvTranspose3d", "conv_transpose3d"),
    ("BatchNorm1d", "batchnorm1d"),
    ("BatchNorm2d", "batchnorm2d"),
    ("BatchNorm3d", "batchnorm3d"),
    ("SyncBatchNorm", "batchnorm"),
    ("InstanceNorm1d", "instancenorm1d"),
    ("InstanceNorm2d", "instancenorm2d"),
    ("InstanceNorm3d", "instancenorm3d"),
    ("LayerNorm", "layernorm"),
    ("GroupNorm", "groupnorm"),
    ("Embedding", "embedding"),
    ("PReLU", "prelu"),
    ("LSTM", "lstm"),
    ("GRU", "gru"),
    ("RNN", "rnn"),
    ("MultiheadAttention", "multihead_attention"),
    # layers without parameters, for pairing layers and checking their settings
    ("MaxPool1d", "maxpool1d"),
    ("MaxPool2d", "maxpool2d"),
    ("MaxPool3d", "maxpool3d"),
    ("AvgPool1d", "avgpool1d"),
    ("AvgPool2d", "avgpool2d"),
    ("AvgPool3d", "avgpool3d"),
    ("AdaptiveAvgPool1d", "adaptive_avgpool1d"),
    ("AdaptiveAvgPool2d", "adaptive_avgpool2d"),
    ("Dropout", "dropout"),
    ("ReLU", "relu"),
    ("ReLU6", "relu6"),
    ("LeakyReLU", "leaky_relu"),
    ("GELU", "gelu"),
    ("SiLU", "silu"),
    ("Sigmoid", "sigmoid"),
    ("Tanh", "tanh"),
    ("Softmax", "softmax"),
    ("Flatten", "flatten"),
    ("Identity", "identity"),
    ("Sequential", "sequential"),
    ("ModuleList", "modulelist"),
)


def layer_kind(module: Any) -> str:
    """Return the neutral kind of a torch module, or ``""`` for a kind tscore has no rules for."""
    import torch

    return kind_by_class(module, torch.nn, _KINDS)


def layer_params(model: Any) -> list[tuple[str, str, Sequence[str]]]:
    """List ``(layer path, kind, state-dict names under it)`` in state-dict order.

    Every state-dict entry is listed once, under the module that owns it;
    modules reached under two names (shared layers) appear under each.
    """
    modules = dict(model.named_modules(remove_duplicate=False))
    layers: list[tuple[str, str, list[str]]] = []
    for key in model.state_dict(keep_vars=True):
        path, _, local = key.rpartition(".")
        owner = modules.get(path)
        while owner is None and path:  # an entry added by a custom state_dict hook
            path, _, head = path.rpartition(".")
            local = f"{head}.{local}"
            owner = modules.get(path)
        if layers and layers[-1][0] == path:
            layers[-1][2].append(local)
        else:
            layers.append((path, layer_kind(owner) if owner is not None else "", [local]))
    return [(path, kind, tuple(names)) for path, kind, names in layers]


def _pairs(padding: Any, dims: int) -> list[list[int]] | str:
    """Neutral padding: ``[[before, after], ...]`` per spatial dim, or ``"same"``."""
    if isinstance(padding, str):
        return "same" if padding == "same" else [[0, 0]] * dims
    values = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * dims
    return [[int(v), int(v)] for v in values]


def _tuple(value: Any, dims: int) -> list[int]:
    return [int(v) for v in value] if isinstance(value, (tuple, list)) else [int(value)] * dims


def layer_config(module: Any, kind: str) -> dict[str, Any]:
    """Return the settings of ``module`` that change what it computes (neutral meaning)."""
    if kind == "linear":
        return {"bias": module.bias is not None}
    if kind.startswith(("conv", "conv_transpose")) and kind[-2:] in ("1d", "2d", "3d"):
        dims = int(kind[-2])
        return {
            "kernel_size": _tuple(module.kernel_size, dims),
            "stride": _tuple(module.stride, dims),
            "dilation": _tuple(module.dilation, dims),
            "groups": int(module.groups),
            "bias": module.bias is not None,
            "padding": _pairs(module.padding, dims),
        }
    if kind.startswith(("maxpool", "avgpool")) and kind[-2:] in ("1d", "2d", "3d"):
        dims = int(kind[-2])
        return {
            "kernel_size": _tuple(module.kernel_size, dims),
            "stride": _tuple(module.stride if module.stride is not None else module.kernel_size, dims),
            "padding": _pairs(module.padding, dims),
            "ceil_mode": bool(module.ceil_mode),
        }
    if kind.startswith(("batchnorm", "instancenorm")):
        return {"eps": float(module.eps), "momentum": module.momentum}
    if kind in ("layernorm", "groupnorm"):
        return {"eps": float(module.eps)}
    if kind == "dropout":
        return {"p": float(module.p)}
    if kind in ("lstm", "gru", "rnn"):
        return {
            "hidden_size": int(module.hidden_size),
            "num_layers": int(module.num_layers),
            "bidirectional": bool(module.bidirectional),
            "batch_first": bool(module.batch_first),
        }
    if kind == "multihead_attention":
        return {"num_heads": int(module.num_heads), "batch_first": bool(module.batch_first)}
    return {}
