"""The dump engine without a framework: config, names, the recorder's filters and keys, files, failures."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tscore.dump.config import DumpConfigError, from_msprobe, make_config
from tscore.dump.recorder import DumpRecorder, finish_record
from tscore.dump.writer import DumpWriter
from tscore.dump_format.names import canonical, parse_name
from tscore.dump_format.reading import read_lines


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"task": "everything"},
            "task='everything' is not one of 'statistics', 'tensor' or 'overflow_check'",
        ),
        ({"level": "L2"}, "level='L2' is not one of 'L0', 'L1' or 'mix'"),
        ({"data_mode": ["fwd"]}, "data_mode.0='fwd' is not one of 'all', 'forward'"),
        ({"summary_mode": "sha"}, "summary_mode='sha' is not one of 'statistics' or 'md5'"),
        ({"scop": []}, "unknown key 'scop'; the keys are"),
        ({"scope": ["only_one"]}, "scope takes two names"),
        ({"step": [-1]}, "steps and ranks count from 0"),
    ],
)
def test_a_bad_config_names_the_value_and_what_is_accepted(values: dict, message: str) -> None:
    with pytest.raises(DumpConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_config(values)


def test_msprobe_config_layout_reads_the_task_section() -> None:
    config = from_msprobe(
        {
            "task": "tensor",
            "dump_path": "/d",
            "level": "mix",
            "is_deterministic": True,
            "tensor": {
                "scope": [],
                "list": ["relu"],
                "data_mode": ["forward", "input"],
                "file_format": "npy",
            },
            "statistics": {"list": ["ignored"]},
        },
        "config.json",
    )
    assert (config.task, config.level, config.api_list, config.data_mode) == (
        "tensor",
        "mix",
        ["relu"],
        ["forward", "input"],
    )
    assert config.wants("forward", "input") and not config.wants("forward", "output")
    assert not config.wants("backward", "input")


@pytest.mark.parametrize(
    ("text", "ptdbg", "msprobe"),
    [
        ("Functional_conv2d_0_forward", "Functional_conv2d_0_forward", "Functional.conv2d.0.forward"),
        (
            "Functional.batch_norm.3.backward",
            "Functional_batch_norm_3_backward",
            "Functional.batch_norm.3.backward",
        ),
        ("Tensor___add___12_forward_input.0", "Tensor___add___12_forward", "Tensor.__add__.12.forward"),
        (
            "Module.layer1.0.Conv2d.forward.2",
            "Module.layer1.0.Conv2d.forward.2",
            "Module.layer1.0.Conv2d.forward.2",
        ),
    ],
)
def test_names_read_in_either_spelling(text: str, ptdbg: str, msprobe: str) -> None:
    parsed = parse_name(text)
    assert parsed is not None and parsed.ptdbg == ptdbg and parsed.msprobe == msprobe
    assert canonical(msprobe) == ptdbg
    assert parse_name("relu") is None and canonical(" relu ") == "relu"


class Layer:
    """Stands for a framework's layer in module events."""


def recorder_for(tmp_path: Path, **values: object) -> DumpRecorder:
    config = make_config({"dump_path": str(tmp_path), **values})
    return DumpRecorder(config, DumpWriter(str(tmp_path), finish_record))


def run_calls(recorder: DumpRecorder, calls: list[tuple[str, str, str]]) -> None:
    """Report ``(module, prefix, api)`` calls on numpy arrays, each followed by its backward."""
    tokens = []
    for module, prefix, api in calls:
        if module:
            recorder.enter(module, Layer(), (), {})
        x = np.arange(4, dtype=np.float32)
        token = recorder.begin(prefix, api, (x, 2), {"axis": 0})
        if token is not None:
            recorder.end(token, x * 2)
            tokens.append(token)
        if module:
            recorder.leave(module, Layer(), None)
    for token in reversed(tokens):
        recorder.backward(token, (np.ones(4, np.float32),), (np.full(4, 2.0, np.float32), None))
    recorder.writer.close()


