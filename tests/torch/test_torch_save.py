"""Spec 001 and 003 torch examples, ported to ``import tscore as ts``, and save_grad."""

import logging
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

import tscore as ts
from tests.conftest import npy_names
from tscore import npy_files


class NetWithSaveGrad(torch.nn.Module):
    """Spec 001, PyTorch section."""

    def __init__(self, path):
        super().__init__()
        self.dense = torch.nn.Linear(3, 2)
        self.apply(self._init_weights)
        self.path = path

    def _init_weights(self, module):
        if isinstance(module, torch.nn.Linear):
            module.weight.data.zero_()
            module.bias.data.zero_()

    def forward(self, x):
        ts.save(self.path + "input", x)
        x = self.dense(x)
        ts.save(self.path + "dense", x)
        x = ts.save_grad(self.path + "dense", x)
        return x


def test_spec001_torch_example_prints_the_listed_files(in_tmp):
    path = "./torch_ts_save/"
    data = np.array([[0.2, 0.5, 0.2]], dtype=np.float32)
    label = np.array([[1, 0]], dtype=np.float32)
    net = NetWithSaveGrad(path)
    loss_fun = torch.nn.CrossEntropyLoss()
    out = net(torch.tensor(data))
    loss = loss_fun(out, torch.tensor(label))
    loss.backward()
    time.sleep(0.1)
    files = sorted(map(str, Path(path).glob("*.npy")))
    assert files == [
        "torch_ts_save/0_input.npy",
        "torch_ts_save/1_dense.npy",
        "torch_ts_save/2_dense_backward.npy",
    ]
    # zero weights: softmax is uniform, so d loss / d logits = softmax - label
    np.testing.assert_allclose(np.load("torch_ts_save/2_dense_backward.npy"), [[-0.5, 0.5]])
    np.testing.assert_array_equal(np.load("torch_ts_save/0_input.npy"), data)


def test_spec003_torch_example_names(in_tmp):
    x1 = torch.tensor([-0.5962, 0.3123], dtype=torch.float32)
    x2 = torch.tensor([[0.4985], [0.4323]], dtype=torch.float32)
    save_dir = in_tmp / "save"
    save_dir.mkdir()
    file = str(save_dir / "torch_tensor")
    ts.save(file, x1)
    ts.save(file, x2)
    ts.save(None, {"x1": x1, "x2": x2}, suffix="torch")
    assert npy_names(save_dir) == ["0_torch_tensor.npy", "1_torch_tensor.npy"]
    assert npy_names(in_tmp) == ["2_tensor_(2, 1)_x2_torch.npy", "2_tensor_(2,)_x1_torch.npy"]
    np.testing.assert_array_equal(np.load(save_dir / "1_torch_tensor.npy"), x2.numpy())


def test_bfloat16_tensor_saved_readable_with_source_dtype(tmp_path):
    t = torch.tensor([1.0, 2.5], dtype=torch.bfloat16, requires_grad=True)
    ts.save(tmp_path / "b", t)
    assert np.load(tmp_path / "0_b.npy").dtype == np.float32
    meta = npy_files.read_meta(str(tmp_path))["0_b.npy"]
    assert meta["dtype"] == "bfloat16" and meta["native_dtype"] == "torch.bfloat16"
    assert meta["framework"] == "torch"
    assert ts.to_numpy(t).dtype == np.dtype(ml_dtypes.bfloat16)


def test_save_grad_id_is_taken_in_forward_order(tmp_path):
    x = torch.ones(2, requires_grad=True)
    a = ts.save_grad(tmp_path / "a", x * 2)
    b = ts.save_grad(tmp_path / "b", a * 3)
    ts.save(tmp_path / "after", b)
    (b * torch.tensor([1.0, 2.0])).sum().backward()
    assert npy_names(tmp_path) == ["0_a_backward.npy", "1_b_backward.npy", "2_after.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "1_b_backward.npy"), [1.0, 2.0])
    np.testing.assert_array_equal(np.load(tmp_path / "0_a_backward.npy"), [3.0, 6.0])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 12.0])


def test_save_grad_returns_an_equal_tensor_and_leaves_gradients_unchanged(tmp_path):
    x = torch.randn(4, requires_grad=True)
    y = ts.save_grad(tmp_path / "y", x.sin(), suffix="bw")
    assert torch.equal(y, x.sin())
    y.pow(2).sum().backward()
    expected = 2 * x.sin() * x.cos()
    torch.testing.assert_close(x.grad, expected.detach())
    assert npy_names(tmp_path) == ["0_y_bw.npy"]


def test_save_grad_on_a_tensor_without_grad_warns(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        out = ts.save_grad(tmp_path / "x", torch.ones(2))
    assert torch.equal(out, torch.ones(2))
    assert "does not require grad" in caplog.text


def test_get_pt_grads_names_in_parameter_order(tmp_path):
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    net(torch.randn(8, 4)).pow(2).mean().backward()
    grads = ts.widget.get_pt_grads(net)
    assert list(grads) == ["0.weight_0", "0.bias_1", "1.weight_2", "1.bias_3"]
    assert grads["0.weight_0"] is net[0].weight.grad
    ts.save(tmp_path / "torch_grads", grads)
    assert npy_names(tmp_path)[0] == "0_torch_grads_0.bias_1.npy"


def test_get_grads_skips_params_without_grad_but_keeps_their_index():
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    net[1](torch.randn(1, 2)).sum().backward()
    assert list(ts.widget.get_pt_grads(net)) == ["1.weight_2", "1.bias_3"]


def test_get_grads_from_autograd_grad_must_match_parameter_count():
    net = torch.nn.Linear(2, 1)
    grads = torch.autograd.grad(net(torch.ones(1, 2)).sum(), list(net.parameters()))
    assert list(ts.widget.get_grads(net, grads)) == ["weight_0", "bias_1"]
    with pytest.raises(ValueError, match="1 gradients for 2 trainable parameters"):
        ts.widget.get_grads(net, grads[:1])


def test_seed_all_repeats_torch_and_sets_deterministic_mode():
    try:
        seeded = ts.seed_all(11, mode=True)
        assert "torch" in seeded
        assert torch.are_deterministic_algorithms_enabled()
        first = torch.rand(3)
        ts.seed_all(11)
        assert torch.equal(torch.rand(3), first)
    finally:
        torch.use_deterministic_algorithms(False)
