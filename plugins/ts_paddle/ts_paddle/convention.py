"""How ``paddle.nn`` names and lays out each layer kind's weights, relative to tscore's neutral form.

Checked on PaddlePaddle 3.3.1 by copying torch weights into Paddle twins and
comparing outputs (FRAMEWORKS.md): the neutral form is torch's, and Paddle
differs only where listed. Convolutions, LayerNorm, GroupNorm, Embedding and
the recurrent layers keep the neutral names and layouts. MultiHeadAttention
keeps separate q/k/v projections where the neutral form packs them into one
``in_proj_weight``: that is no renaming, so its weights are left unmapped.
"""

from __future__ import annotations

from typing import Any

# Paddle keeps no batch counter; its running statistics are _mean and _variance.
_BATCHNORM = {"running_mean": "_mean", "running_var": "_variance", "num_batches_tracked": None}

CONVENTIONS: dict[str, dict[str, Any]] = {
    # y = x @ W + b with W stored [in, out], the transpose of the neutral [out, in]
    "linear": {"names": {}, "transforms": {"weight": "transpose(1, 0)"}},
    "batchnorm": {"names": _BATCHNORM},
    "batchnorm1d": {"names": _BATCHNORM},
    "batchnorm2d": {"names": _BATCHNORM},
    "batchnorm3d": {"names": _BATCHNORM},
    # InstanceNorm keeps no running statistics in Paddle; its weight is called scale.
    **{
        f"instancenorm{d}d": {
            "names": {
                "weight": "scale",
                "running_mean": None,
                "running_var": None,
                "num_batches_tracked": None,
            }
        }
        for d in (1, 2, 3)
    },
    "prelu": {"names": {"weight": "_weight"}},
}


def weight_convention(kind: str) -> dict[str, Any] | None:
    """Return Paddle's names and transforms for one neutral layer kind, or None when they are neutral."""
    return CONVENTIONS.get(kind)
