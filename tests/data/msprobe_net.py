"""A small CNN for the msprobe dump fixtures in ``tests/data/msprobe_26.2``.

Plain torch only, so that ``make_msprobe_dumps.py`` can run it under msprobe and
tests can rebuild the same network without msprobe installed.

The forward pass calls ``F.relu`` (an API call, not ``nn.ReLU``) so that msprobe
records it as ``Functional.relu``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SmallCnn(nn.Module):
    """conv1 -> relu -> conv2 -> relu -> flatten -> fc, for inputs of shape (N, 3, 6, 6)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = torch.flatten(x, 1)
        return self.fc(x)


def make_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Return a batch ``x`` of shape (2, 3, 6, 6) and integer labels of shape (2,)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 6, 6, generator=gen)
    y = torch.randint(0, 3, (2,), generator=gen)
    return x, y


def build(seed: int = 0, perturb: str | None = None) -> SmallCnn:
    """Build a seeded ``SmallCnn``.

    With ``perturb="conv2"``, ``0.05 * randn`` (from a generator seeded with
    ``seed + 1``) is added in place to ``conv2.weight``, so the network matches
    the unperturbed one up to conv1 and differs from conv2 onward.
    """
    torch.manual_seed(seed)
    net = SmallCnn()
    if perturb is None:
        return net
    if perturb != "conv2":
        raise ValueError(f"unknown perturbation {perturb!r}; only 'conv2' is defined")
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        net.conv2.weight.add_(0.05 * torch.randn(net.conv2.weight.shape, generator=gen))
    return net


def train_step(net: SmallCnn, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One forward and backward pass with cross-entropy loss; no optimizer step."""
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    return loss
