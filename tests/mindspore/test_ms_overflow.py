"""The overflow check on real MindSpore (PyNative, CPU): a float16 Dense overflows, named where it started."""

from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn

import tscore as ts
from tscore.dump.overflow import OverflowLimitError


class Scaled(nn.Cell):
    """dense1, ReLU, dense2 with weights scaled so that its float16 output overflows, dense3 after it."""

    def __init__(self) -> None:
        super().__init__()
        self.dense1, self.act, self.dense2, self.dense3 = (
            nn.Dense(8, 16),
            nn.ReLU(),
            nn.Dense(16, 16),
            nn.Dense(16, 4),
        )
        self.dense2.weight.set_data(self.dense2.weight * 10000)
        self.to_float(ms.float16)

    def construct(self, x: Tensor) -> Tensor:
        return self.dense3(self.dense2(self.act(self.dense1(x))))


def x() -> Tensor:
    return Tensor((np.random.default_rng(1).standard_normal((4, 8)) * 30).astype(np.float16))


def float32_probe() -> np.ndarray:
    """What a float32 Dense computes: float16-rounded if a to_float(float16) were left switched on."""
    dense = nn.Dense(4, 3, weight_init="ones", bias_init="zeros")
    return dense(Tensor(np.full((1, 4), 0.1234567, np.float32))).asnumpy()


def test_a_float16_dense_that_overflows_is_named_and_the_step_stops(tmp_path) -> None:
    before = float32_probe()
    net = Scaled()
    debugger = ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=1)
    debugger.start(net)
    try:
        with pytest.raises(OverflowLimitError, match=r"^\[overflow 1 times\]: dump file is saved in"):
            net(x())
    finally:
        debugger.stop()
    summary = debugger.overflows[0]
    first = summary.first_own
    assert first is not None and first.module == "dense2" and summary.stopped
    assert first.call in ("Primitive.MatMul.1.forward", "Functional.dense.1.forward"), first.call
    assert first.inputs == {}
    assert (tmp_path / "step0" / "rank0" / f"{first.files}.pkl").is_file()
    # the stop left the float16 cells in the middle: the process computes in float32 again
    np.testing.assert_array_equal(float32_probe(), before)


def test_a_finite_run_has_no_overflow_and_the_same_output(tmp_path) -> None:
    net = Scaled()
    net.dense2.weight.set_data(net.dense2.weight / 10000)
    plain = net(x()).asnumpy()
    with ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path)) as debugger:
        checked = net(x()).asnumpy()
    np.testing.assert_array_equal(plain, checked)
    assert debugger.overflows[0].first_own is None and debugger.overflows[0].events == []


def test_float32_values_whose_sum_overflows_are_no_overflow_and_a_real_inf_still_is(tmp_path) -> None:
    from mindspore import ops

    big = Tensor(np.full((8,), 3.0e38, np.float32))  # finite values whose float32 sum is inf: the probe's
    with ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=-1) as debugger:
        ops.mul(big, 1.0)  # finite: confirmed by the largest magnitude, not called an overflow
        ops.mul(big, 2.0)  # inf
    events = [(e.call, e.kind, e.outputs) for e in debugger.overflows[0].events]
    assert events == [("Functional.mul.1.forward", "own", {"Functional_mul_1_forward_output": "inf"})]
