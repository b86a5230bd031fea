"""ts_torch passes the conformance kit that tscore ships for every backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from tscore.testing.conformance import BackendConformance


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.relu(self.bn(self.conv(x))).flatten(1))


class TestTorchConformance(BackendConformance):
    framework = "torch"
    stores_neutral_form = True

    def make_tensor(self, array: np.ndarray) -> Any:
        if array.dtype.name == "bfloat16":
            return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
        return torch.from_numpy(array.copy())

    def make_network(self) -> Any:
        torch.manual_seed(0)
        return SmallNet().eval()

    def network_inputs(self) -> Any:
        return (((2, 3, 8, 8), np.float32),)

    def plant_epsilon(self, network: Any) -> str:
        network.bn.eps = 0.5
        return "bn"

    def run_backward(self, array: np.ndarray, through: Callable[[Any], Any]) -> None:
        x = torch.tensor(array, requires_grad=True)
        (2 * through(x)).sum().backward()

    def backward_network(self, network: Any, inputs: tuple[np.ndarray, ...]) -> Any:
        network(*(torch.from_numpy(x) for x in inputs)).sum().backward()
        return None
