"""Which neutral layer kind each torch module is, for weight maps.

The table is checked in order, so a subclass (``class MyNorm(nn.LayerNorm)``)
gets its base's kind and more specific classes come before their bases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
)


def layer_kind(module: Any) -> str:
    """Return the neutral kind of a torch module, or ``""`` for a kind tscore has no rules for."""
    import torch

    for attribute, kind in _KINDS:
        cls = getattr(torch.nn, attribute, None)
        if cls is not None and isinstance(module, cls):
            return kind
    return ""


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
