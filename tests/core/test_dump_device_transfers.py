"""Values on their way from a device: statistics gathered a batch at a time, tensor copies waited for by
the writer, the settings each device ran with, and what a difference of settings explains.

``lagfw`` is a stand-in framework whose "device" finishes its copies only when the test lets it (a
threading.Event): it shows who waits for what, which a CPU framework cannot. The real CUDA path runs
in tests/gpu (``nox -s gpu``).
"""

from __future__ import annotations

import sys
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest

import tscore as ts
import tscore.dump.writer
from tscore.contract.transfers import PendingArray
from tscore.dump.config import make_config
from tscore.dump.recorder import DumpRecorder, finish_record, stage_statistics
from tscore.dump.writer import BATCH_LINES, DumpWriter
from tscore.dump_format.reading import read_lines
from tscore.plugin_api import Backend, RunSetting
from tscore.run_settings import SettingDifference, explanation, settings_differences


class Lag:
    """A tensor of ``lagfw`` on its device ``lag:0``."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.shape = array.shape
        self.dtype = f"lagfw.{array.dtype.name}"


class LagStats:
    """Statistics left on the device: only the backend's ``stats_to_host`` reads them."""

    def __init__(self, array: np.ndarray) -> None:
        a = array.astype(np.float64)
        self.values = [a.max(), a.min(), a.mean(), float(np.linalg.norm(a))]


class LagBackend(Backend):
    framework = "lagfw"

    def __init__(self) -> None:
        self.batches: list[int] = []  # the size of each stats_to_host call
        self.device_done = threading.Event()  # the device's copies end when the test sets it
        self.waited_on: list[str] = []  # the threads that waited for a copy

    def tensor_types(self) -> tuple[type, ...]:
        return (sys.modules["lagfw"].Lag,)

    def tensor_device(self, tensor: Lag) -> str:
        return "lag:0"

    def to_numpy(self, tensor: Lag, copy: bool) -> np.ndarray:
        return np.array(tensor.array, copy=copy)

    def tensor_key(self, tensor: Lag) -> tuple[int, int]:
        return (id(tensor.array), 0)  # memory, version: lagfw's arrays never change in place

    def tensor_stats(self, tensor: Lag) -> LagStats:
        return LagStats(tensor.array)

    def stats_to_host(self, stats):
        if not all(isinstance(s, LagStats) for s in stats):
            return None
        self.batches.append(len(stats))

        def wait():
            self.waited_on.append(threading.current_thread().name)
            return [s.values for s in stats]

        return wait

    def copy_to_host(self, tensor: Lag) -> PendingArray:
        copy = np.array(tensor.array)

        def result() -> np.ndarray:
            self.waited_on.append(threading.current_thread().name)
            assert self.device_done.wait(10), "the device never finished the copy"
            return copy

        return PendingArray(copy.nbytes, result)

    def run_settings(self, device: str) -> list[RunSetting]:
        return [RunSetting(name="lagfw.fast_math", value=device != "cpu", meaning="fused", explains=1e-3)]


@pytest.fixture()
def lagfw(monkeypatch: pytest.MonkeyPatch):
    module = types.ModuleType("lagfw")
    module.Lag = Lag  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lagfw", module)
    backend = LagBackend()
    name = ts.register_plugin(backend, "lagfw")
    yield backend
    ts.unregister_plugin(name)


def _recorder(tmp_path: Path, task: str = "statistics", **writer: object) -> DumpRecorder:
    config = make_config({"dump_path": str(tmp_path), "task": task})
    return DumpRecorder(config, DumpWriter(str(tmp_path), finish_record, stage=stage_statistics, **writer))


def _calls(recorder: DumpRecorder, count: int) -> list[np.ndarray]:
    outputs = []
    for index in range(count):
        x = Lag(np.arange(6, dtype=np.float32) + index)
        token = recorder.begin("Torch", "relu", (x,), {})
        out = Lag(x.array * 2)
        recorder.end(token, out)
        outputs.append(out.array)
    return outputs