CALLS = [("a", "Torch", "relu"), ("a", "Tensor", "add"), ("b", "Torch", "relu"), ("", "Functional", "linear")]


def names(tmp_path: Path) -> list[str]:
    return [r["name"] for r in read_lines(str(tmp_path / "dump.jsonl"))]


def test_records_name_count_and_key_every_call(tmp_path: Path) -> None:
    recorder = recorder_for(tmp_path, level="mix")
    run_calls(recorder, CALLS)
    records = list(read_lines(str(tmp_path / "dump.jsonl")))
    forward = [r for r in records if r["direction"] == "forward" and r["prefix"] != "Module"]
    assert [r["name"] for r in forward] == [
        "Torch_relu_0_forward",
        "Tensor_add_0_forward",
        "Torch_relu_1_forward",
        "Functional_linear_0_forward",
    ]
    keys = ["a#0/Torch.relu#0", "a#1/Tensor.add#0", "b#0/Torch.relu#0", "(outside)#0/Functional.linear#0"]
    assert [r["key"] for r in forward] == keys  # module a runs twice: its second call is a#1
    relu = forward[0]
    assert [e["name"] for e in relu["inputs"]] == [
        "Torch_relu_0_forward_input.0",
        "Torch_relu_0_forward_input.1",
        "Torch_relu_0_forward_input.axis",
    ]
    assert relu["inputs"][0] | {"name": None} == {
        "name": None,
        "type": "tensor",
        "dtype": "float32",
        "shape": [4],
        "device": "cpu",
        "max": 3.0,
        "min": 0.0,
        "mean": 1.5,
        "norm": pytest.approx(np.sqrt(14.0)),
    }
    assert relu["inputs"][1] == {"name": "Torch_relu_0_forward_input.1", "type": "int", "value": 2}
    backward = next(r for r in records if r["name"] == "Torch_relu_1_backward")
    assert [e["name"] for e in backward["outputs"]] == [
        "Torch_relu_1_backward_output.0",
        "Torch_relu_1_backward_output.1",
    ]
    modules = [r["name"] for r in records if r["prefix"] == "Module"]
    assert modules == ["Module.a.Layer.forward.0", "Module.a.Layer.forward.1", "Module.b.Layer.forward.0"]
    tree = list(read_lines(str(tmp_path / "construct.jsonl")))
    assert {t["module"] for t in tree} == {"a", "b"}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"list": ["Torch_relu_1_forward"]}, ["Torch_relu_1_forward"]),
        ({"list": ["Torch.relu.1.backward"]}, ["Torch_relu_1_backward"]),
        (
            {"apis": ["relu"]},
            [
                "Torch_relu_0_forward",
                "Torch_relu_1_forward",
                "Torch_relu_1_backward",
                "Torch_relu_0_backward",
            ],
        ),
        ({"list": ["linear"]}, ["Functional_linear_0_forward", "Functional_linear_0_backward"]),
        (
            {"scope": ["Tensor_add_0_forward", "Torch_relu_1_forward"]},
            ["Tensor_add_0_forward", "Torch_relu_1_forward"],
        ),
        ({"data_mode": ["backward"], "list": ["add"]}, ["Tensor_add_0_backward"]),
    ],
)
def test_filters_choose_the_calls(tmp_path: Path, values: dict, expected: list[str]) -> None:
    run_calls(recorder_for(tmp_path, **values), CALLS)
    assert names(tmp_path) == expected


def test_a_scope_that_matches_nothing_is_reported(tmp_path: Path) -> None:
    recorder = recorder_for(tmp_path, list=["Torch_gelu_0_forward"])
    run_calls(recorder, CALLS)
    assert recorder.unmatched_scope() == ["Torch_gelu_0_forward"]
    assert names(tmp_path) == []


