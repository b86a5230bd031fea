"""Two frameworks' calls made comparable by their plugins' tables of neutral operations (any plugin).

A backend written outside tscore answers ``ts_dump_api_names`` for its framework: its dumps then pair
API by API with another framework's, values by neutral slot, a ``bias_add`` folded into the call before.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tscore as ts
from tscore.dump_compare import compare_dumps
from tscore.dump_compare.api_names import api_table, neutral_calls
from tscore.dump_compare.sources import read_dump
from tscore.plugin_api import hookimpl


class SplitBackend:
    """A third party's framework whose dense layer is MatMul then BiasAdd, its norm's inputs reordered."""

    @hookimpl
    def ts_dump_api_names(self, framework):
        if framework != "splitfw":
            return None
        return {
            "Primitive.MatMul": {"op": "matmul", "inputs": ["input", "other"]},  # weight once folded
            "Primitive.BiasAdd": {"op": "bias_add", "inputs": ["input", "bias"]},
            "Primitive.Norm": {
                "op": "norm",
                "inputs": ["input", "weight", "running_mean"],
                "outputs": ["output"],
            },
            "Primitive.Broken": "not a table entry",
        }


class FusedBackend:
    @hookimpl
    def ts_dump_api_names(self, framework):
        if framework != "fusedfw":
            return None
        return {
            "Functional.linear": {"op": "linear", "inputs": ["input", "weight", "bias"]},
            "Functional.norm": {"op": "norm", "inputs": ["input", "running_mean", "weight", "eps"]},
        }


@pytest.fixture
def two_frameworks():
    names = [ts.register_plugin(SplitBackend(), "splitfw"), ts.register_plugin(FusedBackend(), "fusedfw")]
    yield
    for name in names:
        ts.unregister_plugin(name)


def _stats(value: np.ndarray) -> dict:
    return {
        "type": "tensor",
        "dtype": "float32",
        "shape": list(value.shape),
        "max": float(value.max()),
        "min": float(value.min()),
        "mean": float(value.mean()),
        "norm": float(np.linalg.norm(value)),
    }


def _write(folder: Path, framework: str, calls: list[tuple[str, str, list, list]]) -> Path:
    """A tscore statistics dump of ``(prefix, api, inputs, outputs)`` forward calls."""
    folder.mkdir(parents=True)
    counts: dict[str, int] = {}
    with open(folder / "dump.jsonl", "w") as out:
        for prefix, api, inputs, outputs in calls:
            index = counts.get(api, 0)
            counts[api] = index + 1
            name = f"{prefix}_{api}_{index}_forward"

            def entry(side: str, n: int, value, many: bool, name: str = name) -> dict:
                if not isinstance(value, np.ndarray):
                    return {"name": f"{name}_{side}.{n}", "type": type(value).__name__, "value": value}
                return {"name": f"{name}_{side}" + (f".{n}" if many else ""), **_stats(value)}

            record = {
                "name": name,
                "prefix": prefix,
                "api": api,
                "index": index,
                "direction": "forward",
                "inputs": [entry("input", n, v, True) for n, v in enumerate(inputs)],
                "outputs": [entry("output", n, v, len(outputs) > 1) for n, v in enumerate(outputs)],
            }
            out.write(json.dumps(record) + "\n")
    info = {"config": {"task": "statistics"}, "recorded_frameworks": [framework]}
    (folder / "dump_info.json").write_text(json.dumps(info))
    return folder


def _runs(tmp_path: Path, bias_shift: float = 0.0) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((4, 8)), rng.standard_normal((3, 8)), rng.standard_normal(3)
    mean, scale = rng.standard_normal(3), rng.standard_normal(3)
    y = x @ w.T + b
    z = (y - mean) * scale
    split = _write(
        tmp_path / "split" / "rank0",
        "splitfw",
        [
            ("Primitive", "MatMul", [x, w], [x @ w.T]),
            ("Primitive", "BiasAdd", [x @ w.T, b + bias_shift], [y + bias_shift]),
            ("Primitive", "Norm", [y + bias_shift, scale, mean], [z + bias_shift * scale, mean]),
        ],
    )
    fused = _write(
        tmp_path / "fused" / "rank0",
        "fusedfw",
        [
            ("Functional", "linear", [x, w, b], [y]),
            ("Functional", "norm", [y, mean, scale, 1e-5], [z]),
        ],
    )
    return split, fused


def test_a_bias_add_is_folded_into_the_matmul_before_it_which_becomes_linear(tmp_path, two_frameworks):
    split, _ = _runs(tmp_path)
    table = api_table("splitfw")
    assert set(table) == {
        "Primitive.MatMul",
        "Primitive.BiasAdd",
        "Primitive.Norm",
    }  # the broken entry left out
    calls = neutral_calls(read_dump(split).calls, table)
    assert [(c.label, c.op) for c in calls] == [
        ("Primitive_MatMul_0_forward", "linear"),
        ("Primitive_Norm_0_forward", "norm"),
    ]
    assert [i.path for i in calls[0].inputs] == ["input", "weight", "bias"]
    assert [i.path for i in calls[1].outputs] == ["", "extra.1"]  # the first output is the neutral one


def test_two_frameworks_pair_api_by_api_and_a_planted_bias_is_named(tmp_path, two_frameworks):
    split, fused = _runs(tmp_path)
    (tmp_path / "out").mkdir()
    same = compare_dumps(split, fused, tmp_path / "out")
    assert same.passed and [(v.target_call, v.orig_call, v.status) for v in same.calls] == [
        ("Primitive_MatMul_0_forward", "Functional_linear_0_forward", "ok"),
        (
            "Primitive_Norm_0_forward",
            "Functional_norm_0_forward",
            "ok",
        ),  # weight against weight, not by position
    ]
    shifted, _ = _runs(tmp_path / "again", bias_shift=0.5)
    differ = compare_dumps(shifted, fused, tmp_path / "out")
    assert differ.first_error.target_call == "Primitive_MatMul_0_forward"
    assert (
        differ.first_error.status == "weights"
        and "Primitive_BiasAdd_0_forward_input.1" in differ.first_error.reason
    )


def test_without_a_table_two_frameworks_pair_by_name_only_and_say_why(tmp_path, caplog):
    split, fused = _runs(tmp_path)
    report = compare_dumps(split, fused)
    assert {v.how for v in report.calls} == {"unpaired"}
    assert "no installed plugin names the APIs of splitfw, fusedfw" in caplog.text


def test_backward_calls_keep_their_positions(tmp_path, two_frameworks):
    split, _ = _runs(tmp_path)
    calls = read_dump(split).calls
    backward = type(calls[0])(calls[0].name.__class__("Primitive", "MatMul", 0, "backward"), 9)
    backward.inputs = [type(calls[0].inputs[0])("input", "0", "g", dtype="float32", shape=(4, 3))]
    out = neutral_calls([*calls, backward], api_table("splitfw"))
    assert out[-1] is backward and backward.op == "matmul" and backward.inputs[0].path == "0"


def test_runs_that_change_while_compared_in_step_are_an_error(tmp_path):
    from tscore.dump_compare.calls import DumpReadError
    from tscore.dump_compare.compare import compare_streams
    from tscore.dump_compare.streams import stream_dump

    _, fused = _runs(tmp_path)
    target, orig = stream_dump(str(fused)), stream_dump(str(fused))
    whole, records = orig.calls, orig.records.each
    orig.calls = lambda: iter(list(whole())[:1])  # the other run lost its last call since the names were read
    orig.records.each = lambda: iter(list(records())[:1])  # read as columns (statistics_lane) or not
    with pytest.raises(DumpReadError, match="changed while it was compared"):
        compare_streams(target, orig)


@pytest.mark.parametrize(
    ("api", "op"),
    [
        ("split", "split"),
        ("__truediv__", "div"),
        ("__radd__", "add"),
        ("view", "reshape"),
        ("astype", "cast"),
    ],
)
def test_an_api_no_table_names_is_the_operation_its_name_says_in_any_namespace(api: str, op: str) -> None:
    from tscore.dump_compare.api_names import default_op

    assert default_op(api) == op


def test_a_name_two_frameworks_use_for_different_operations_gets_no_neutral_operation() -> None:
    from tscore.dump_compare.api_names import default_op

    assert default_op("gather") is None and default_op("transpose") is None and default_op("repeat") is None


@pytest.mark.parametrize(
    ("a", "b", "alike"),
    [((32, 64), (2, 16, 64), True), ((2, 4, 16, 16), (2, 16, 4, 16), False), ((6, 4), (4, 6), False)],
)
def test_only_leading_axes_merged_count_as_the_same_values(a, b, alike) -> None:
    from tscore.dump_compare.rows import _leading_axes_merged

    assert _leading_axes_merged(a, b) is alike and _leading_axes_merged(b, a) is alike


class GatherBackend:
    """A framework whose one gather primitive serves as an embedding, as MindSpore's ``Gather`` does."""

    @hookimpl
    def ts_dump_api_names(self, framework):
        if framework != "gatherfw":
            return None
        return {"Primitive.Gather": {"op": "embedding", "inputs": ["weight", "input", "axis"]}}


def test_a_gather_is_an_embedding_only_when_it_looks_rows_up_in_a_2d_table(tmp_path) -> None:
    name = ts.register_plugin(GatherBackend(), "gatherfw")
    try:
        rng = np.random.default_rng(0)
        table, cube, ids = rng.standard_normal((10, 4)), rng.standard_normal((3, 10, 4)), np.arange(3.0)
        dump = _write(
            tmp_path / "g" / "rank0",
            "gatherfw",
            [
                ("Primitive", "Gather", [table, ids, 0], [table[:3]]),  # rows of a table: an embedding
                ("Primitive", "Gather", [cube, ids, 1], [cube[:, :3]]),  # along axis 1 of a 3-d tensor
                ("Primitive", "Gather", [table, ids, 1], [table[:, :3]]),  # columns
            ],
        )
        calls = neutral_calls(read_dump(dump).calls, api_table("gatherfw"))
        assert [c.op for c in calls] == ["embedding", None, None]
    finally:
        ts.unregister_plugin(name)
