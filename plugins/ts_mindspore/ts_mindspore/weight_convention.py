"""How ``mindspore.nn`` names and lays out each layer kind's weights, relative to tscore's neutral form.

The neutral form (``ts_weight_convention`` in tscore's hookspecs) is the
one PyTorch uses. Checked on MindSpore 2.10 by copying weights and comparing
outputs (FRAMEWORKS.md, "Torch <-> MindSpore layers"). Kinds not listed here
(Linear, Conv2d/3d, ConvTranspose2d/3d, LSTM, GRU, RNN, MultiheadAttention)
keep the neutral names and layout.
"""

from __future__ import annotations

from typing import Any

_NORM = {"weight": "gamma", "bias": "beta"}
# MindSpore's BatchNorm keeps no batch counter.
_BATCHNORM = {
    **_NORM,
    "running_mean": "moving_mean",
    "running_var": "moving_variance",
    "num_batches_tracked": None,
}
# the neutral (out, in, k) kernel is (out, in, 1, k) in MindSpore, which runs 1-d convolutions as 2-d ones.
_CONV1D: dict[str, Any] = {"names": {}, "transforms": {"weight": "unsqueeze(2)"}}

CONVENTIONS: dict[str, dict[str, Any]] = {
    "batchnorm": {"names": _BATCHNORM},
    "batchnorm1d": {"names": _BATCHNORM},
    "batchnorm2d": {"names": _BATCHNORM},
    # nn.BatchNorm3d holds a BatchNorm2d cell named bn2d
    "batchnorm3d": {"names": {k: (f"bn2d.{v}" if v else None) for k, v in _BATCHNORM.items()}},
    "instancenorm1d": {"names": _BATCHNORM},
    "instancenorm2d": {"names": _BATCHNORM},
    "instancenorm3d": {"names": _BATCHNORM},
    "layernorm": {"names": _NORM},
    "groupnorm": {"names": _NORM},
    "embedding": {"names": {"weight": "embedding_table"}},
    "prelu": {"names": {"weight": "w"}},  # "a" before MindSpore 2.0
    "conv1d": _CONV1D,
    "conv_transpose1d": _CONV1D,
}


def weight_convention(kind: str) -> dict[str, Any] | None:
    """Return MindSpore's names and transforms for one neutral layer kind, or None when they are neutral."""
    return CONVENTIONS.get(kind)
