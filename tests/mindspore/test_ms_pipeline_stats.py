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
from tscore.dump.reading import read_lines

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


def test_a_tensor_the_pipeline_hands_over_out_of_turn_is_an_error_never_another_tensors_numbers() -> None:
    waiting = pipeline_stats.PendingStats((2, 2))
    pipeline_stats._pending.append(waiting)
    try:
        handed = pipeline_stats._summarise(np.ones((3,), np.float32))  # the wrong tensor: no exception
    finally:
        pipeline_stats._pending.clear()
    assert handed.shape == (1,)
    with pytest.raises(RuntimeError, match=r"shape \(3,\) for one of shape \(2, 2\)"):
        waiting.tolist()
    assert pipeline_stats._summarise(np.ones((3,), np.float32)).shape == (1,)  # nothing queued: no error


def test_a_zero_dimensional_tensor_and_half_types_are_summarised_exactly() -> None:
    for value, expected in (
        (3.5, [3.5, 3.5, 3.5, 3.5]),
        (np.array([1.5, -2.0], dtype=np.float16), [1.5, -2.0, -0.25, 2.5]),
    ):
        waiting = pipeline_stats.PendingStats(np.shape(value))
        pipeline_stats._pending.append(waiting)
        pipeline_stats._summarise(value)  # a 0-d tensor arrives as a Python float
        assert waiting.tolist() == pytest.approx(expected)
