"""ts_mindspore passes the conformance kit that tscore ships for every backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn

from tscore.testing.conformance import BackendConformance


class SmallNet(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, pad_mode="pad", padding=1, has_bias=True)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.fc = nn.Dense(4 * 8 * 8, 5)

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        y = self.relu(self.bn(self.conv(x)))
        return self.fc(y.reshape(y.shape[0], -1))


class TestMindSporeConformance(BackendConformance):
    framework = "mindspore"

    def make_tensor(self, array: np.ndarray) -> Any:
        if array.dtype.name == "bfloat16":
            return ms.Tensor(array.astype(np.float32), dtype=ms.bfloat16)
        return ms.Tensor(array)

    def make_network(self) -> Any:
        ms.set_seed(0)
        net = SmallNet()
        net.set_train(False)
        return net

    def network_inputs(self) -> Any:
        return (((2, 3, 8, 8), np.float32),)

    def plant_epsilon(self, network: Any) -> str:
        network.bn.bn_train.epsilon = network.bn.bn_infer.epsilon = network.bn.eps = 0.5
        return "bn"

    def run_backward(self, array: np.ndarray, through: Callable[[Any], Any]) -> None:
        ms.grad(lambda x: (2 * through(x)).sum())(ms.Tensor(array))

    def backward_network(self, network: Any, inputs: tuple[np.ndarray, ...]) -> Any:
        weights = network.trainable_params()
        return ms.grad(lambda *x: network(*x).sum(), None, weights)(*(ms.Tensor(x) for x in inputs))
