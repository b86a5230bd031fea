"""Aligning weight-owning layers by names, then structure: pairs, how each was found, and ambiguity."""

from __future__ import annotations

import json
from pathlib import Path

from tscore.checkpoint.layer_alignment import AlignedLayer, LayerMatch, align_layers, alignment_table
from tscore.checkpoint.weight_map import WeightMap, load_weight_map


def conv(path: str, channels: int = 8) -> AlignedLayer:
    return AlignedLayer(path, "conv2d", ("conv2d", (("weight", (channels, channels, 3, 3)),)))


def bn(path: str, channels: int = 8) -> AlignedLayer:
    return AlignedLayer(path, "batchnorm2d", ("batchnorm2d", (("gamma", (channels,)),)))


def found(matches: list[LayerMatch]) -> dict[str | None, tuple[str | None, str]]:
    return {m.source if m.source is not None else f"target:{m.target}": (m.target, m.how) for m in matches}


def test_renamed_layers_pair_by_structure_in_order() -> None:
    source = [conv("features.0", 3), bn("features.1"), conv("downsample.0"), bn("downsample.1", 16)]
    target = [conv("layers.0", 3), bn("layers.1"), conv("down_sample.0"), bn("down_sample.1", 16)]
    assert found(align_layers(source, target)) == {
        "features.0": ("layers.0", "structure"),
        "features.1": ("layers.1", "structure"),
        "downsample.0": ("down_sample.0", "structure"),
        "downsample.1": ("down_sample.1", "structure"),
    }


def test_same_paths_anchor_even_when_the_parameters_differ() -> None:
    source = [
        conv("a"),
        bn("b"),
        AlignedLayer("fc", "linear", ("linear", (("weight", (4, 8)), ("bias", (4,))))),
    ]
    target = [conv("a"), bn("b"), AlignedLayer("fc", "linear", ("linear", (("weight", (4, 8)),)))]
    matches = align_layers(source, target)
    assert [(m.source, m.target, m.how) for m in matches] == [
        ("a", "a", "names"),
        ("b", "b", "names"),
        ("fc", "fc", "names"),
    ]
    assert matches[2].note == "same path, but the parameters' names or shapes differ"


def test_a_layer_present_on_one_side_only_is_unmatched_and_alike_neighbours_are_ambiguous() -> None:
    source = [conv("s.0"), conv("s.1"), conv("s.2"), bn("s.3", 4)]
    target = [conv("t.0"), conv("t.1"), bn("t.2", 4)]
    matches = align_layers(source, target)
    assert [(m.source, m.target, m.how) for m in matches] == [
        ("s.0", "t.0", "ambiguous"),
        ("s.1", "t.1", "ambiguous"),
        ("s.2", None, "unmatched"),
        ("s.3", "t.2", "structure"),
    ]
    assert matches[0].note == "t.0 could also pair with s.1; chosen by order, pass weight_map= to decide"
    assert matches[1].note.startswith("s.1 could also pair with t.0; t.1 could also pair with s.2;")


def test_names_that_end_alike_decide_between_alike_candidates_and_say_so() -> None:
    source = [conv("block.conv_a"), conv("block.conv_b")]
    target = [conv("cell.conv_b")]
    matches = found(align_layers(source, target))
    assert matches["block.conv_b"] == ("cell.conv_b", "structure")
    assert matches["block.conv_a"] == (None, "unmatched")
    note = next(m.note for m in align_layers(source, target) if m.source == "block.conv_b")
    assert note.endswith("chosen because only their names end alike")


def test_layers_defined_in_swapped_order_still_pair_when_each_is_unique() -> None:
    source = [
        conv("x.conv", 3),
        bn("x.bn"),
        AlignedLayer("x.fc", "linear", ("linear", (("weight", (2, 8)),))),
    ]
    target = [
        AlignedLayer("y.head", "linear", ("linear", (("weight", (2, 8)),))),
        conv("y.conv", 3),
        bn("y.bn"),
    ]
    matches = found(align_layers(source, target))
    assert matches["x.fc"] == ("y.head", "structure")
    assert matches["x.conv"] == ("y.conv", "structure") and matches["x.bn"] == ("y.bn", "structure")


