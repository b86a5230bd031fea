"""TroubleShooter 1.0.18's network functions on MindSpore alone (no torch installed in nox -s mindspore)."""

from __future__ import annotations

import os
import subprocess
import sys

import mindspore as ms
import numpy as np
from mindspore import nn

import tscore as ts


def _cell(seed: int) -> nn.Cell:
    """A small cell with weights drawn from numpy (MindSpore's global seed is left as it is)."""
    cell = nn.SequentialCell(nn.Dense(4, 3), nn.ReLU(), nn.Dense(3, 2))
    rng = np.random.default_rng(seed)
    for param in cell.get_parameters():
        param.set_data(ms.Tensor(rng.standard_normal(param.shape).astype(np.float32)))
    return cell


def test_save_net_and_weight_params_then_load_ms_weight2net(tmp_path):
    net = _cell(0)
    written = ts.migrator.save_net_and_weight_params(net, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "mindspore_net_architecture.txt",
        "mindspore_troubleshooter_create.ckpt",
    ]
    assert "Dense" in (tmp_path / "mindspore_net_architecture.txt").read_text()
    other = _cell(1)
    assert not np.array_equal(other[0].weight.asnumpy(), net[0].weight.asnumpy())
    result = ts.widget.load_ms_weight2net(other, written["weights"])
    assert result.complete and result.loaded == 4
    for mine, theirs in zip(net.get_parameters(), other.get_parameters(), strict=True):
        assert np.array_equal(mine.asnumpy(), theirs.asnumpy()), mine.name
    # MindSpore's own reader takes the file
    assert set(ms.load_checkpoint(written["weights"])) == {p.name for p in net.get_parameters()}


PRINTING_NET = """
import numpy as np
import mindspore as ms
from mindspore import nn, ops

ms.set_context(mode=ms.GRAPH_MODE)


class Net(nn.Cell):
    def construct(self, x, ids, big):
        ops.print_("_TS_SAVE_NAME:x", x)
        y = ops.relu(x) * 2
        ops.print_("_TS_SAVE_NAME:y_half", y.astype(ms.float16))
        ops.print_("_TS_SAVE_NAME:ids", ids)
        ops.print_("_TS_SAVE_NAME:big", big)
        return y


rng = np.random.default_rng(0)
x = rng.standard_normal((2, 3)).astype(np.float32)
np.save("x.npy", x)
big = rng.standard_normal((40, 50)).astype(np.float32)
Net()(ms.Tensor(x), ms.Tensor(np.arange(4, dtype=np.int32)), ms.Tensor(big))
"""


def test_save_convert_reads_what_mindspores_own_print_wrote_in_graph_mode(tmp_path):
    (tmp_path / "net.py").write_text(PRINTING_NET)
    out = subprocess.run(
        [sys.executable, "net.py"], cwd=tmp_path, capture_output=True, text=True, check=True, timeout=300
    )
    (tmp_path / "screen.log").write_text(out.stdout)
    rows = {r.name: r for r in ts.widget.save_convert(tmp_path / "screen.log", tmp_path / "npy")}
    assert list(rows) == ["x", "y_half", "ids", "big"]
    x = np.load(tmp_path / "x.npy")
    assert np.array_equal(np.load(rows["x"].file), x)  # MindSpore prints float32 with 9 digits: exact
    assert rows["y_half"].dtype == "float16"
    assert np.array_equal(np.load(rows["y_half"].file), (np.maximum(x, 0) * 2).astype(np.float16))
    assert np.array_equal(np.load(rows["ids"].file), np.arange(4, dtype=np.int32))
    assert rows["big"].file is None and "summarised" in rows["big"].error


def _print_file(path, values) -> None:
    """Write MindSpore's binary print file with its own protobuf module, as Ascend writes it."""
    from mindspore.train import print_pb2

    message = print_pb2.Print()
    for value in values:
        item = message.value.add()
        if isinstance(value, str):
            item.desc = value
        else:
            item.tensor.dims.extend(value.shape)
            item.tensor.tensor_type = {"float32": "Float32", "int64": "Int64"}[value.dtype.name]
            item.tensor.tensor_content = value.tobytes()
    path.write_bytes(message.SerializeToString())


def test_save_convert_reads_both_binary_print_formats_faked_ascend_print_file(tmp_path):
    a = np.array([2, 3, 4, 5], dtype=np.float32)
    b = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    ids = np.array([2**60 + 1, -7], dtype=np.int64)
    # the VM's layout: marker, then the tensor's bytes; the value printed again after it is no save
    _print_file(
        tmp_path / "vm", ["_TS_SAVE_NAME:add", a, a, "_TS_SAVE_NAME:mul", b, "_TS_SAVE_NAME:ids", ids]
    )
    # GE's layout: the marker and the tensor's text in one string
    text = "Tensor(shape=[4], dtype=Float32, value=\n[2 3 4 5])"
    _print_file(tmp_path / "ge", [f"_TS_SAVE_NAME:add\n{text}", text, "_TS_SAVE_NAME:x\nTensor(shape=[3]"])
    vm = ts.widget.save_convert(tmp_path / "vm", tmp_path / "vm_npy")
    assert [(r.name, os.path.basename(r.file)) for r in vm] == [
        ("add", "0_add.npy"),
        ("mul", "1_mul.npy"),
        ("ids", "2_ids.npy"),
    ]
    for row, expected in zip(vm, (a, b, ids), strict=True):
        assert np.array_equal(np.load(row.file), expected) and np.load(row.file).dtype == expected.dtype
    ge = ts.widget.save_convert(tmp_path / "ge", tmp_path / "ge_npy")
    assert np.array_equal(np.load(ge[0].file), a) and ge[1].name == "x" and "cut short" in ge[1].error
