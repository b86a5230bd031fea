"""Running a MindSpore network for the difference finder: its cells, cell hooks, a forward, its state.

Cell kinds and settings are given in the neutral meaning of
``ts_named_layers``: BatchNorm's ``momentum`` as torch means it (MindSpore's
is ``1 - momentum``), Dropout's ``p`` also when the cell was built with
``keep_prob``, convolution padding as ``[[before, after], ...]``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tscore.plugin_api import HookHandles, LayerInfo, ModuleRecorder, hook_layers, kind_by_name, map_arrays

# (namespace under mindspore, class name, neutral kind); subclasses come before their bases.
_KINDS: tuple[tuple[str, str, str], ...] = (
    ("nn", "Dense", "linear"),
    ("nn", "Conv1d", "conv1d"),
    ("nn", "Conv2d", "conv2d"),
    ("nn", "Conv3d", "conv3d"),
    ("nn", "Conv1dTranspose", "conv_transpose1d"),
    ("nn", "Conv2dTranspose", "conv_transpose2d"),
    ("nn", "Conv3dTranspose", "conv_transpose3d"),
    ("nn", "BatchNorm1d", "batchnorm1d"),
    ("nn", "BatchNorm2d", "batchnorm2d"),
    ("nn", "BatchNorm3d", "batchnorm3d"),
    ("nn", "InstanceNorm1d", "instancenorm1d"),
    ("nn", "InstanceNorm2d", "instancenorm2d"),
    ("nn", "InstanceNorm3d", "instancenorm3d"),
    ("nn", "LayerNorm", "layernorm"),
    ("nn", "GroupNorm", "groupnorm"),
    ("nn", "Embedding", "embedding"),
    ("nn", "PReLU", "prelu"),
    ("nn", "LSTM", "lstm"),
    ("nn", "GRU", "gru"),
    ("nn", "RNN", "rnn"),
    ("nn", "MultiheadAttention", "multihead_attention"),
    ("nn", "MaxPool1d", "maxpool1d"),
    ("nn", "MaxPool2d", "maxpool2d"),
    ("nn", "MaxPool3d", "maxpool3d"),
    ("nn", "AvgPool1d", "avgpool1d"),
    ("nn", "AvgPool2d", "avgpool2d"),
    ("nn", "AvgPool3d", "avgpool3d"),
    ("nn", "AdaptiveAvgPool1d", "adaptive_avgpool1d"),
    ("nn", "AdaptiveAvgPool2d", "adaptive_avgpool2d"),
    ("nn", "Dropout", "dropout"),
    ("nn", "ReLU", "relu"),
    ("nn", "ReLU6", "relu6"),
    ("nn", "LeakyReLU", "leaky_relu"),
    ("nn", "GELU", "gelu"),
    ("nn", "SiLU", "silu"),
    ("nn", "Sigmoid", "sigmoid"),
    ("nn", "Tanh", "tanh"),
    ("nn", "Softmax", "softmax"),
    ("nn", "Flatten", "flatten"),
    ("nn", "Identity", "identity"),
    ("nn", "SequentialCell", "sequential"),
    ("nn", "CellList", "modulelist"),
    # mindspore.mint.nn: torch's names and settings
    ("mint.nn", "Linear", "linear"),
    ("mint.nn", "Conv1d", "conv1d"),
    ("mint.nn", "Conv2d", "conv2d"),
    ("mint.nn", "BatchNorm1d", "batchnorm1d"),
    ("mint.nn", "BatchNorm2d", "batchnorm2d"),
    ("mint.nn", "LayerNorm", "layernorm"),
    ("mint.nn", "GroupNorm", "groupnorm"),
    ("mint.nn", "Embedding", "embedding"),
    ("mint.nn", "MaxPool2d", "maxpool2d"),
    ("mint.nn", "AvgPool2d", "avgpool2d"),
    ("mint.nn", "Dropout", "dropout"),
    ("mint.nn", "ReLU", "relu"),
    ("mint.nn", "GELU", "gelu"),
    ("mint.nn", "Flatten", "flatten"),
)


def _classes() -> list[tuple[type, str]]:
    import mindspore

    found = []
    for namespace, name, kind in _KINDS:
        owner: Any = mindspore
        for part in namespace.split("."):
            owner = getattr(owner, part, None)
        cls = getattr(owner, name, None)
        if isinstance(cls, type):
            found.append((cls, kind))
    return found


def cell_kind(cell: Any, classes: list[tuple[type, str]]) -> str:
    """Return the neutral kind of a cell, ``""`` for a class tscore has no entry for."""
    return next((kind for cls, kind in classes if isinstance(cell, cls)), "")


def _spatial(value: Any, dims: int) -> list[int]:
    values = list(value) if isinstance(value, (tuple, list)) else [value] * dims
    return [int(v) for v in values[-dims:]]


def _padding(cell: Any, dims: int) -> list[list[int]] | str:
    mode = str(cell.pad_mode).lower()
    if mode == "same":
        return "same"
    if mode == "valid":
        return [[0, 0]] * dims
    pads = cell.padding
    if not isinstance(pads, (tuple, list)):
        return [[int(pads), int(pads)]] * dims
    flat = [int(p) for p in pads][-2 * dims :]
    return [flat[2 * i : 2 * i + 2] for i in range(dims)]


def _pool_config(cell: Any, dims: int) -> dict[str, Any]:
    """Kernel, stride, padding and ``ceil_mode`` of ``nn.MaxPool1d/2d`` and ``nn.AvgPool1d/2d``.

    With ``pad_mode="pad"`` the cell runs a 3-d primitive that keeps the pads and ``ceil_mode``
    (``pads`` for max pooling, ``pad`` as before/after pairs for average pooling).
    """
    config: dict[str, Any] = {
        "kernel_size": _spatial(cell.kernel_size, dims),
        "stride": _spatial(cell.stride, dims),
    }
    mode = str(cell.pad_mode).upper()
    primitive = getattr(cell, "max_pool", None) or getattr(cell, "avg_pool", None)
    attrs = dict(getattr(primitive, "attrs", {}) or {})
    if mode == "SAME":
        config["padding"] = "same"
    elif mode == "PAD" and "pads" in attrs:
        config["padding"] = [[int(p), int(p)] for p in list(attrs["pads"])[-dims:]]
    elif mode == "PAD" and "pad" in attrs:
        flat = [int(p) for p in attrs["pad"]][-2 * dims :]
        config["padding"] = [flat[2 * i : 2 * i + 2] for i in range(dims)]
    elif mode == "VALID":
        config["padding"] = [[0, 0]] * dims
    config["ceil_mode"] = bool(attrs.get("ceil_mode", False)) if mode == "PAD" else False
    return config


def cell_config(cell: Any, kind: str) -> dict[str, Any]:
    """Return the settings of a ``mindspore.nn`` cell that change what it computes (neutral meaning)."""
    if type(cell).__module__.startswith("mindspore.mint"):
        return {}
    if kind == "linear":
        return {"bias": bool(cell.has_bias)}
    if kind.startswith("conv") and kind[-2:] in ("1d", "2d", "3d"):
        dims = int(kind[-2])
        return {
            "kernel_size": _spatial(cell.kernel_size, dims),
            "stride": _spatial(cell.stride, dims),
            "dilation": _spatial(cell.dilation, dims),
            "groups": int(cell.group),
            "bias": bool(cell.has_bias),
            "padding": _padding(cell, dims),
        }
    if kind.startswith(("maxpool", "avgpool")) and kind[-2:] in ("1d", "2d"):
        return _pool_config(cell, int(kind[-2]))
    if kind.startswith("batchnorm"):
        norm = cell if hasattr(cell, "eps") else cell.bn2d  # BatchNorm3d keeps its settings in bn2d
        # MindSpore keeps 1 - momentum: the weight of the new batch, as torch means momentum
        return {"eps": float(norm.eps), "momentum": round(float(norm.momentum), 12)}
    if kind == "layernorm":
        return {"eps": float(cell.epsilon)}
    if kind == "groupnorm" or kind.startswith("instancenorm"):
        return {"eps": float(cell.eps)}
    if kind == "dropout":
        p = cell.p if getattr(cell, "p", None) is not None else 1.0 - float(cell.keep_prob)
        return {"p": round(float(p), 12)}
    if kind == "gelu":  # nn.GELU approximates with tanh unless told not to; its attribute says which
        approximate = getattr(cell, "approximate", "none")
        return {
            "approximate": str(approximate)
            if isinstance(approximate, str)
            else "tanh"
            if approximate
            else "none"
        }
    if kind in ("lstm", "gru", "rnn"):
        return {
            "hidden_size": int(cell.hidden_size),
            "num_layers": int(cell.num_layers),
            "bidirectional": bool(cell.bidirectional),
            "batch_first": bool(cell.batch_first),
        }
    if kind == "multihead_attention":
        return {"num_heads": int(cell.num_heads), "batch_first": bool(cell.batch_first)}
    return {}


def named_layers(net: Any) -> list[LayerInfo]:
    """Every cell of ``net``, root first, with kind, own parameters and settings."""
    classes = _classes()
    layers = []
    for path, cell in net.cells_and_names():
        prefix = f"{path}." if path else ""
        kind = cell_kind(cell, classes)
        named = None if kind else kind_by_name(cell)  # the port's own LlamaRMSNorm, RotaryEmbedding
        layers.append(
            LayerInfo(
                path=path,
                type_name=type(cell).__name__,
                kind=named[0] if named else kind,
                params=tuple(prefix + name for name, _ in cell.parameters_and_names(expand=False)),
                config=named[1] if named else cell_config(cell, kind),
                layer=cell,
            )
        )
    return layers


# Layers whose weights live in a child cell, and which the weight conventions name as a whole
# (nn.BatchNorm3d keeps a BatchNorm2d called bn2d: "bn2d.gamma" belongs to the 3-d layer).
_OWN_THEIR_CHILDREN = ("batchnorm3d",)


def layer_params(net: Any) -> list[tuple[str, str, list[str]]]:
    """List the weight-owning layers as ``(path, kind, local names)``; a BatchNorm3d owns its ``bn2d``."""
    out: list[tuple[str, str, list[str]]] = []
    owners: dict[str, list[str]] = {}
    for layer in named_layers(net):
        owner = next((p for p in owners if layer.path.startswith(p + ".")), None)
        if owner is not None:
            owners[owner] += [name.removeprefix(owner + ".") for name in layer.params]
            continue
        prefix = f"{layer.path}." if layer.path else ""
        local = [name.removeprefix(prefix) for name in layer.params]
        if layer.kind in _OWN_THEIR_CHILDREN:
            owners[layer.path] = local
            out.append((layer.path, layer.kind, local))
        elif local:
            out.append((layer.path, layer.kind, local))
    return [entry for entry in out if entry[2]]


def _pynative() -> Callable[[], None]:
    """Switch to PyNative mode, where cell hooks see every call; return how to switch back."""
    import mindspore as ms

    mode = ms.get_context("mode")
    if mode == ms.PYNATIVE_MODE:
        return lambda: None
    ms.set_context(mode=ms.PYNATIVE_MODE)
    return lambda: ms.set_context(mode=mode)


# the gradients each network's parameters received while its hooks were installed, by parameter name
CAPTURED_GRADS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def install_cell_hooks(net: Any, recorder: ModuleRecorder) -> HookHandles:
    """Call ``recorder.enter``/``leave`` around every cell call of ``net``, in PyNative mode.

    Each trainable parameter also gets a gradient hook: MindSpore keeps no ``.grad``, so the
    gradients a step gives them are kept in :data:`CAPTURED_GRADS` for ``model_grads`` (the dump's
    ``parameters_grad`` records at ``L0``/``mix``). All hooks go when the handles are removed.
    """
    # MindSpore layers return new tensors: copying them after the run keeps PyNative asynchronous
    # (asnumpy in a hook waits for every queued kernel).
    handles = HookHandles(label=f"MindSpore cell hooks on {type(net).__name__}", defer_copies=True)
    handles.add(_pynative())
    hook_layers(net.cells_and_names(), recorder, handles)
    if not getattr(recorder, "wants_parameter_gradients", True):
        return handles
    captured: dict[str, Any] = {}
    CAPTURED_GRADS[net] = captured
    for name, param in net.parameters_and_names():
        if param.requires_grad:
            handles.add(param.register_hook(_keeper(captured, name)).remove)
    return handles


def _keeper(captured: dict[str, Any], name: str) -> Callable[[Any], None]:
    def keep(grad: Any) -> None:  # returns None: the gradient flows on unchanged
        # two backward passes in one step add up, as torch's .grad does
        captured[name] = grad if name not in captured else captured[name] + grad

    return keep


def run_forward(
    net: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    train: bool,
    to_tensor: Callable[[np.ndarray], Any],
) -> Any:
    """Run ``net`` in the asked mode; every cell gets its own ``training`` flag and phase back."""
    modes = [(cell, cell.training, cell.phase) for _, cell in net.cells_and_names()]
    call_args = map_arrays(tuple(args), to_tensor)
    call_kwargs = map_arrays(dict(kwargs), to_tensor)
    try:
        net.set_train(train)
        return net(*call_args, **call_kwargs)
    finally:
        for cell, training, phase in modes:
            cell.add_flags(training=training)
            cell.phase = phase


def model_state(net: Any, to_numpy: Callable[[Any, bool], np.ndarray]) -> dict[str, np.ndarray]:
    """Every parameter by its name under ``net`` (not ``Parameter.name``, which wrapping changes)."""
    return {name: to_numpy(param, True) for name, param in net.parameters_and_names()}


def load_model_state(
    net: Any, params: Mapping[str, np.ndarray], to_tensor: Callable[[np.ndarray], Any]
) -> None:
    """Copy ``params`` into the parameters of the same names, cast to each parameter's dtype."""
    owned = dict(net.parameters_and_names())
    for name, array in params.items():
        param = owned[name]
        param.set_data(to_tensor(np.asarray(array, order="C")).astype(param.dtype))