def test_shapes_that_match_nowhere_leave_every_layer_unmatched_on_both_sides() -> None:
    matches = align_layers([conv("a", 3), bn("b", 3)], [conv("c", 5), bn("d", 5)])
    assert sorted((m.source, m.target, m.how) for m in matches if m.source) == [
        ("a", None, "unmatched"),
        ("b", None, "unmatched"),
    ]
    assert sorted(m.target for m in matches if m.source is None) == ["c", "d"]  # type: ignore[type-var]
    table = alignment_table(matches, ("torch", "mindspore"))
    assert "weight-owning layers: 4 unmatched" in table


def test_a_hundred_layer_alignment_keeps_every_pair_certain() -> None:
    source = [conv(f"layer{i // 10}.{i % 10}", 8 + i) for i in range(100)]
    target = [conv(f"stage{i // 10}.block{i % 10}", 8 + i) for i in range(100)]
    matches = align_layers(source, target)
    assert [(m.target, m.how) for m in matches] == [(t.path, "structure") for t in target]


def test_the_alignment_is_saved_with_the_map_and_read_back(tmp_path: Path) -> None:
    alignment = (
        LayerMatch("fc", "classifier", "linear", "structure"),
        LayerMatch("x", None, "conv2d", "unmatched"),
    )
    weight_map = WeightMap({"fc.weight": "classifier.weight"}, {}, alignment=alignment)
    path = weight_map.save(tmp_path / "map.json")
    document = json.loads(Path(path).read_text())
    assert document["alignment"][0] == {
        "source": "fc",
        "target": "classifier",
        "kind": "linear",
        "how": "structure",
    }
    loaded = load_weight_map(path)
    assert loaded.alignment == alignment
    assert loaded.inverse().alignment[0] == LayerMatch("classifier", "fc", "linear", "structure")
    assert loaded.twins() == {"fc": ("classifier", "structure")}


def test_alike_rivals_named_alike_too_stay_ambiguous() -> None:
    """A repeated block with one missing: every rival ends in ``conv1`` too, so the names decide nothing."""
    source = [conv("layer1.0.conv1"), bn("layer1.0.bn1"), conv("layer1.1.conv1"), bn("layer1.1.bn1")]
    target = [conv("layers1.0.conv1"), bn("layers1.0.bn1")]
    matches = align_layers(source, target)
    assert [m.how for m in matches] == ["ambiguous", "ambiguous", "unmatched", "unmatched"]
    assert "could also pair with layer1.1.conv1" in matches[0].note


def test_crossing_anchors_still_cut_the_networks_where_the_others_agree() -> None:
    p = AlignedLayer("p", "linear", ("linear", (("weight", (2, 2)),)))
    q = AlignedLayer("q", "linear", ("linear", (("weight", (3, 3)),)))
    mid = AlignedLayer("mid", "linear", ("linear", (("weight", (4, 4)),)))
    source = [p, q, conv("stem.conv"), mid, conv("blk.conv")]
    target = [q, p, mid, conv("blk2.conv")]
    found_ = found(align_layers(source, target))
    assert found_["blk.conv"] == ("blk2.conv", "structure")  # after the mid anchor, not the stem's
    assert found_["stem.conv"] == (None, "unmatched")


def test_two_unique_layers_in_swapped_order_are_both_certain() -> None:
    fc = AlignedLayer("a.fc", "linear", ("linear", (("weight", (10, 8)),)))
    head = AlignedLayer("a.head", "linear", ("linear", (("weight", (4, 8)),)))
    proj = AlignedLayer("b.proj", "linear", ("linear", (("weight", (4, 8)),)))
    classifier = AlignedLayer("b.classifier", "linear", ("linear", (("weight", (10, 8)),)))
    matches = align_layers([fc, head], [proj, classifier])
    assert {(m.source, m.target, m.how) for m in matches} == {
        ("a.fc", "b.classifier", "structure"),
        ("a.head", "b.proj", "structure"),
    }
    assert all("missing" not in m.note for m in matches)


def test_a_rankless_kind_anchors_at_its_path() -> None:
    """torch's SyncBatchNorm is ``batchnorm``; MindSpore's BatchNorm2d ``batchnorm2d``: one layer."""
    sync = AlignedLayer("bn", "batchnorm", ("batchnorm", (("gamma", (8,)),)))
    matches = align_layers([sync], [bn("bn")])
    assert [(m.target, m.how) for m in matches] == [("bn", "names")]
