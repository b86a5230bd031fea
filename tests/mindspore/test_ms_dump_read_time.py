"""When a MindSpore dump reads its statistics (real MindSpore, PyNative, CPU): the values each call saw."""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import mindspore.common.parameter as parameter_module
import numpy as np
import pytest
from mindspore import Tensor, nn, ops

import tscore as ts
from tscore.dump_format.reading import read_lines


def records(folder: Path) -> dict[str, dict]:
    return {r["name"]: r for r in read_lines(str(folder / "step0" / "rank0" / "dump.jsonl"))}


def test_a_tensor_written_in_place_after_its_call_keeps_the_statistics_the_call_saw(tmp_path) -> None:
    x = Tensor(np.linspace(-2.0, 2.0, 12, dtype=np.float32).reshape(3, 4))
    with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1"):
        y = ops.tanh(x)  # its statistics wait for the hand-over ...
        y.copy_(
            Tensor(np.full((3, 4), 3.0, np.float32))
        )  # ... but a call that writes into y reads them first
        z = ops.exp(y - 3.0)
        z[0] = 7.0  # __setitem__ writes too
        ops.relu(z)
    found = records(tmp_path)
    tanh = np.tanh(np.linspace(-2.0, 2.0, 12, dtype=np.float32))
    out = found["Functional_tanh_0_forward"]["outputs"][0]
    assert out["max"] == pytest.approx(float(tanh.max()), rel=1e-6)
    assert out["mean"] == pytest.approx(float(tanh.mean()), abs=1e-6)
    exp_out = found["Functional_exp_0_forward"]["outputs"][0]
    assert exp_out["max"] == exp_out["min"] == 1.0  # exp(0): before z[0] = 7
    relu_in = found["Functional_relu_0_forward"]["inputs"][0]
    assert relu_in["max"] == pytest.approx(7.0)  # after it


def test_the_weights_a_step_recorded_are_those_before_the_optimizer_wrote_into_them(tmp_path) -> None:
    ms.set_seed(0)
    net = nn.SequentialCell(nn.Dense(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dense(8, 3))
    before = {p.name: p.asnumpy().copy() for p in net.trainable_params()}
    moving = {p.name: p.asnumpy().copy() for p in net.get_parameters() if "moving" in p.name}
    opt = nn.SGD(net.trainable_params(), learning_rate=0.5, momentum=0.9)
    loss_fn = nn.MSELoss()
    grad_fn = ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None, opt.parameters)
    x = Tensor(np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32))
    target = Tensor(np.zeros((6, 3), np.float32))
    with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1"):
        net.set_train(True)
        _, grads = grad_fn(x, target)
        opt(grads)
    after = {p.name: p.asnumpy() for p in net.trainable_params()}
    assert any(not np.array_equal(before[n], after[n]) for n in before)  # the step did change them
    recorded = [
        entry
        for record in records(tmp_path).values()
        for entry in record.get("inputs", ())
        if entry.get("requires_grad") is not None and entry.get("max") is not None
    ]
    recorded_maxima = sorted(round(e["max"], 5) for e in recorded)
    known = {round(float(v.max()), 5) for v in [*before.values(), *moving.values()]}
    assert recorded and all(value in known for value in recorded_maxima), (recorded_maxima, known)


def test_reading_whether_a_parameter_takes_gradients_does_not_wait_for_the_pipeline(
    tmp_path, monkeypatch
) -> None:
    real = parameter_module.Tensor_
    waits: list[int] = []

    class CountingTensor:  # MindSpore's Parameter waits through this module's Tensor_.wait_pipeline
        def __getattr__(self, name: str):
            return getattr(real, name)

        @staticmethod
        def wait_pipeline(tensor):
            waits.append(1)
            return real.wait_pipeline(tensor)

    weight = ms.Parameter(Tensor(np.ones((4, 2), np.float32)), name="w_no_wait")
    x = Tensor(np.ones((3, 4), np.float32))
    monkeypatch.setattr(parameter_module, "Tensor_", CountingTensor())
    assert weight.requires_grad is True and waits == [1]  # the property waits: what the dump avoids
    waits.clear()
    with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1"):
        ops.matmul(x, weight)
    monkeypatch.undo()
    (record,) = records(tmp_path).values()
    assert record["inputs"][1]["requires_grad"] is True
    assert waits == []
