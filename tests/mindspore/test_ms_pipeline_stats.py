"""Statistics worked out inside MindSpore's PyNative pipeline (real MindSpore, CPU): same numbers, in order.

``ts_mindspore.pipeline_stats`` launches a ``pyfunc`` operator behind each dumped
tensor instead of waiting for the pipeline, once a step's first reads have waited
long enough. Here the tests lower the bar (``LAUNCH_SECONDS``) so that every
tensor after the first is launched, and check what a user relies on: the numbers
are those read at once, each is what its call saw, the step is untouched, and
nothing is left queued when the dump stops.
"""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, ops

import tscore as ts
from ts_mindspore import pipeline_stats
from ts_mindspore.plugin import MindSporeBackend
from tscore.dump_format.reading import read_lines

from .test_ms_dump import train_step
from .test_ms_dump_read_time import (
    test_a_tensor_written_in_place_after_its_call_keeps_the_statistics_the_call_saw as in_place_case,
)
from .test_ms_dump_read_time import (
    test_the_weights_a_step_recorded_are_those_before_the_optimizer_wrote_into_them as optimizer_case,
)

STATS = ("max", "min", "mean", "norm")


@pytest.fixture(autouse=True)
def pynative():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield


@pytest.fixture
def launched(monkeypatch) -> list[int]:
    """Launch the statistics of every tensor after a step's first; return the launches, counted."""
    monkeypatch.setattr(pipeline_stats, "SAMPLE", 0)
    monkeypatch.setattr(pipeline_stats, "LAUNCH_SECONDS", -1.0)
    count: list[int] = []
    launch = pipeline_stats.PipelineStats.launch

    def counted(self, tensor):
        found = launch(self, tensor)
        count.append(found is not None)
        return found

    monkeypatch.setattr(pipeline_stats.PipelineStats, "launch", counted)
    return count


@pytest.fixture(params=["read at once", "launched"])
def either_way(request, launched, monkeypatch) -> str:
    """Each way the rest of a step's statistics go: launched into the pipeline, or read at once."""
    if request.param == "read at once":
        monkeypatch.setattr(pipeline_stats, "LAUNCH_SECONDS", float("inf"))
    return request.param


def entries(folder: Path) -> dict[tuple[str, str], dict]:
    found = {}
    for record in read_lines(str(folder / "step0" / "rank0" / "dump.jsonl")):
        for side in ("inputs", "outputs"):
            for entry in record.get(side, ()):
                if entry.get("type") == "tensor":
                    found[record["name"], entry["name"]] = entry
    return found


def test_launched_statistics_equal_those_read_at_once_and_the_step_is_untouched(
    tmp_path, launched, monkeypatch
) -> None:
    plain = train_step()
    dumped = train_step(ts.dump.Debugger(dump_path=str(tmp_path / "launched"), level="L1"))
    assert sum(launched) > 20 and all(launched)  # the step's tensors went through the pipeline
    for a, b in zip(plain, dumped, strict=True):
        assert a.tobytes() == b.tobytes()
    monkeypatch.setattr(pipeline_stats, "LAUNCH_SECONDS", float("inf"))  # every read at once
    train_step(ts.dump.Debugger(dump_path=str(tmp_path / "read"), level="L1"))
    by_launch, by_read = entries(tmp_path / "launched"), entries(tmp_path / "read")
    assert by_launch.keys() == by_read.keys() and len(by_read) > 20
    for key, entry in by_read.items():
        assert "error" not in by_launch[key], by_launch[key]
        assert [by_launch[key][s] for s in STATS] == [entry[s] for s in STATS], key


def test_launched_statistics_are_those_each_call_saw(tmp_path, launched) -> None:
    in_place_case(tmp_path / "in_place")
    optimizer_case(tmp_path / "optimizer")
    assert sum(launched) >= 10 and all(launched)


def test_nothing_is_left_queued_or_armed_after_stop_even_when_the_step_raises(tmp_path, launched) -> None:
    backend = next(
        p for p in ts.plugins.get_plugin_manager().get_plugins() if isinstance(p, MindSporeBackend)
    )
    x = Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(RuntimeError, match="the user's own error"):
        with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1"):
            y = ops.exp(x)
            ops.tanh(y * 2)
            raise RuntimeError("the user's own error")
    assert sum(launched) >= 2
    assert len(pipeline_stats._pending) == 0 and backend._pipeline is None
    found = entries(tmp_path)
    assert found and all("error" not in entry and entry["max"] is not None for entry in found.values())
    exp = found["Functional_exp_0_forward", "Functional_exp_0_forward_output"]
    assert exp["max"] == exp["min"] == pytest.approx(float(np.e), rel=1e-6)


def _users_failing_function(x):  # a user's own pyfunc operator that fails inside the pipeline
    raise ValueError("the user's own operator failed")


USERS_FAILING_OPERATOR = ops.Custom(
    _users_failing_function, out_shape=(2, 2), out_dtype=ms.float32, func_type="pyfunc"
)


