"""A mask's fill values in the finder: two spellings of the largest float are one mask, not an error.

HF's causal mask holds torch.finfo(float32).min (-3.4028235e38); mindtorch's
-3.40282e38. Their difference, 3.45e32, is no layer's error.
"""

from __future__ import annotations

import torch
from torch import nn

import tscore as ts

TORCH_FILL = float(torch.finfo(torch.float32).min)
OTHER_FILL = -3.40282e38  # the same mask, as mindtorch writes it


class Attention(nn.Module):
    def __init__(self, scaled: bool) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.scaled = scaled

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = hidden @ hidden.transpose(-1, -2)
        if self.scaled:
            scores = scores / 8**0.5
        return self.proj((scores + mask).softmax(-1) @ hidden)


class Net(nn.Module):
    """An embedding, then an attention given a causal mask the root builds with ``fill``."""

    def __init__(self, fill: float, scaled: bool = True) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Linear(8, 8)
        self.attn = Attention(scaled)
        self.fill = fill

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(x)
        length = hidden.shape[1]
        mask = torch.triu(torch.full((length, length), self.fill), diagonal=1)
        return self.attn(hidden, mask)


def test_two_spellings_of_a_masks_fill_agree_and_the_layer_that_differs_inherits_nothing() -> None:
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
    same = ts.migrator.NetDifferenceFinder(Net(TORCH_FILL), Net(OTHER_FILL), print_level=0).compare(
        inputs=(x,), locate=True
    )
    assert same.passed and same.first_divergence is None, same.verdict()
    differ = ts.migrator.NetDifferenceFinder(
        Net(TORCH_FILL), Net(OTHER_FILL, scaled=False), print_level=0
    ).compare(inputs=(x,), locate=True)
    first = differ.first_divergence
    assert first is not None and first.orig_path == "attn", differ.verdict()
    row = next(r for r in differ.layers if r.orig_path == "attn")
    assert row.inherited_error == 0.0 and first.inherited_error == 0.0, row  # not 3.45e32: one mask
    assert "e+32" not in differ.verdict()