def test_stacks_are_stored_once_and_referenced(tmp_path: Path) -> None:
    recorder = recorder_for(tmp_path)
    for _ in range(3):
        token = recorder.begin("Torch", "exp", (np.ones(2),), {})
        assert token is not None
        recorder.end(token, np.ones(2))
    recorder.writer.close()
    stacks = list(read_lines(str(tmp_path / "stack.jsonl")))
    assert len(stacks) == 1 and any("test_stacks_are_stored_once" in line for line in stacks[0]["stack"])
    assert {r["stack"] for r in read_lines(str(tmp_path / "dump.jsonl"))} == {stacks[0]["id"]}


def test_a_truncated_last_line_is_skipped_and_the_rest_reads(tmp_path: Path) -> None:
    lines = [json.dumps({"name": f"Torch_exp_{i}_forward"}) for i in range(3)]
    (tmp_path / "dump.jsonl").write_text("\n".join(lines) + '\n{"name": "Torch_ex')
    assert [r["name"] for r in read_lines(str(tmp_path / "dump.jsonl"))] == [
        "Torch_exp_0_forward",
        "Torch_exp_1_forward",
        "Torch_exp_2_forward",
    ]


@pytest.mark.parametrize("when", ["queued before the failure", "after the failure"])
def test_a_tensor_that_cannot_be_written_still_leaves_the_step_s_last_dump_info(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """dump_info.json says what the step recorded (frameworks, settings) even once a write failed."""
    import tscore.dump.writer as writer_module

    def too_long(path: str, array: object) -> None:
        raise OSError(36, "File name too long")

    monkeypatch.setattr(writer_module, "write_npy_fast", too_long)
    writer = DumpWriter(str(tmp_path))
    writer.write_info({"phase": "start"})
    writer.submit_record({"name": "a"})
    writer.submit_tensor("tensors/x.npy", np.ones(3, np.float32))
    if when == "after the failure":
        deadline = time.monotonic() + 10
        while writer.failed is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert writer.failed is not None
    writer.write_info({"phase": "stop", "settings": {"torch cpu": []}})
    writer.close()
    assert writer.failed is not None and "File name too long" in writer.failed
    assert json.loads((tmp_path / "dump_info.json").read_text()) == {
        "phase": "stop",
        "settings": {"torch cpu": []},
    }


def test_a_failing_disk_stops_the_writer_with_one_warning_and_later_records_are_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = DumpWriter(str(tmp_path), max_queue_bytes=4096)

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    writer._write_line = full  # type: ignore[method-assign]
    for index in range(100):  # more than the queue holds: nothing blocks once the writer has failed
        writer.submit_record({"i": index})
    writer.close()
    assert writer.failed is not None and "No space left" in writer.failed
    assert caplog.text.count("turned off, the training goes on") == 1


def test_a_debugger_never_closed_ends_its_thread_even_when_collected_on_that_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collector may find a forgotten debugger on any thread, its own writing thread included."""
    import gc
    import sys
    import threading

    import tscore as ts

    # plugins load first, here: a plugin skipped while the debugger starts is logged with its
    # ImportError, whose frames (the debugger's among them) pytest keeps with the log record
    ts.plugins.hook()
    gc.collect()  # earlier tests' garbage goes now, so the collection below finds only this test's
    gc.disable()  # and no collection runs on this thread in between
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    monkeypatch.setattr(sys, "unraisablehook", lambda args: errors.append(args.exc_value))  # a finalizer's
    try:
        debugger = ts.dump.Debugger(dump_path=str(tmp_path))
        debugger.start()
        debugger.stop()  # stopped, never closed: its thread waits for the next step
        thread = debugger._thread
        assert thread is not None and thread.alive
        debugger.itself = debugger  # type: ignore[attr-defined]  # only the collector frees it now
        del debugger
        thread.run(gc.collect)  # on the writing thread
        deadline = time.monotonic() + 10
        while thread.alive and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        gc.enable()
    assert not thread.alive and errors == []


def test_a_start_that_fails_before_the_hooks_closes_its_writer_so_the_process_can_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorder that cannot be made left its writer open, and the exit waited for that writer forever."""
    import tscore as ts
    from tscore.dump import debugger as debugger_module

    writers: list[Any] = []
    real = debugger_module.DumpWriter

    def recording_writer(*args: Any, **kwargs: Any) -> Any:
        writers.append(real(*args, **kwargs))
        return writers[-1]

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("planted: the recorder cannot be made")

    monkeypatch.setattr(debugger_module, "DumpWriter", recording_writer)
    monkeypatch.setattr(debugger_module, "DumpRecorder", broken)
    debugger = ts.dump.Debugger(dump_path=str(tmp_path))
    with pytest.raises(RuntimeError, match="planted"):
        debugger.start()
    assert not debugger.running
    assert len(writers) == 1 and writers[0]._done.wait(10), "the writer of the failed start still waits"
    debugger.close()


def test_a_dump_never_replaces_a_folder_that_another_live_process_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two runs given one dump_path and rank: the second used to wipe the first's files as it wrote them."""
    import logging
    import subprocess
    import sys

    import tscore as ts

    folder = tmp_path / "step0" / "rank0"
    folder.mkdir(parents=True)
    (folder / "dump.jsonl").write_text('{"theirs": 1}\n', encoding="utf-8")
    hold = (
        "import sys, time; from tscore import folder_writers as w; w.claim(sys.argv[1]); "
        "print('ready', flush=True); time.sleep(120)"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold, str(folder)], stdout=subprocess.PIPE, text=True)
    debugger = ts.dump.Debugger(dump_path=str(tmp_path))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with caplog.at_level(logging.WARNING, logger="tscore"):
            debugger.start()
        assert not debugger.running
        assert "being written by another process" in caplog.text and "the training goes on" in caplog.text
        assert (folder / "dump.jsonl").read_text(encoding="utf-8") == '{"theirs": 1}\n'
    finally:
        holder.kill()
        holder.wait()
    debugger.start()  # the other process is gone: what it left is an earlier run's, replaced as ever
    assert debugger.running
    debugger.stop()
    debugger.close()
    assert not (folder / "dump.jsonl").exists()


