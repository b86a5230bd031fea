"""A channels-first torch network against its channels-last Paddle port (``data_format="NHWC"``).

The finder compares and replays every layer in the neutral layout that the
backends declare (``ts_layer_layout``), so a correct port agrees layer by
layer and a planted BatchNorm epsilon is named at the BatchNorm. Where no
backend declares the layouts, it says it cannot tell instead of naming a
layer. torch's ``channels_last`` memory format changes nothing.
"""

from __future__ import annotations

import copy

import numpy as np
import paddle
import pytest
import torch
from paddle import nn as pnn
from torch import nn as tnn

import tscore as ts
from tscore.netdiff.report import LayerStatus
from tscore.plugins import get_plugin_manager

INPUT = (((2, 3, 6, 6), np.float32),)


class TorchNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = tnn.Conv2d(3, 4, 3, padding=1)
        self.bn = tnn.BatchNorm2d(4)
        self.relu = tnn.ReLU()
        self.pool = tnn.AdaptiveAvgPool2d(1)
        self.fc = tnn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.relu(self.bn(self.conv(x)))).flatten(1))


class PaddleNHWC(pnn.Layer):
    """The port: takes torch's NCHW input, computes channels last."""

    def __init__(self, bn_eps: float = 1e-5) -> None:
        super().__init__()
        self.conv = pnn.Conv2D(3, 4, 3, padding=1, data_format="NHWC")
        self.bn = pnn.BatchNorm2D(4, epsilon=bn_eps, data_format="NHWC")
        self.relu = pnn.ReLU()
        self.pool = pnn.AdaptiveAvgPool2D(1, data_format="NHWC")
        self.fc = pnn.Linear(4, 5)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc(self.pool(self.relu(self.bn(self.conv(x.transpose([0, 2, 3, 1]))))).flatten(1))


def torch_net() -> TorchNet:
    torch.manual_seed(0)
    net = TorchNet().eval()
    with torch.no_grad():  # statistics that are not the defaults, so that a wrong mapping shows
        net.bn.running_mean.uniform_(-1, 1)
        net.bn.running_var.uniform_(0.5, 2.0)
    return net


def paddle_net(bn_eps: float = 1e-5) -> PaddleNHWC:
    paddle.seed(0)
    net = PaddleNHWC(bn_eps)
    net.eval()
    return net


def find(orig: object, target: object, locate: bool | None = None) -> ts.migrator.NetDiffReport:
    finder = ts.migrator.NetDifferenceFinder(orig, target, print_level=0, locate=locate)
    return finder.compare(auto_inputs=INPUT)


def test_a_correct_channels_last_port_agrees_layer_by_layer_with_locate_true() -> None:
    report = find(torch_net(), paddle_net(), locate=True)
    assert report.passed, report.render()
    assert report.first_divergence is None, report.verdict()
    rows = {row.orig_path: row for row in report.layers}
    assert {"conv", "bn", "relu", "pool", "fc"} <= set(rows)
    assert all(row.status is LayerStatus.OK for row in report.layers), report.layer_table()
    assert rows["bn"].output is not None and rows["bn"].output.passed
    assert rows["bn"].output.orig_shape == rows["bn"].output.target_shape == (2, 4, 6, 6)


def test_a_planted_batchnorm_epsilon_in_the_channels_last_port_is_named_at_the_batchnorm() -> None:
    report = find(torch_net(), paddle_net(bn_eps=0.5))
    assert not report.passed
    first = report.first_divergence
    assert first is not None and first.orig_path == first.target_path == "bn", report.verdict()
    assert [s.name for s in first.settings] == ["eps"]
    rows = {row.orig_path: row for row in report.layers}
    assert rows["conv"].status is LayerStatus.OK, report.layer_table()
    assert rows["relu"].status is LayerStatus.INHERITS


def test_the_port_first_and_torch_second_names_the_same_layer() -> None:
    report = find(paddle_net(bn_eps=0.5), torch_net())
    first = report.first_divergence
    assert first is not None and first.orig_path == "bn", report.verdict()


