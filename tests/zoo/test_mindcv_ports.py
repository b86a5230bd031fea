"""The difference finder on a real model zoo's port: mindcv 0.3.0's ResNet-18 against torchvision's layout.

torchvision 0.28 does not import beside the CPU build of torch 2.13 here
(``operator torchvision::nms does not exist``), so the torch side is
torchvision's ResNet-18 written out with torchvision's module names
(``conv1``, ``maxpool``, ``layer1.0.downsample.0``, ``fc``); the MindSpore side
is mindcv's own ``create_model("resnet18")``, which names them ``max_pool``,
``down_sample`` and ``classifier``. No weight map is passed.
"""

from __future__ import annotations

import numpy as np
import torch
from mindcv.models import create_model
from mindspore import nn as mnn
from torch import nn as tnn

import tscore as ts
from tests.cross.port_zoo import TorchBasicBlock, randomise_batchnorms


class TorchVisionResNet18(tnn.Module):
    """torchvision's ``resnet18()``: its layers, their order and their names."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = tnn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = tnn.BatchNorm2d(64)
        self.relu = tnn.ReLU(inplace=True)
        self.maxpool = tnn.MaxPool2d(3, 2, 1)
        cin = 64
        for index, width in enumerate((64, 128, 256, 512)):
            blocks = [TorchBasicBlock(cin, width, 1 if index == 0 else 2), TorchBasicBlock(width, width, 1)]
            setattr(self, f"layer{index + 1}", tnn.Sequential(*blocks))
            cin = width
        self.avgpool = tnn.AdaptiveAvgPool2d(1)
        self.fc = tnn.Linear(512, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def compare(port: mnn.Cell) -> ts.migrator.NetDiffReport:
    torch.manual_seed(0)
    net = randomise_batchnorms(TorchVisionResNet18())
    x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    return ts.migrator.NetDifferenceFinder(net, port, print_level=0).compare(inputs=(x,), locate=True)


def test_mindcv_resnet18_aligns_with_no_map_and_its_max_pool_padding_is_named() -> None:
    report = compare(create_model("resnet18", pretrained=False))
    hows = {m["source"]: (m["target"], m["how"]) for m in report.alignment}
    assert len(hows) == 41 and all(how in ("names", "structure") for _, how in hows.values())
    assert hows["layer2.0.downsample.0"] == ("layer2.0.down_sample.0", "structure")
    assert hows["fc"] == ("classifier", "structure")
    assert report.weights is not None and report.weights.passed
    first = report.first_divergence
    # mindcv pads its max pool with pad_mode="same": (0, 1) on a 32-pixel map, torchvision (1, 1)
    assert first is not None and (first.orig_path, first.target_path) == ("maxpool", "max_pool")
    assert first.inherited_error is not None and first.inherited_error < 1e-4


def test_with_torchvision_s_pool_padding_the_mindcv_port_agrees_everywhere() -> None:
    port = create_model("resnet18", pretrained=False)
    port.max_pool = mnn.MaxPool2d(3, 2, pad_mode="pad", padding=1)
    report = compare(port)
    assert report.passed, report.verdict()
    assert report.verdict() == "outputs agree: no divergence"
