"""ts_paddle, written against tscore.plugin_api alone, passes the conformance kit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import paddle
from paddle import nn

from tscore.testing.conformance import BackendConformance


class SmallNet(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2D(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2D(4)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc(self.relu(self.bn(self.conv(x))).flatten(1))


class TestPaddleConformance(BackendConformance):
    framework = "paddle"

    def make_tensor(self, array: np.ndarray) -> Any:
        if array.dtype.name == "bfloat16":
            return paddle.to_tensor(array.view(np.uint16))  # uint16 is Paddle's bfloat16
        return paddle.to_tensor(array)

    def make_network(self) -> Any:
        paddle.seed(0)
        net = SmallNet()
        net.eval()
        return net

    def network_inputs(self) -> Any:
        return (((2, 3, 8, 8), np.float32),)

    def plant_epsilon(self, network: Any) -> str:
        network.bn._epsilon = 0.5
        return "bn"

    def run_backward(self, array: np.ndarray, through: Callable[[Any], Any]) -> None:
        x = paddle.to_tensor(array, stop_gradient=False)
        (2 * through(x)).sum().backward()

    def backward_network(self, network: Any, inputs: tuple[np.ndarray, ...]) -> Any:
        network(*(paddle.to_tensor(x) for x in inputs)).sum().backward()
        return None