@pytest.fixture
def layouts_undeclared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both backends as an outside author might first write them: no ``layer_layout``."""
    for plugin in get_plugin_manager().get_plugins():
        if getattr(plugin, "framework", None) in ("torch", "paddle"):
            monkeypatch.setattr(type(plugin), "layer_layout", lambda self, layer, kind: None)


def test_without_declared_layouts_the_finder_says_it_cannot_tell_and_names_no_layer(
    layouts_undeclared: None,
) -> None:
    report = find(torch_net(), paddle_net(bn_eps=0.5))
    assert not report.passed
    assert report.first_divergence is None, report.verdict()
    assert "cannot tell which layer differs" in report.verdict()
    rows = {row.orig_path: row for row in report.layers}
    assert rows["conv"].status is LayerStatus.UNKNOWN and "ts_layer_layout" in rows["conv"].note
    assert rows["bn"].status is LayerStatus.UNKNOWN


def test_without_declared_layouts_an_agreeing_port_still_passes_and_blames_nothing(
    layouts_undeclared: None,
) -> None:
    report = find(torch_net(), paddle_net(), locate=True)
    assert report.passed and report.first_divergence is None, report.verdict()


def test_torch_channels_last_memory_changes_nothing() -> None:
    reference = torch_net()
    channels_last = copy.deepcopy(reference).to(memory_format=torch.channels_last)
    assert channels_last.conv.weight.is_contiguous(memory_format=torch.channels_last)
    report = find(reference, channels_last, locate=True)
    assert report.passed and report.first_divergence is None, report.verdict()
    assert all(row.status is LayerStatus.OK for row in report.layers)
    planted = copy.deepcopy(channels_last)
    planted.bn.eps = 0.5
    first = find(reference, planted).first_divergence
    assert first is not None and first.orig_path == "bn" and [s.name for s in first.settings] == ["eps"]


class PaddleRankFree(pnn.Layer):
    """Paddle's rank-free ``BatchNorm`` (kind ``batchnorm``) where torch has ``BatchNorm2d``."""

    def __init__(self, bn_eps: float) -> None:
        super().__init__()
        self.conv = pnn.Conv2D(3, 4, 3, padding=1)
        self.bn = pnn.BatchNorm(4, epsilon=bn_eps)
        self.relu = pnn.ReLU()
        self.pool = pnn.AdaptiveAvgPool2D(1)
        self.fc = pnn.Linear(4, 5)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc(self.pool(self.relu(self.bn(self.conv(x)))).flatten(1))


def test_settings_compare_across_ranks_of_one_family() -> None:
    paddle.seed(0)
    port = PaddleRankFree(bn_eps=1e-3)
    port.eval()
    kinds = {layer.path: layer.kind for layer in ts.plugins.hook().ts_named_layers(model=port)}
    assert kinds["bn"] == "batchnorm"
    report = find(torch_net(), port)
    differ = {row.orig_path: [s.name for s in row.settings] for row in report.settings_differ}
    assert differ == {"bn": ["eps"]}, report.verdict()


class TorchStemNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = tnn.Sequential(tnn.Conv2d(3, 4, 3, padding=1))
        self.bn = tnn.BatchNorm2d(4)
        self.pool = tnn.AdaptiveAvgPool2d(1)
        self.fc = tnn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.bn(self.stem(x))).flatten(1))


class PaddleStem(pnn.Layer):
    """A block that takes NCHW and returns NHWC: nothing declares its own layout."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = pnn.Conv2D(3, 4, 3, padding=1, data_format="NHWC")

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.conv(x.transpose([0, 2, 3, 1]))


class PaddleStemNet(pnn.Layer):
    def __init__(self, bn_eps: float = 1e-5) -> None:
        super().__init__()
        self.stem = PaddleStem()
        self.bn = pnn.BatchNorm2D(4, epsilon=bn_eps, data_format="NHWC")
        self.pool = pnn.AdaptiveAvgPool2D(1, data_format="NHWC")
        self.fc = pnn.Linear(4, 5)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc(self.pool(self.bn(self.stem(x))).flatten(1))


def stem_pair(bn_eps: float = 1e-5) -> tuple[TorchStemNet, PaddleStemNet]:
    torch.manual_seed(0)
    paddle.seed(0)
    port = PaddleStemNet(bn_eps)
    port.eval()
    return TorchStemNet().eval(), port


def test_a_block_that_turns_channels_last_inside_is_not_judged_from_misplaced_values() -> None:
    report = find(*stem_pair(), locate=True)
    assert report.passed and report.first_divergence is None, report.verdict()
    rows = {row.orig_path: row for row in report.layers}
    assert (
        rows["stem"].status is LayerStatus.UNKNOWN and "the same axes in another order" in rows["stem"].note
    )
    assert rows["stem.0"].target_path == "stem.conv" and rows["stem.0"].status is LayerStatus.OK


def test_a_difference_after_a_block_that_could_not_be_compared_is_named_with_that_caveat() -> None:
    report = find(*stem_pair(bn_eps=0.5))
    first = report.first_divergence
    assert first is not None and first.orig_path == "bn", report.verdict()
    assert "1 earlier layer call(s) could not be compared (stem" in first.unlocalised
    assert "may be among them" in report.verdict()


class PaddleFlatten(pnn.Layer):
    """Flattens its channels-last features where torch flattens channels first: same values, other places."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = pnn.Conv2D(3, 4, 3, padding=1, data_format="NHWC")
        self.flatten = pnn.Flatten()

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.flatten(self.conv(x.transpose([0, 2, 3, 1])))


class TorchFlatten(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = tnn.Conv2d(3, 4, 3, padding=1)
        self.flatten = tnn.Flatten()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.flatten(self.conv(x))


def test_a_flatten_of_channels_last_features_is_unknown_not_diverging() -> None:
    torch.manual_seed(0)
    report = find(TorchFlatten().eval(), PaddleFlatten().eval(), locate=True)
    rows = {row.orig_path: row for row in report.layers}
    assert rows["conv"].status is LayerStatus.OK, report.layer_table()
    assert rows["flatten"].status is LayerStatus.UNKNOWN and "merges axes" in rows["flatten"].note
    assert report.first_divergence is None and "cannot tell which layer differs" in report.verdict()
