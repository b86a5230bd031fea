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