def test_a_users_pipeline_error_reaches_their_own_handler_and_later_records_keep_their_numbers(
    tmp_path, either_way
) -> None:
    x = Tensor(np.ones((2, 2), np.float32))
    with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1"):
        ops.abs(x)
        # whichever wait takes MindSpore's error, the dump's or the user's, it is raised here
        with pytest.raises(ValueError, match="the user's own operator failed"):
            USERS_FAILING_OPERATOR(x).asnumpy()
        for k in range(1, 5):  # tensors of one shape: a shifted queue would not show in the shapes
            ops.mul(Tensor(np.full((2, 2), float(k), np.float32)), 10.0)
    found = entries(tmp_path)
    for k in range(1, 5):
        name = f"Functional_mul_{k - 1}_forward"
        assert found[name, f"{name}_input.0"]["max"] == k
        assert found[name, f"{name}_output"]["max"] == 10 * k


def test_the_blocks_own_exception_is_the_one_raised_when_stopping_also_fails(
    tmp_path, launched, caplog
) -> None:
    x = Tensor(np.ones((2, 2), np.float32))
    # the failing operator is left out of the dump: no statistics launched behind it, which could
    # take its error in (and raise it from the call) when the pipeline has already run it
    with pytest.raises(KeyError, match="the step's own"):
        with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1", list=["abs", "exp"]):
            ops.abs(x)
            ops.exp(x)
            USERS_FAILING_OPERATOR(x)  # its error comes at stop(), after the block's own
            raise KeyError("the step's own")
    assert "the user's own operator failed" in caplog.text  # stop() failed, and said so
    assert len(pipeline_stats._pending) == 0


def test_a_dump_inside_a_dump_records_none_of_the_inner_dumps_operators(tmp_path, launched) -> None:
    x = Tensor(np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3))
    with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path / "outer"), level="L1"):
        with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path / "inner"), level="L1"):
            y = ops.exp(x)
            ops.tanh(y * 2.0)
    for folder in ("outer", "inner"):
        found = entries(tmp_path / folder)
        assert not any("Custom" in call for call, _ in found), found.keys()
        assert all("error" not in entry for entry in found.values()), folder
        exp = found["Functional_exp_0_forward", "Functional_exp_0_forward_output"]
        assert exp["max"] == pytest.approx(float(np.e), rel=1e-6)


def test_an_error_of_the_users_own_operator_still_reaches_the_user(tmp_path, either_way) -> None:
    x = Tensor(np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="the user's own operator failed"):  # as without the dump
        with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1"):
            ops.abs(x)
            USERS_FAILING_OPERATOR(x)
            ops.add(ops.exp(x), 1.0).asnumpy()
    assert len(pipeline_stats._pending) == 0


def test_a_zero_dimensional_bfloat16_tensor_is_read_at_once_and_the_users_numbers_hold(
    tmp_path, launched
) -> None:
    # the pyfunc kernel cannot hand a 0-d bfloat16 tensor over, and the pipeline then drops what
    # is queued behind it: such tensors must never be launched
    with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1"):
        ops.abs(Tensor(np.ones((2, 2), np.float32)))
        y = ops.neg(Tensor(np.array(-1.5), dtype=ms.bfloat16))
        z = ops.add(y, 1.0)
    assert float(y.astype(ms.float32).asnumpy()) == 1.5 and float(z.astype(ms.float32).asnumpy()) == 2.5
    assert sum(launched) >= 1
    neg = entries(tmp_path)["Functional_neg_0_forward", "Functional_neg_0_forward_output"]
    assert neg["dtype"] == "bfloat16" and neg["max"] == neg["min"] == 1.5


def test_a_run_fills_the_statistics_of_its_own_ticket_and_fails_those_the_pipeline_skipped() -> None:
    dropped, wanted = pipeline_stats.PendingStats((2, 2)), pipeline_stats.PendingStats((3,))
    pipeline_stats._pending.extend([(901, dropped), (902, wanted)])
    try:
        handed = pipeline_stats._summarise(np.array([1.0, -2.0, 3.0], np.float32), 902)
    finally:
        pipeline_stats._pending.clear()
    assert handed.shape == (1,)
    with pytest.raises(RuntimeError, match="dropped"):
        dropped.tolist()
    assert wanted.tolist() == pytest.approx([3.0, -2.0, 2.0 / 3.0, np.sqrt(14.0)])


def test_a_tensor_of_another_shape_is_an_error_and_nothing_is_raised_into_the_pipeline() -> None:
    waiting = pipeline_stats.PendingStats((2, 2))
    pipeline_stats._pending.append((903, waiting))
    try:
        pipeline_stats._summarise(np.ones((3,), np.float32), 903)
    finally:
        pipeline_stats._pending.clear()
    with pytest.raises(RuntimeError, match=r"shape \(3,\) for one of shape \(2, 2\)"):
        waiting.tolist()
    assert pipeline_stats._summarise(np.ones((3,), np.float32), 904).shape == (1,)  # none queued
    assert pipeline_stats._summarise(np.ones((3,), np.float32), "not a ticket").shape == (1,)