def test_a_process_that_stopped_dumping_keeps_no_later_run_out_of_its_folder(tmp_path: Path) -> None:
    """An idle process (a notebook kernel) that once dumped into a folder must not hold it for its life."""
    import subprocess
    import sys

    import tscore as ts

    debugger = ts.dump.Debugger(dump_path=str(tmp_path))
    debugger.start()
    debugger.stop()
    debugger.close()
    folder = tmp_path / "step0" / "rank0"
    assert not (folder / ".tscore-writers").exists()  # the lock went back at close()
    later = (
        "import sys, tscore as ts; d = ts.dump.Debugger(dump_path=sys.argv[1]); d.start(); "
        "print(d.running); d.stop(); d.close()"
    )
    done = subprocess.run([sys.executable, "-c", later, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True", done.stderr


def test_a_lock_of_another_machine_is_named_and_the_dump_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A lock left by a killed run on another node cannot be told from a live one: warn, never refuse."""
    import logging

    import tscore as ts
    from tscore import folder_writers

    folder = tmp_path / "step0" / "rank0"
    (folder / folder_writers.LOCKS_FOLDER).mkdir(parents=True)
    (folder / folder_writers.LOCKS_FOLDER / "node17-4242.lock").write_text("", encoding="utf-8")
    assert not folder_writers.on_this_host("node17-4242") and folder_writers.on_this_host(
        folder_writers.writer_id()
    )
    debugger = ts.dump.Debugger(dump_path=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="tscore"):
        debugger.start()
    try:
        assert debugger.running
        assert "node17-4242 on another machine" in caplog.text
    finally:
        debugger.stop()
        debugger.close()
