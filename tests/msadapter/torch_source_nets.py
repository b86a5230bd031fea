"""Networks written with ``torch.nn`` that run unchanged on real torch and on mindtorch.

``import torch`` gives whichever the process has: real torch in the torch
venv, mindtorch once :func:`ts_msadapter.enable` has run. ``variant`` plants
one difference on a side: ``"eps"`` (LayerNorm epsilon 1e-3) or ``"act"``
(ReLU where the source has GELU).
"""

from __future__ import annotations

import torch
from torch import nn

# variant -> the layer of the source the finder must name
PLANTED = {"eps": "block.norm", "act": "block.act"}


class Block(nn.Module):
    """A transformer-style block: a linear mixing, LayerNorm, an MLP with GELU, residuals."""

    def __init__(self, width: int, variant: str | None) -> None:
        super().__init__()
        self.mix = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width, eps=1e-3 if variant == "eps" else 1e-5)
        self.up = nn.Linear(width, 2 * width)
        self.act = nn.ReLU() if variant == "act" else nn.GELU()
        self.down = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x + self.mix(x))
        return x + self.down(self.act(self.up(x)))


class SmallNet(nn.Module):
    """A small CNN whose features feed the block, then a classifier."""

    def __init__(self, variant: str | None = None, batchnorm: bool = False) -> None:
        super().__init__()
        norm = [nn.BatchNorm2d(8)] if batchnorm else []
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), *norm, nn.ReLU(), nn.MaxPool2d(2), nn.Flatten()
        )
        self.proj = nn.Linear(8 * 4 * 4, 16)
        self.block = Block(16, variant)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.proj(self.features(x))))


def source_net(seed: int = 0, variant: str | None = None, batchnorm: bool = False) -> SmallNet:
    """The network, seeded and in eval mode; ``batchnorm`` puts a BatchNorm2d after the convolution."""
    torch.manual_seed(seed)
    net = SmallNet(variant, batchnorm)
    net.eval()
    return net
