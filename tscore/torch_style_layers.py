"""Layers of any framework with torch's module API: torch itself, and torch-API layers on other frameworks.

MSAdapter, MindTorch and mindnlp's ``mindtorch`` keep torch's module classes,
attribute names and state-dict names, so one description serves every
backend that implements torch's API: a module's neutral kind by the class it
is an instance of under the backend's own ``nn`` namespace (subclasses get
their base's kind; the table lists more specific classes first), its settings
by torch's attribute names, and its state-dict entries. Nothing here imports
a framework: the backend passes its ``nn`` namespace and its modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tscore.contract.layers import LayerInfo
from tscore.module_hooks import kind_by_class, kind_by_name

# (class name under the backend's nn namespace, neutral kind)
TORCH_STYLE_KINDS: tuple[tuple[str, str], ...] = (
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
    ("RMSNorm", "rmsnorm"),
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


# Activations of libraries built on torch's modules (HuggingFace transformers, also as mindnlp ships it),
# by the class's own name under a module ending in ``transformers.activations``: kind and settings.
# ``approximate`` is the GELU variant: "none" (erf), "tanh", "sigmoid" (x * sigmoid(1.702 x)).
LIBRARY_ACTIVATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "NewGELUActivation": ("gelu", {"approximate": "tanh"}),
    "GELUTanh": ("gelu", {"approximate": "tanh"}),
    "PytorchGELUTanh": ("gelu", {"approximate": "tanh"}),
    "FastGELUActivation": ("gelu", {"approximate": "tanh"}),
    "GELUActivation": ("gelu", {"approximate": "none"}),
    "QuickGELUActivation": ("gelu", {"approximate": "sigmoid"}),
    "SiLUActivation": ("silu", {}),
    "MishActivation": ("mish", {}),
}


def _library_activation(module: Any) -> tuple[str, dict[str, Any]] | None:
    cls = type(module)
    if not cls.__module__.endswith("transformers.activations"):
        return None
    return LIBRARY_ACTIVATIONS.get(cls.__name__)


def torch_style_kind(module: Any, nn: Any) -> str:
    """Return the neutral kind of a module with torch's API, ``""`` for a class tscore has no rules for.

    HuggingFace's activation modules (``NewGELUActivation``) get the kind they compute (``gelu``).

    :param nn: the backend's ``nn`` namespace (``torch.nn``, ``mindtorch.nn``).
    """
    kind = kind_by_class(module, nn, TORCH_STYLE_KINDS)
    if not kind:
        found = _library_activation(module) or kind_by_name(module)
        kind = found[0] if found else ""
    return kind


def torch_style_layer_params(model: Any, nn: Any) -> list[tuple[str, str, Sequence[str]]]:
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
            layers.append((path, torch_style_kind(owner, nn) if owner is not None else "", [local]))
    return [(path, kind, tuple(names)) for path, kind, names in layers]


def _pairs(padding: Any, dims: int) -> list[list[int]] | str:
    """Neutral padding: ``[[before, after], ...]`` per spatial dim, or ``"same"``."""
    if isinstance(padding, str):
        return "same" if padding == "same" else [[0, 0]] * dims
    values = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * dims
    return [[int(v), int(v)] for v in values]


def _tuple(value: Any, dims: int) -> list[int]:
    return [int(v) for v in value] if isinstance(value, (tuple, list)) else [int(value)] * dims


def torch_style_config(module: Any, kind: str) -> dict[str, Any]:
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
    library = _library_activation(module) or kind_by_name(module)
    if library is not None:
        return dict(library[1])
    if kind == "rmsnorm":
        return {} if module.eps is None else {"eps": float(module.eps)}
    if kind == "gelu":
        return {"approximate": str(getattr(module, "approximate", "none"))}
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


def torch_style_named_layers(model: Any, nn: Any) -> list[LayerInfo]:
    """Every module of ``model`` (shared ones once), root first, with kind, own state entries and settings."""
    layers = []
    for path, module in model.named_modules():
        prefix = f"{path}." if path else ""
        own = [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]
        kind = torch_style_kind(module, nn)
        layers.append(
            LayerInfo(
                path=path,
                type_name=type(module).__name__,
                kind=kind,
                params=tuple(prefix + name for name, value in own if value is not None),
                config=torch_style_config(module, kind),
                layer=module,
            )
        )
    return layers
