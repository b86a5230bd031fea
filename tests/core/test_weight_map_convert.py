"""Weight maps, conversion and checkpoint comparison on numpy data (no framework needed)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import tscore as ts
from tscore.checkpoint.ckpt_format import read_ckpt, write_ckpt
from tscore.checkpoint.convert import ConversionStatus, convert_checkpoint, convert_params
from tscore.checkpoint.weight_map import WeightMap, WeightMapError, customise, load_weight_map
from tscore.cli import main
from tscore.contract.checkpoints import CheckpointContents

MAP = WeightMap(
    name_map={
        "conv.weight": "conv.weight",
        "bn.weight": "bn.gamma",
        "bn.num_batches_tracked": None,
        "fc.bias": "fc.bias",
    },
    value_map={"conv.weight": "unsqueeze(2)"},
)


def torch_like() -> CheckpointContents:
    return CheckpointContents(
        path="net.pth",
        format="pth",
        params={
            "conv.weight": np.arange(24, dtype=np.float32).reshape(4, 2, 3),
            "bn.weight": np.ones(4, np.float32),
            "bn.num_batches_tracked": np.array(5),
            "fc.bias": np.zeros(2, np.float32),
        },
        skipped={"epoch": "int 3, not a tensor"},
    )


def test_convert_params_renames_transforms_drops_and_notes() -> None:
    params, rows = convert_params(torch_like(), MAP)
    assert list(params) == ["conv.weight", "bn.gamma", "fc.bias"]
    assert params["conv.weight"].shape == (4, 2, 1, 3)
    status = {row.source_name: row.status for row in rows}
    assert status == {
        "conv.weight": ConversionStatus.VALUE_CONVERTED,
        "bn.weight": ConversionStatus.RENAMED,
        "bn.num_batches_tracked": ConversionStatus.DROPPED,
        "fc.bias": ConversionStatus.CONSISTENT,
        "epoch": ConversionStatus.SKIPPED,
    }


def test_conversion_does_not_copy_the_arrays() -> None:
    source = torch_like()
    params, _ = convert_params(source, MAP)
    assert np.shares_memory(params["conv.weight"], source.params["conv.weight"])
    assert params["bn.gamma"] is source.params["bn.weight"]


def test_key_mismatch_lists_first_twenty_and_counts(tmp_path: Path) -> None:
    source = CheckpointContents("big.pth", "pth", params={f"layer{i}.weight": np.ones(1) for i in range(30)})
    wrong = WeightMap({f"block{i}.weight": f"block{i}.weight" for i in range(25)}, {})
    with pytest.raises(WeightMapError) as info:
        convert_checkpoint(source, tmp_path / "out.ckpt", wrong)
    message = str(info.value)
    assert "big.pth" in message
    assert "30 checkpoint entries are not in the map" in message
    assert "25 map entries are not in the checkpoint" in message
    assert "and 10 more" in message and "and 5 more" in message
    assert message.count("layer") == 20
    assert not (tmp_path / "out.ckpt").exists()


def test_nothing_is_written_when_a_transform_fails_half_way(tmp_path: Path) -> None:
    source = torch_like()
    (tmp_path / "out.ckpt").write_bytes(b"old")
    bad = dataclasses.replace(MAP, value_map={"fc.bias": "squeeze(3)"})
    with pytest.raises(WeightMapError, match=r"fc\.bias: squeeze"):
        convert_checkpoint(source, tmp_path / "out.ckpt", bad)
    assert (tmp_path / "out.ckpt").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.ckpt"]


def test_inverse_map_round_trips(tmp_path: Path) -> None:
    source = torch_like()
    convert_checkpoint(source, tmp_path / "ms.ckpt", MAP)
    back = read_ckpt(tmp_path / "ms.ckpt")
    params, _ = convert_params(back, MAP.inverse())
    assert list(params) == ["conv.weight", "bn.weight", "fc.bias"]
    np.testing.assert_array_equal(params["conv.weight"], source.params["conv.weight"])
    assert MAP.inverse().value_map == {"conv.weight": "squeeze(2)"}


def test_inverse_refuses_two_sources_on_one_target() -> None:
    with pytest.raises(WeightMapError, match="cannot be inverted"):
        WeightMap({"a": "x", "b": "x"}, {}).inverse()


def test_troubleshooter_map_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "ts_map.json"
    ts_value = "troubleshooter.migrator.mapping_relation.weight_adapter.trans_conv1d_weight_value"
    path.write_text(
        json.dumps([{"conv.weight": "conv.weight", "bn.weight": "bn.gamma"}, {"conv.weight": ts_value}])
    )
    loaded = load_weight_map(path)
    assert loaded.name_map == {"conv.weight": "conv.weight", "bn.weight": "bn.gamma"}
    assert loaded.value_map == {"conv.weight": "unsqueeze(2)"}


def test_tscore_map_file_round_trips_and_is_readable(tmp_path: Path) -> None:
    MAP.save(tmp_path / "map.json")
    text = (tmp_path / "map.json").read_text()
    assert '"bn.weight": "bn.gamma"' in text and '"bn.num_batches_tracked": null' in text
    assert load_weight_map(tmp_path / "map.json") == MAP


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "cannot be read as JSON"),
        ('{"something": 1}', "is not a weight map"),
        ('{"name_map": {"a": 3}}', r"name_map\['a'\] must be a name or null"),
        ('{"name_map": {"a": "b"}, "value_map": {"a": "rotate(1)"}}', "unknown value transform 'rotate"),
    ],
)
def test_bad_map_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "map.json"
    path.write_text(content)
    with pytest.raises(WeightMapError, match=message):
        load_weight_map(path)


def test_customise_prefix_then_function_leaves_dropped_entries_alone() -> None:
    def add_layer(names: dict[str, str]) -> dict[str, str]:
        assert None not in names.values()
        return {k: v.replace("net.", "net.custom.", 1) for k, v in names.items()}

    custom = customise(MAP, "net", add_layer)
    assert custom.name_map["bn.weight"] == "net.custom.bn.gamma"
    assert custom.name_map["bn.num_batches_tracked"] is None
    with pytest.raises(WeightMapError, match="dropped 1 name"):
        customise(MAP, None, lambda names: dict(list(names.items())[1:]))


def two_ckpts(tmp_path: Path) -> tuple[Path, Path]:
    a = {
        "fc1.weight": np.ones((10, 2), np.float32),
        "bn.gamma": np.ones(10, np.float32),
        "only_a": np.ones(1),
    }
    b = {
        "fc1.weight": np.ones((10, 3), np.float32),
        "bn.gamma": np.full(10, 1.5, np.float32),
        "only_b": np.ones(1),
    }
    write_ckpt(a, tmp_path / "a.ckpt")
    write_ckpt(b, tmp_path / "b.ckpt")
    return tmp_path / "a.ckpt", tmp_path / "b.ckpt"


def test_compare_ms_ckpt_tables_and_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_ckpts(tmp_path)
    diff = ts.migrator.compare_ms_ckpt(a, b)
    out = capsys.readouterr().out
    assert (
        "The list of comparison results for shapes" in out
        and "The list of comparison results for values" in out
    )
    rows = {(r.orig_name, r.target_name): r for r in diff.shape_rows}
    assert rows["fc1.weight", "fc1.weight"].shape_equal is False
    assert rows["bn.gamma", "bn.gamma"].shape_equal is True
    assert rows["only_a", None].shape_equal is None and rows[None, "only_b"].shape_equal is None
    values = {r.orig_name: r for r in diff.value_rows}
    assert values["bn.gamma"].allclose is False and values["bn.gamma"].max_abs_diff == pytest.approx(0.5)
    assert values["fc1.weight"].status.value == "shape_mismatch"
    assert diff.passed is False
    assert json.loads(diff.to_json())["passed"] is False


def test_compare_ms_ckpt_print_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_ckpts(tmp_path)
    ts.migrator.compare_ms_ckpt(a, b, print_level=0)
    assert capsys.readouterr().out == ""
    ts.migrator.compare_ms_ckpt(a, a, print_level=2)
    only_summary = capsys.readouterr().out
    assert "comparison results" not in only_summary and "3 of 3 within tolerance" in only_summary
    ts.migrator.compare_ms_ckpt(a, b, compare_value=False, print_level=2)
    out = capsys.readouterr().out
    assert "for shapes" in out and "for values" not in out
    assert "| bn.gamma" not in out and "fc1.weight" in out
    with pytest.raises(ValueError, match="print_level must be 0"):
        ts.migrator.compare_ms_ckpt(a, b, print_level=3)


def test_ckpt_diff_and_convert_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_ckpts(tmp_path)
    assert main(["ckpt-diff", str(a), str(a), "-q"]) == 0
    assert main(["ckpt-diff", str(a), str(b), "--json", "-"]) == 1
    assert json.loads(capsys.readouterr().out)["passed"] is False
    assert main(["convert", str(a), str(tmp_path / "a.safetensors"), "-q"]) == 0
    assert main(["ckpt-diff", str(a), str(tmp_path / "a.safetensors"), "-q"]) == 0
    assert main(["convert", str(tmp_path / "missing.ckpt"), str(tmp_path / "x.ckpt")]) == 2
    assert "missing.ckpt" in capsys.readouterr().err


def test_a_converted_file_converts_back_through_the_inverse_map() -> None:
    """A converted file lacks the dropped entries; the inverse map lists them and must not ask for them."""
    forward = dataclasses.replace(MAP, target_only=("fc.weight",))
    params, _ = convert_params(torch_like(), forward)
    converted = CheckpointContents(path="net.ckpt", format="ckpt", params=params)
    back_map = forward.inverse()
    assert back_map.name_map["fc.weight"] is None and back_map.target_only == ("bn.num_batches_tracked",)
    back, rows = convert_params(converted, back_map)  # strict: the map must fit the file
    original = torch_like().params
    assert list(back) == ["conv.weight", "bn.weight", "fc.bias"]
    for name, array in back.items():
        assert array.shape == original[name].shape and np.array_equal(array, original[name])
    assert all(row.status is not ConversionStatus.SKIPPED for row in rows)


def test_a_prefix_applies_to_target_only_entries_too() -> None:
    forward = dataclasses.replace(MAP, target_only=("bn.num_batches_tracked",))
    prefixed = customise(forward, "backbone")
    assert prefixed.name_map["bn.weight"] == "backbone.bn.gamma"
    assert prefixed.target_only == ("backbone.bn.num_batches_tracked",)


@pytest.mark.parametrize(
    ("transform", "message"),
    [
        ("unsqueeze()", "unsqueeze takes one axis"),
        ("unsqueeze(1, 2)", "unsqueeze takes one axis"),
        ("transpose(0, 0)", "transpose takes every axis once"),
    ],
)
def test_a_map_with_a_malformed_transform_is_refused_when_read(
    tmp_path: Path, transform: str, message: str
) -> None:
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"name_map": {"w": "w"}, "value_map": {"w": transform}}))
    with pytest.raises(WeightMapError, match=rf"map\.json.*{message}"):
        load_weight_map(path)