def test_statistics_cross_to_the_host_a_batch_of_records_at_a_time(tmp_path, lagfw, monkeypatch) -> None:
    # Lines are also handed over every HAND_OVER_SECONDS: on a loaded machine 300 calls can take
    # long enough for that to add batches, so only the count of lines decides here.
    monkeypatch.setattr(tscore.dump.writer, "HAND_OVER_SECONDS", float("inf"))
    recorder = _recorder(tmp_path)
    outputs = _calls(recorder, 300)
    recorder.writer.close()
    records = list(read_lines(str(tmp_path / "dump.jsonl")))
    assert len(records) == 300
    # one copy per batch of lines handed to the writer, never one per record
    assert len(lagfw.batches) <= -(-300 // BATCH_LINES) + 1 and sum(lagfw.batches) >= 300
    assert set(lagfw.waited_on) == {"tscore-dump-writer"}  # the training thread never waits
    for record, out in zip(records, outputs, strict=True):
        entry = record["outputs"][0]
        a = out.astype(np.float64)
        assert [entry["max"], entry["min"], entry["mean"], entry["norm"]] == pytest.approx(
            [a.max(), a.min(), a.mean(), np.linalg.norm(a)]
        )


def test_the_writer_waits_for_a_device_copy_and_the_caller_does_not(tmp_path, lagfw) -> None:
    recorder = _recorder(tmp_path, task="tensor")
    outputs = _calls(recorder, 3)
    # returned with every copy still running: the device has not finished one, nobody waited here
    assert not lagfw.device_done.is_set() and "MainThread" not in lagfw.waited_on
    assert not list((tmp_path / "tensors").glob("*.npy"))
    lagfw.device_done.set()
    recorder.writer.close()
    records = list(read_lines(str(tmp_path / "dump.jsonl")))
    written = np.load(tmp_path / records[-1]["outputs"][0]["file"])
    assert np.array_equal(written, outputs[-1])
    assert set(lagfw.waited_on) == {"tscore-dump-writer"}


def test_copies_in_flight_are_bounded_so_a_slow_device_or_disk_slows_the_caller(
    tmp_path, lagfw, caplog
) -> None:
    writer = DumpWriter(str(tmp_path), max_queue_bytes=4096)
    submitted = []

    def submit() -> None:
        for index in range(8):  # 8 copies of 2 KB each: twice what the queue holds
            writer.submit_tensor(f"tensors/{index}.npy", lagfw.copy_to_host(Lag(np.zeros(512, np.float32))))
            submitted.append(index)

    caller = threading.Thread(target=submit)
    caller.start()
    time.sleep(0.5)
    assert len(submitted) < 8  # held back while the copies it queued are not done
    lagfw.device_done.set()
    caller.join(10)
    writer.close()
    assert len(submitted) == 8 and len(list((tmp_path / "tensors").glob("*.npy"))) == 8
    assert caplog.text.count("the disk cannot keep up with the training") == 1  # said once, not per wait


def test_each_device_s_settings_are_recorded_once_with_the_dump(tmp_path, lagfw) -> None:
    recorder = _recorder(tmp_path)
    _calls(recorder, 2)
    recorder.writer.close()
    assert recorder.devices == ["lag:0"]
    assert recorder.settings == {
        "lagfw lag:0": [{"name": "lagfw.fast_math", "value": True, "meaning": "fused", "explains": 1e-3}]
    }


def _settings(where: str, **values: object) -> dict[str, list[dict[str, object]]]:
    explains = {"tf32": 2e-3, "benchmark": 1e-5, "threads": 0.0}
    return {
        where: [{"name": k, "value": v, "meaning": "", "explains": explains[k]} for k, v in values.items()]
    }


def test_only_settings_whose_values_differ_are_named_on_the_devices_the_runs_used() -> None:
    gpu = {
        **_settings("torch cuda:0", tf32=True, benchmark=False, threads=8),
        **_settings("torch cpu", tf32=False),
    }
    cpu = _settings("torch cpu", tf32=False, benchmark=False, threads=4)
    found = settings_differences(gpu, cpu)
    assert [(d.name, d.target, d.orig, d.target_where, d.orig_where) for d in found] == [
        ("tf32", True, False, "torch cuda:0", "torch cpu"),
        ("threads", 8, 4, "torch cuda:0", "torch cpu"),
    ]
    assert "tf32: True on torch cuda:0, False on torch cpu" in found[0].line()
    assert settings_differences(cpu, cpu) == []
    assert settings_differences({}, cpu) == []


@pytest.mark.parametrize(
    ("largest", "said"),
    [(5.5e-5, "is within it"), (3e-2, "is beyond what they explain"), (None, "could not be measured")],
)
def test_a_difference_is_said_to_be_within_what_a_setting_explains_or_beyond_it(largest, said) -> None:
    tf32 = SettingDifference(name="tf32", target=True, orig=False, explains=2e-3)
    speed_only = SettingDifference(name="threads", target=8, orig=4, explains=0.0)
    text = explanation([tf32, speed_only], largest)
    assert said in text and "(tf32)" in text and "2e-03" in text
    assert explanation([speed_only], 1.0) == ""  # a setting that changes no number explains nothing


def test_many_live_tensors_are_swept_a_constant_number_of_times_per_tensor(tmp_path, lagfw) -> None:
    recorder = _recorder(tmp_path)
    sweeps = []
    sweep = recorder._prune
    recorder._prune = lambda: (sweeps.append(len(recorder._seen)), sweep())[1]  # type: ignore[method-assign]
    alive = [Lag(np.full(2, i, np.float32)) for i in range(20_000)]  # a big model's activations, all alive
    for index in range(0, len(alive), 2):
        token = recorder.begin("Torch", "add", (alive[index],), {})
        recorder.end(token, alive[index + 1])
    recorder.writer.close()
    # every sweep finds them all alive; the next one waits until the count has doubled
    assert 1 <= len(sweeps) <= 3 and sweeps == sorted(sweeps)


def test_lines_reach_the_disk_while_the_run_goes_on_not_only_at_stop(tmp_path, lagfw) -> None:
    recorder = _recorder(tmp_path)
    _calls(recorder, 300)
    recorder.writer._hand_over()  # what the next record after a pause would do
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(list(read_lines(str(tmp_path / "dump.jsonl")))) < 300:
        time.sleep(0.05)
    assert len(list(read_lines(str(tmp_path / "dump.jsonl")))) == 300  # flushed, the writer still open
    recorder.writer.close()


def test_a_failed_statistics_copy_is_an_error_on_its_entries_and_the_records_are_kept(
    tmp_path, lagfw
) -> None:
    def broken(stats):
        def wait():
            raise RuntimeError("device lost")

        return wait

    lagfw.stats_to_host = broken  # type: ignore[method-assign]
    recorder = _recorder(tmp_path)
    _calls(recorder, 3)
    recorder.writer.close()
    records = list(read_lines(str(tmp_path / "dump.jsonl")))
    assert len(records) == 3
    assert all("device lost" in e["error"] for r in records for e in r["outputs"])
