"""Which neutral layer kind each torch module is, and its settings, for weight maps and pairing.

torch's module API is described once in tscore's plugin API
(``torch_style_kind`` and friends), which torch-API backends on other
frameworks share; this module hands it ``torch.nn``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tscore.plugin_api import torch_style_config, torch_style_kind, torch_style_layer_params


def layer_kind(module: Any) -> str:
    """Return the neutral kind of a torch module, or ``""`` for a kind tscore has no rules for."""
    import torch

    return torch_style_kind(module, torch.nn)


def layer_params(model: Any) -> list[tuple[str, str, Sequence[str]]]:
    """List ``(layer path, kind, state-dict names under it)`` in state-dict order."""
    import torch

    return torch_style_layer_params(model, torch.nn)


layer_config = torch_style_config
