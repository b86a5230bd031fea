"""tscore's .ckpt and safetensors files against MindSpore's own reader and writer."""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import ml_dtypes
import numpy as np
import pytest
from mindspore import nn

import tscore as ts
from tscore.checkpoint import ckpt_format
from tscore.checkpoint.ckpt_format import read_ckpt, write_ckpt
from tscore.checkpoint.safetensors_format import read_safetensors, write_safetensors
from tscore.plugins import hook


def params() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "dense.weight": rng.standard_normal((3, 4)).astype(np.float32),
        "bn.gamma": rng.standard_normal(4).astype(ml_dtypes.bfloat16),
        "half": rng.standard_normal(2).astype(np.float16),
        "global_step": np.array(12, np.int32),
    }


def same_as_ms(loaded: dict[str, object], expected: dict[str, np.ndarray]) -> None:
    assert list(loaded) == list(expected)
    for name, array in expected.items():
        tensor = loaded[name]
        assert tuple(tensor.shape) == array.shape, name
        assert ts.to_numpy(tensor).dtype == array.dtype, name
        np.testing.assert_array_equal(ts.to_numpy(tensor).astype(np.float64), array.astype(np.float64))


@pytest.mark.parametrize("crc", [False, True])
def test_mindspore_loads_our_ckpt(tmp_path: Path, crc: bool) -> None:
    write_ckpt(params(), tmp_path / "ours.ckpt", crc=crc)
    same_as_ms(ms.load_checkpoint(str(tmp_path / "ours.ckpt"), crc_check=crc), params())


def test_mindspore_loads_our_split_tensor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ckpt_format, "SLICE_BYTES", 64)
    big = {"big": np.arange(300, dtype=np.float32).reshape(3, 100)}
    write_ckpt(big, tmp_path / "split.ckpt")
    same_as_ms(ms.load_checkpoint(str(tmp_path / "split.ckpt")), big)


def test_we_read_mindspore_ckpt_with_crc_strings_and_bf16(tmp_path: Path) -> None:
    expected = params()
    entries = [
        {
            "name": k,
            "data": ms.Tensor(v.astype(np.float32), ms.bfloat16)
            if v.dtype == ml_dtypes.bfloat16
            else ms.Tensor(v),
        }
        for k, v in expected.items()
    ]
    ms.save_checkpoint(entries, str(tmp_path / "theirs.ckpt"), crc_check=True, append_dict={"note": "hello"})
    contents = read_ckpt(tmp_path / "theirs.ckpt", check_crc=True)
    for name, array in expected.items():
        assert contents.params[name].dtype == array.dtype
        np.testing.assert_array_equal(contents.params[name], array)
    assert contents.skipped == {"note": "a string ('hello'), not a tensor"}


def test_safetensors_both_ways(tmp_path: Path) -> None:
    write_safetensors(params(), tmp_path / "ours.safetensors", metadata={"format": "ms"})
    loaded = ms.load_checkpoint(str(tmp_path / "ours.safetensors"), format="safetensors")
    same_as_ms(dict(sorted(loaded.items())), dict(sorted(params().items())))
    ms.save_checkpoint(nn.Dense(4, 3), str(tmp_path / "theirs.safetensors"), format="safetensors")
    contents = read_safetensors(tmp_path / "theirs.safetensors")
    assert sorted(contents.params) == ["bias", "weight"] and contents.metadata["format"] == "ms"


class NetA(nn.Cell):
    def __init__(self, inputs: int = 2) -> None:
        super().__init__()
        self.fc1 = nn.Dense(inputs, 10)
        self.bn1 = nn.BatchNorm1d(10)
        self.fc2 = nn.Dense(10, 1)
        self.relu = nn.ReLU()
        self.sigmoid = nn.Sigmoid()

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.sigmoid(self.fc2(self.relu(self.bn1(self.fc1(x)))))


def test_spec_compare_ms_ckpt_example(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Spec 003 scenario 2: NetA (Dense(2, 10)) against NetB (Dense(3, 10))."""
    ms.save_checkpoint(NetA(2), "net_a.ckpt")
    ms.save_checkpoint(NetA(3), "net_b.ckpt")
    diff = ts.migrator.compare_ms_ckpt("net_a.ckpt", "net_b.ckpt")
    shapes = {row.orig_name: row for row in diff.shape_rows}
    assert shapes["fc1.weight"].shape_equal is False
    assert shapes["fc1.weight"].orig_shape == (10, 2) and shapes["fc1.weight"].target_shape == (10, 3)
    assert all(row.shape_equal for name, row in shapes.items() if name != "fc1.weight")
    assert len(diff.value_rows) == len(diff.shape_rows) == 8
    capsys.readouterr()
    ts.migrator.compare_ms_ckpt("net_a.ckpt", "net_b.ckpt", compare_value=False, print_level=2)
    out = capsys.readouterr().out
    table_rows = [line for line in out.splitlines() if line.startswith("|") and "shape" not in line.lower()]
    assert len(table_rows) == 1 and "fc1.weight" in table_rows[0] and "(10, 2)" in table_rows[0]


def test_mindspore_convention_for_batchnorm3d_and_prelu() -> None:
    rules = hook().ts_weight_convention(kind="batchnorm3d", framework="mindspore")
    assert rules["names"]["weight"] == "bn2d.gamma"
    assert rules["names"]["num_batches_tracked"] is None
    cell = nn.BatchNorm3d(4)
    assert {n for n, _ in cell.parameters_and_names()} == {
        f"bn2d.{v}" for v in ("gamma", "beta", "moving_mean", "moving_variance")
    }
    prelu = hook().ts_weight_convention(kind="prelu", framework="mindspore")
    assert prelu["names"] == {"weight": "w"}
    assert [n for n, _ in nn.PReLU(4).parameters_and_names()] == ["w"]
    assert hook().ts_weight_convention(kind="linear", framework="mindspore") is None
    assert hook().ts_weight_convention(kind="batchnorm2d", framework="torch") is None
