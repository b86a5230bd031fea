"""``ts.widget.precision_tracker`` on MindSpore's own ANF IR graph files, saved by a real graph-mode run.

The CPU backend changes no operator's precision; the Ascend backend's ``precision_flag``
attribute cannot be produced here, so one test adds it to a real graph file (its name says so).
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest
from mindspore.train import anf_ir_pb2

import tscore as ts
from tscore.precision_tracker import COLUMNS, GraphFileError

NET = """
import numpy as np
import mindspore as ms
from mindspore import nn

ms.set_context(mode=ms.GRAPH_MODE)
net = nn.SequentialCell(nn.Dense(4, 3), nn.ReLU())
net(ms.Tensor(np.ones((2, 4), np.float32)))
"""


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("graphs")
    (folder / "net.py").write_text(NET)
    env = {**os.environ, "MS_DEV_SAVE_GRAPHS": "2", "MS_DEV_SAVE_GRAPHS_PATH": str(folder / "ir")}
    subprocess.run(
        [sys.executable, "net.py"], cwd=folder, env=env, check=True, capture_output=True, timeout=300
    )
    found = sorted((folder / "ir").glob("*vm_build*.pb")) or sorted((folder / "ir").glob("*.pb"))
    assert found, sorted(p.name for p in (folder / "ir").iterdir())[:20]
    return str(found[0])


def _csv(path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def test_every_normal_operator_is_listed_with_what_feeds_it_and_what_it_feeds(graph_file, tmp_path):
    rows = ts.widget.precision_tracker(graph_file, ("normal",), output_path=tmp_path)
    written = tmp_path / (os.path.basename(graph_file).split(".")[0] + ".csv")
    assert list(_csv(written)[0]) == list(COLUMNS) and len(_csv(written)) == len(rows)
    matmul = [r for r in rows if r["op_type"] == "MatMul"]
    inputs = [r for r in matmul if r["input or output"] == "input"]
    assert inputs[0]["input from op or output to op"] == "input_data" and inputs[0]["shape"] == "[2, 4]"
    assert inputs[1]["shape"] == "[3, 4]" and inputs[1]["dtype"] == "float32"  # the weight, loaded
    (out,) = [r for r in matmul if r["input or output"] == "output"]
    assert out["input from op or output to op"].startswith("BiasAdd") and out["shape"] == "[2, 3]"
    assert {r["precision_flag"] for r in rows} == {"normal"}
    assert ts.widget.precision_tracker(graph_file, ("raise", "reduce"), output_path=tmp_path) == []


def test_an_operator_flagged_by_the_ascend_backend_is_found_faked_ascend_precision_flag(graph_file, tmp_path):
    model = anf_ir_pb2.ModelProto()
    with open(graph_file, "rb") as stream:
        model.ParseFromString(stream.read())
    node = next(n for n in model.graph.node if n.op_type == "MatMul")
    flag = node.attribute.add()
    flag.name = "precision_flag"
    flag.value.dtype = anf_ir_pb2.DT_STRING
    flag.value.str_val = "reduce"
    faked = tmp_path / "flagged.pb"
    faked.write_bytes(model.SerializeToString())
    rows = ts.widget.precision_tracker(faked, ("raise", "reduce"))
    assert {(r["op_type"], r["precision_flag"]) for r in rows} == {("MatMul", "reduce")}
    assert (tmp_path / "flagged.csv").is_file()  # beside the graph, by default


def test_files_that_are_not_graphs_are_clear_errors(tmp_path):
    (tmp_path / "noise.pb").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(GraphFileError, match=r"noise\.pb"):
        ts.widget.precision_tracker(tmp_path / "noise.pb")
    (tmp_path / "tiny.pb").write_bytes(b'"\x02\n\x00')  # parses as a ModelProto: one nameless node
    with pytest.raises(GraphFileError, match=r"tiny\.pb"):
        ts.widget.precision_tracker(tmp_path / "tiny.pb")
    with pytest.raises(GraphFileError, match="does not exist"):
        ts.widget.precision_tracker(tmp_path / "missing.pb")
    with pytest.raises(TypeError, match="precision_flags"):
        ts.widget.precision_tracker(tmp_path / "noise.pb", "reduce")
