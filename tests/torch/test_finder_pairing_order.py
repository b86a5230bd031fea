"""Pairing follows the order layers are called, not the order a backend lists them.

A framework that lists a layer's attributes sorted (or re-sorts them after an
update) is stood in for by the torch backend listing every layer by path;
the port names its weight-less layers differently, so they pair by order.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import tscore as ts
from tscore.netdiff.report import LayerStatus
from tscore.plugins import get_plugin_manager


class Original(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.act1 = nn.LeakyReLU(0.1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.act2 = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act2(self.conv2(self.act1(self.conv1(x))))


class Port(nn.Module):
    """The same network; its weight-less layers named so that sorting lists them the other way round."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.z_act = nn.LeakyReLU(0.1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.a_pool = nn.MaxPool2d(2)
        self.b_act = nn.LeakyReLU(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a_pool(self.conv2(self.z_act(self.conv1(x))))


@pytest.fixture
def listed_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch backend lists the root first, then every layer sorted by path (parents still first)."""
    plugin = next(p for p in get_plugin_manager().get_plugins() if getattr(p, "framework", None) == "torch")
    listed = type(plugin).named_layers

    def sorted_layers(self: object, model: object) -> list[object]:
        layers = list(listed(self, model))
        return [layers[0], *sorted(layers[1:], key=lambda layer: layer.path)]

    monkeypatch.setattr(type(plugin), "named_layers", sorted_layers)


def test_layers_listed_in_another_order_pair_by_their_calls(listed_sorted: None) -> None:
    torch.manual_seed(0)
    report = ts.migrator.NetDifferenceFinder(Original().eval(), Port().eval(), print_level=0).compare(
        auto_inputs=(((2, 3, 8, 8), "float32"),), locate=True
    )
    assert report.passed and report.first_divergence is None, report.verdict()
    pairs = {row.orig_path: row.target_path for row in report.layers}
    assert pairs["act1"] == "z_act" and pairs["act2"] == "a_pool", pairs
    assert all(row.status is LayerStatus.OK for row in report.layers), report.layer_table()


class DropOriginal(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.drop1 = nn.Dropout(0.1)
        self.fc2 = nn.Linear(4, 4)
        self.drop2 = nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop2(self.fc2(self.drop1(self.fc1(x))))


class DropPort(nn.Module):
    """Dropouts named so that sorting lists the second first; in eval mode the outputs agree."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.z_drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(4, 4)
        self.a_drop = nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a_drop(self.fc2(self.z_drop(self.fc1(x))))


def test_without_locating_settings_are_compared_between_layers_paired_by_their_calls(
    listed_sorted: None,
) -> None:
    """The outputs agree, so nothing is located: the call order comes from a run whose hooks keep nothing."""
    report = ts.migrator.NetDifferenceFinder(DropOriginal(), DropPort(), print_level=0).compare(
        auto_inputs=(((2, 4), "float32"),)
    )
    assert report.passed and report.layers == [], report.verdict()
    assert report.settings_differ == [], report.verdict()
    assert report.verdict() == "outputs agree: no divergence"
