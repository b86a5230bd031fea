"""Tests that need torch and MindSpore in one environment (nox session 'both')."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.conftest import npy_names
from tests.core.test_import import run_isolation_probe

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "save_twins.py"


def test_both_frameworks_are_installed_here():
    assert importlib.util.find_spec("torch") is not None
    assert importlib.util.find_spec("mindspore") is not None


def test_import_tscore_imports_neither_framework_where_both_are_installed(tmp_path):
    report = run_isolation_probe(tmp_path)
    assert report["import"] == [] and report["use"] == []


def test_bundled_example_pairs_file_by_file(tmp_path):
    env = {**os.environ, "COLUMNS": "100"}  # as at a terminal 100 wide
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path)], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert max(len(line) for line in out.splitlines()) <= 100, out
    assert "largest difference between the twins" in out
    assert "The list of comparison results" in out and "orig: " in out  # the folders under the title
    assert "shape of" in out and "fc1.weight_" in out  # headers and long names wrapped, not cut
    assert "7 pairs: 7 within tolerance" in out
    # the planted mistake (MindSpore's LeakyReLU() slope) is named where it was planted, and the page written
    assert "first divergence: 1_hidden.npy (mismatch, max abs diff" in out
    assert out.splitlines()[-1] == f"HTML report: {tmp_path / 'report.html'}"
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "first divergence: 1_hidden.npy" in page and "FAILED" in page
    names = npy_names(tmp_path / "torch")
    assert names == npy_names(tmp_path / "mindspore")
    assert names[:3] == ["0_input.npy", "1_hidden.npy", "2_hidden_backward.npy"]
    assert "3_grads_fc1.weight_0.npy" in names
    for name in names:
        a, b = np.load(tmp_path / "torch" / name), np.load(tmp_path / "mindspore" / name)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)


def test_torch_and_mindspore_tensors_in_one_save(tmp_path):
    import mindspore as ms
    import torch

    import tscore as ts

    ts.save(tmp_path / "mix", {"pt": torch.ones(2), "ms": ms.Tensor(np.zeros(2, np.float32))})
    assert npy_names(tmp_path) == ["0_mix_ms.npy", "0_mix_pt.npy"]
    meta = ts.tensor_meta(torch.ones(1)), ts.tensor_meta(ms.Tensor(np.ones(1)))
    assert [m.framework for m in meta] == ["torch", "mindspore"]


def test_spec000_gradient_example_names(tmp_path):
    """Spec 000/002: torch grads via get_pt_grads and MindSpore grads saved for compare_grads_dir."""
    import mindspore as ms
    import torch

    import tscore as ts

    class PtSimpleNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(10, 5)
            self.bn = torch.nn.BatchNorm1d(5)

        def forward(self, x):
            return self.bn(self.fc(x))

    class MsSimpleNet(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = ms.nn.Dense(10, 5)

        def construct(self, x):
            return self.fc(x)

    inputs = np.random.randn(32, 10).astype(np.float32)
    targets = np.random.randn(32, 5).astype(np.float32)
    pt_net = PtSimpleNet()
    pt_loss = torch.nn.MSELoss()(pt_net(torch.tensor(inputs)), torch.tensor(targets))
    pt_loss.backward()
    ts.save(str(tmp_path / "pt" / "torch_grads"), ts.widget.get_pt_grads(pt_net))
    ms_net = MsSimpleNet()

    def forward_fn(x, y):
        return ms.nn.MSELoss()(ms_net(x), y)

    grad_fn = ms.value_and_grad(forward_fn, None, ms_net.trainable_params())
    _, ms_grads = grad_fn(ms.Tensor(inputs), ms.Tensor(targets))
    ts.save(str(tmp_path / "ms" / "ms_grads"), ms_grads)
    assert npy_names(tmp_path / "pt") == [
        "0_torch_grads_bn.bias_3.npy",
        "0_torch_grads_bn.weight_2.npy",
        "0_torch_grads_fc.bias_1.npy",
        "0_torch_grads_fc.weight_0.npy",
    ]
    assert npy_names(tmp_path / "ms") == ["1_ms_grads_0.npy", "1_ms_grads_1.npy"]

    report = ts.migrator.compare_grads_dir(tmp_path / "pt", tmp_path / "ms", print_level=0)
    assert [(p.orig_name, p.target_name, p.orig_shape, p.target_shape) for p in report.pairs] == [
        ("0_torch_grads_fc.weight_0.npy", "1_ms_grads_0.npy", (5, 10), (5, 10)),
        ("0_torch_grads_fc.bias_1.npy", "1_ms_grads_1.npy", (5,), (5,)),
        ("0_torch_grads_bn.weight_2.npy", None, (5,), None),
        ("0_torch_grads_bn.bias_3.npy", None, (5,), None),
    ]
    # Different random weights on each side, as in the spec: the gradients disagree.
    assert [p.status.value for p in report.pairs] == ["mismatch", "mismatch", "missing", "missing"]
    assert "shape of target" in report.table(compare_shape=True)


def test_spec001_compare_mindspore_and_torch_saves(tmp_path, monkeypatch, capsys):
    """Spec 001: the same Dense layer saved from both frameworks, then compare_npy_dir on the folders."""
    import mindspore as ms
    import torch

    import tscore as ts

    monkeypatch.chdir(tmp_path)
    weight = np.random.randn(2, 3).astype(np.float32)
    x = np.random.randn(1, 3).astype(np.float32)

    pt_dense = torch.nn.Linear(3, 2, bias=False)
    pt_dense.weight.data = torch.tensor(weight)
    ts.reset_save_id()
    ts.save("torch_ts_save/input", torch.tensor(x))
    out = pt_dense(torch.tensor(x))
    ts.save("torch_ts_save/dense", out)
    ts.save("torch_ts_save/dense_backward", torch.ones_like(out))

    ms_dense = ms.nn.Dense(3, 2, has_bias=False)
    ms_dense.weight.set_data(ms.Tensor(weight))
    ts.reset_save_id()
    ts.save("ms_ts_save/input", ms.Tensor(x))
    out = ms_dense(ms.Tensor(x))
    ts.save("ms_ts_save/dense", out)
    ts.save("ms_ts_save/dense_backward", ms.ops.ones_like(out))

    report = ts.migrator.compare_npy_dir("ms_ts_save", "torch_ts_save")
    table = capsys.readouterr().out
    assert [p.orig_name for p in report.pairs] == ["0_input.npy", "1_dense.npy", "2_dense_backward.npy"]
    assert report.passed and "| 0_input.npy |" not in table  # centred like the spec
    ts.migrator.compare_npy_dir(
        "ms_ts_save",
        "torch_ts_save",
        rtol=1e-3,
        atol=1e-3,
        equal_nan=True,
        compare_shape=True,
        output_file="./compare.csv",
    )
    assert "(1, 2)" in capsys.readouterr().out
    assert (tmp_path / "compare.csv").read_text().count("\n") == 4
