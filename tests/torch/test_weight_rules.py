"""A convention can say that no renaming converts a kind: such weights are never converted wrongly.

Per-gate recurrent weights and split q/k/v projections differ between
frameworks in more than names; a plugin marks such a kind ``needs_rule`` and
the map shows its entries as "needs a rule", maps them to nothing, and says why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from torch import nn

import tscore as ts
from tscore.checkpoint.weight_map import build_weight_map, load_weight_map
from tscore.plugin_api import Backend

WHY = "its cells keep one matrix per gate, where the neutral form stacks them"


class GatedBackend(Backend):
    """A framework that stores LSTMs per gate: its plugin marks ``lstm`` as needing a rule."""

    framework = "gated"
    module = "json"  # any importable module: this framework has no tensors to claim here

    def weight_convention(self, kind: str) -> dict[str, Any] | None:
        if kind == "lstm":
            return {"needs_rule": WHY}
        if kind == "linear":
            return {"names": {"weight": "kernel"}, "transforms": {"weight": "transpose(1, 0)"}}
        return None


@pytest.fixture
def gated() -> Iterator[None]:
    name = ts.register_plugin(GatedBackend(), "gated")
    try:
        yield
    finally:
        ts.unregister_plugin(name)


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(4, 8)
        self.head = nn.Linear(8, 3)


def test_a_kind_that_needs_a_rule_is_left_out_with_its_reason(gated: None, tmp_path: Path) -> None:
    weight_map = build_weight_map(Tagger(), target="gated")
    rnn = [name for name in weight_map.name_map if name.startswith("rnn.")]
    assert rnn and all(weight_map.name_map[name] is None for name in rnn)
    assert set(weight_map.needs_rule) == set(rnn)
    assert all(WHY in why and "gated stores lstm" in why for why in weight_map.needs_rule.values())
    assert weight_map.name_map["head.weight"] == "head.kernel"
    assert weight_map.value_map["head.weight"] == "transpose(1, 0)"
    table = weight_map.table()
    assert f"(needs a rule: gated stores lstm so that no renaming converts it: {WHY})" in table
    again = load_weight_map(weight_map.save(tmp_path / "map.json"))
    assert again.needs_rule == weight_map.needs_rule


def test_a_rule_written_into_the_map_file_is_followed(gated: None, tmp_path: Path) -> None:
    weight_map = build_weight_map(Tagger(), target="gated")
    path = weight_map.save(tmp_path / "map.json")
    text = Path(path).read_text().replace('"rnn.weight_ih_l0": null', '"rnn.weight_ih_l0": "rnn.w_ih"')
    Path(path).write_text(text)
    edited = load_weight_map(path)
    assert edited.name_map["rnn.weight_ih_l0"] == "rnn.w_ih"
    assert "rnn.weight_ih_l0" not in edited.needs_rule and "rnn.weight_hh_l0" in edited.needs_rule


def test_between_two_torch_networks_nothing_needs_a_rule() -> None:
    weight_map = build_weight_map(Tagger(), target_model=Tagger())
    assert weight_map.needs_rule == {} and weight_map.name_map["rnn.weight_ih_l0"] == "rnn.weight_ih_l0"


def test_the_inverse_map_keeps_the_reason_for_the_names_that_need_a_rule(gated: None) -> None:
    weight_map = build_weight_map(Tagger(), target="gated")
    back = weight_map.inverse()
    assert (back.source, back.target) == ("gated", "torch")
    assert set(back.needs_rule) == set(weight_map.needs_rule) <= set(back.target_only)
    assert (
        back.name_map["head.kernel"] == "head.weight" and back.value_map["head.kernel"] == "transpose(1, 0)"
    )
