"""Comparing folders that torch tensors were saved into."""

from __future__ import annotations

import torch

import tscore as ts
from tscore.compare import PairStatus


def test_half_precision_run_against_float32_run(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    ts.save(str(tmp_path / "fp32" / "out"), net(x), auto_id=False)
    ts.save(str(tmp_path / "bf16" / "out"), net.to(torch.bfloat16)(x.to(torch.bfloat16)), auto_id=False)
    report = ts.migrator.compare_npy_dir(tmp_path / "fp32", tmp_path / "bf16", print_level=0)
    (row,) = report.pairs
    assert (row.orig_dtype, row.target_dtype) == ("torch.float32", "torch.bfloat16")
    assert row.status is PairStatus.DTYPE_MISMATCH and not row.passed  # bf16 misses 1e-4
    assert 0.999 < row.cosine < 1.0 and 0 < row.max_abs_diff < 0.1
    loose = ts.migrator.compare_npy_dir(tmp_path / "fp32", tmp_path / "bf16", 5e-2, 5e-2, print_level=0)
    assert loose.passed


def test_gradients_of_two_identical_runs_pass(tmp_path):
    for run in ("a", "b"):
        torch.manual_seed(1)
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 2))
        net(torch.randn(2, 3, 8, 8)).sum().backward()
        ts.reset_save_id()
        ts.save(str(tmp_path / run / "grads"), ts.widget.get_pt_grads(net))
    report = ts.migrator.compare_grads_dir(tmp_path / "a", tmp_path / "b", print_level=0)
    assert len(report.pairs) == 4 and report.passed
    assert [p.orig_shape for p in report.pairs] == [(4, 3, 3, 3), (4,), (2, 144), (2,)]
