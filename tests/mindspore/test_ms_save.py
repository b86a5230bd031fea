"""Spec 001 and 003 MindSpore examples, ported to ``import tscore as ts``, in PyNative and graph mode."""

import time
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn
from mindspore.common.initializer import Zero, initializer

import tscore as ts
from tests.conftest import npy_names


class NetWithSaveGrad(ms.nn.Cell):
    """Spec 001, MindSpore section."""

    def __init__(self, path):
        super().__init__()
        self.dense = ms.nn.Dense(3, 2)
        self.apply(self._init_weights)
        self.path = path

    def _init_weights(self, cell):
        if isinstance(cell, ms.nn.Dense):
            cell.weight.set_data(initializer(Zero(), cell.weight.shape, cell.weight.dtype))
            cell.bias.set_data(initializer(Zero(), cell.bias.shape, cell.bias.dtype))

    def construct(self, x):
        ts.save(self.path + "input", x)
        x = self.dense(x)
        ts.save(self.path + "dense", x)
        x = ts.save_grad(self.path + "dense", x)
        return x


def run_spec001(path):
    data = np.array([[0.2, 0.5, 0.2]], dtype=np.float32)
    label = np.array([[1, 0]], dtype=np.float32)
    net = NetWithSaveGrad(path)
    loss_fn = ms.nn.CrossEntropyLoss()

    def forward_fn(data, label):
        logits = net(data)
        loss = loss_fn(logits, label)
        return loss, logits

    grad_fn = ms.grad(
        forward_fn, grad_position=None, weights=net.trainable_params(), has_aux=True, return_ids=True
    )
    _grads, _ = grad_fn(ms.Tensor(data), ms.Tensor(label))
    # the backward save may still be on its way (MindSpore's pipeline, the save's writer):
    # wait for the three files the example writes, with room for a loaded machine
    deadline = time.monotonic() + 30
    while len(list(Path(path).glob("*.npy"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    return sorted(map(str, Path(path).glob("*.npy")))


def test_spec001_mindspore_example_prints_the_listed_files(in_tmp):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    files = run_spec001("./ms_ts_save/")
    assert files == [
        "ms_ts_save/0_input.npy",
        "ms_ts_save/1_dense.npy",
        "ms_ts_save/2_dense_backward.npy",
    ]
    np.testing.assert_allclose(np.load("ms_ts_save/2_dense_backward.npy"), [[-0.5, 0.5]])


def test_spec001_in_graph_mode_saves_the_same_values(in_tmp):
    """Graph mode compiles forward and backward together; MindSpore runs the forward saves last."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    run_spec001("./pynative/")
    ts.reset_save_id()
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        files = run_spec001("./graph/")
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert len(files) == 3
    for stem in ("input", "dense", "dense_backward"):
        (graph_file,) = Path("graph").glob(f"*_{stem}.npy")
        np.testing.assert_array_equal(
            np.load(graph_file), np.load(next(Path("pynative").glob(f"*_{stem}.npy")))
        )


class NetWorkSave(nn.Cell):
    """Spec 003, scenario 3."""

    def __init__(self, file):
        super().__init__()
        self.file = file

    def construct(self, x):
        ts.save(self.file, x)
        return x


def test_spec003_mindspore_example_names(ms_mode, in_tmp):
    x1 = Tensor(-0.5962, ms.float32)
    x2 = Tensor(0.4985, ms.float32)
    (in_tmp / "save").mkdir()
    net = NetWorkSave(str(in_tmp / "save" / "ms_tensor"))
    net(x1)
    net(x2)
    net([x1, x2])
    net({"x1": x1, "x2": x2})
    assert npy_names(in_tmp / "save") == [
        "0_ms_tensor.npy",
        "1_ms_tensor.npy",
        "2_ms_tensor_0.npy",
        "2_ms_tensor_1.npy",
        "3_ms_tensor_x1.npy",
        "3_ms_tensor_x2.npy",
    ]
    assert np.load(in_tmp / "save" / "1_ms_tensor.npy") == np.float32(0.4985)
    assert np.load(in_tmp / "save" / "3_ms_tensor_x1.npy") == np.float32(-0.5962)


def test_save_sees_run_time_values_on_every_graph_call(ms_mode, in_tmp):
    class Twice(nn.Cell):
        def construct(self, x):
            y = x * 2
            ts.save("out/y", y)
            return y + 1

    net = Twice()
    for k in range(3):
        net(Tensor(np.full((2,), k, np.float32)))
    assert npy_names("out") == ["0_y.npy", "1_y.npy", "2_y.npy"]
    for k in range(3):
        np.testing.assert_array_equal(np.load(f"out/{k}_y.npy"), [2 * k, 2 * k])


def test_save_inside_ms_jit_function(in_tmp):
    @ms.jit
    def step(x):
        ts.save("jit/x", x)
        return x.sum()

    step(Tensor(np.arange(4, dtype=np.float32)))
    step(Tensor(np.ones(4, np.float32)))
    np.testing.assert_array_equal(np.load("jit/0_x.npy"), np.arange(4))
    np.testing.assert_array_equal(np.load("jit/1_x.npy"), np.ones(4))


class GradNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = ms.Parameter(Tensor(np.array([1.0, 2.0, 3.0], np.float32)), name="w")

    def construct(self, x):
        y = x * self.w
        y = ts.save_grad("grads/y", y)
        z = ts.save_grad("grads/z", y * y, suffix="bw")
        return z.sum()


def test_save_grad_writes_the_gradient_every_step(ms_mode, in_tmp):
    net = GradNet()
    grad_fn = ms.grad(net, grad_position=0)
    x = Tensor(np.array([1.0, 1.0, 2.0], np.float32))
    for _ in range(2):
        gx = grad_fn(x)
    # z = (x*w)^2 summed: dz/dz = 1, dz/dy = 2y, dz/dx = 2y*w
    y = np.array([1.0, 2.0, 6.0], np.float32)
    np.testing.assert_allclose(gx.asnumpy(), 2 * y * np.array([1.0, 2.0, 3.0]))
    names = npy_names("grads")
    assert len(names) == 4
    assert sum(n.endswith("_y_backward.npy") for n in names) == 2
    assert sum(n.endswith("_z_bw.npy") for n in names) == 2
    for name in names:
        expected = 2 * y if name.endswith("_y_backward.npy") else np.ones(3)
        np.testing.assert_allclose(np.load(Path("grads") / name), expected)
    if ms_mode == "pynative":
        assert names == ["0_y_backward.npy", "1_z_bw.npy", "2_y_backward.npy", "3_z_bw.npy"]


class Dense2(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(3, 2)
        self.bn = nn.BatchNorm1d(2)

    def construct(self, x):
        return self.bn(self.fc(x))


@pytest.mark.parametrize("return_ids", [False, True])
def test_get_ms_grads_names_gradients(in_tmp, return_ids):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    net = Dense2()
    wrapped = nn.WithLossCell(net, nn.MSELoss())  # wrapping renames Parameter.name
    x = Tensor(np.random.randn(4, 3).astype(np.float32))
    t = Tensor(np.random.randn(4, 2).astype(np.float32))
    grad_fn = ms.grad(wrapped, None, net.trainable_params(), return_ids=return_ids)
    grads = grad_fn(x, t)
    named = ts.widget.get_ms_grads(net, grads)
    assert list(named) == ["fc.weight_0", "fc.bias_1", "bn.gamma_2", "bn.beta_3"]
    ts.save("ms_grads", named)
    assert "0_ms_grads_fc.weight_0.npy" in npy_names(".")


def test_get_ms_grads_needs_the_gradients():
    with pytest.raises(ValueError, match="pass the gradients"):
        ts.widget.get_ms_grads(Dense2(), None)
    with pytest.raises(ValueError, match="1 gradients for 4 trainable parameters"):
        ts.widget.get_ms_grads(Dense2(), [Tensor(np.ones(1))])


def test_seed_all_repeats_mindspore():
    assert "mindspore" in ts.seed_all(5)
    first = ms.ops.uniform((3,), Tensor(0.0), Tensor(1.0)).asnumpy()
    ts.seed_all(5)
    np.testing.assert_array_equal(ms.ops.uniform((3,), Tensor(0.0), Tensor(1.0)).asnumpy(), first)
