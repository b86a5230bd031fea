"""The compiled torch capture against the Python one: the same records, a run left as it was, faults kept out.

``nox`` sets ``TSCORE_TORCH_CAPTURE=compiled`` in the torch sessions, so a build that fails there
fails these tests instead of letting the Python capture pass for both.
"""

from __future__ import annotations

import functools
import gc
import json
import logging
import os
import subprocess
import sys
import textwrap
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tscore as ts
from ts_torch import compiled_capture
from tscore.dump.recorder import DumpRecorder
from tscore.dump_compare.compare import compare_dumps

RECORD_FILES = ("dump.jsonl", "stack.jsonl", "construct.jsonl")


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn(self.conv(x)))
        y = y.to(memory_format=torch.channels_last)[:, 1:] * 2  # a view that is not contiguous
        y = torch.cat([y, y[:, :1].half().float()], dim=1)
        return self.head(y.flatten(1))


Step = Callable[[], torch.Tensor]


def _cnn_step() -> Step:
    """Make the model (outside the dump: torch.empty's values differ run to run); return its step."""
    torch.manual_seed(0)
    net = Block()
    x, y = torch.randn(2, 3, 6, 6), torch.tensor([0, 3])

    def step() -> torch.Tensor:
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        return loss

    return step


def _encoder_step() -> Step:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    net = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    mask = torch.zeros(3, 5, dtype=torch.bool)
    mask[:, -1] = True
    x = torch.randn(3, 5, 16)

    def step() -> torch.Tensor:
        loss = net(x, src_key_padding_mask=mask).mean()
        loss.backward()
        return loss

    return step


def _odd_values_step() -> Step:
    """Values the kernel does not read itself: the backend's statistics, or an error in the record."""
    torch.manual_seed(0)
    x = torch.randn(4, 3, requires_grad=True)
    return functools.partial(_odd_values, x)


def _odd_values(x: torch.Tensor) -> torch.Tensor:
    ids = torch.arange(6).reshape(2, 3)  # integers (left out: filter_int)
    flags = ids > 2  # bool
    empty = torch.empty(0, 3)
    z = torch.complex(x[0].detach(), x[1].detach()) * 2  # complex: torch's reductions
    meta = torch.empty(2, 3, device="meta") + 1  # no values: an error entry
    half = x.detach().to(torch.bfloat16).sum()
    y = x[1:, ::2] + x.t()[:2, 1:3].sum() + half.float()  # slices, a transposed view
    y = torch.where(flags[:, :2], y[:2], y[1:3])
    torch.cat([empty, x.detach()]).abs_().neg()  # in place on a fresh tensor
    try:
        torch.ones(2) + torch.ones(3)  # a call that raises: counted, not recorded
    except RuntimeError:
        pass
    del meta, z
    loss = (y * 3).sum()
    loss.backward()
    return loss


def _many_calls_step() -> Step:
    """More calls than the compiled capture holds before it reports mid-module (2,048), no module at all."""
    torch.manual_seed(0)
    x = torch.randn(8, requires_grad=True)

    def step() -> torch.Tensor:
        y = x
        for _ in range(1100):
            y = torch.sin(y) * 1.0001
        loss = y.sum()
        loss.backward()
        return loss

    return step


def _raised_elsewhere_step() -> Step:
    """The one call on a device (meta) raises: it is not recorded, but the device's settings are kept."""
    torch.manual_seed(0)
    x = torch.randn(4, 3, requires_grad=True)
    a, b = torch.empty(2, device="meta"), torch.empty(3, device="meta")
    return functools.partial(_raised_elsewhere, x, a, b)


def _raised_elsewhere(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = x
    for _ in range(3):
        y = torch.tanh(y * 2 + 1)
    try:
        a + b  # shapes that do not broadcast
    except RuntimeError:
        pass
    loss = y.sum()
    loss.backward()
    return loss


STEPS = {
    "cnn": _cnn_step,
    "encoder": _encoder_step,
    "odd": _odd_values_step,
    "many": _many_calls_step,
    "raised": _raised_elsewhere_step,
}


def _dump(folder: Path, capture: str, run: str, monkeypatch: pytest.MonkeyPatch, **config: object) -> str:
    monkeypatch.setenv(compiled_capture.CHOICE_VARIABLE, capture)
    debugger = ts.dump.Debugger(task="statistics", dump_path=str(folder), **config)
    step = STEPS[run]()
    with debugger:
        step()
    return str(folder / "step0" / "rank0")


def _files(folder: str) -> dict[str, str]:
    found = {name: Path(folder, name).read_text() for name in RECORD_FILES if Path(folder, name).exists()}
    info = json.loads(Path(folder, "dump_info.json").read_text())
    found["settings"] = json.dumps([info.get(k) for k in ("settings", "devices", "recorded_frameworks")])
    return found


def test_the_compiled_capture_builds_and_serves_a_statistics_dump(tmp_path, monkeypatch, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger=compiled_capture.__name__)
    _dump(tmp_path, "compiled", "cnn", monkeypatch)
    assert compiled_capture.extension() is not None
    assert any("compiled code" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("run", sorted(STEPS))
@pytest.mark.parametrize(
    "config",
    [
        {"level": "L1"},
        {"level": "mix"},
        {"level": "L1", "stack": False},
        {"level": "L1", "filter_int": False},
        {"level": "L1", "list": ["linear", "sin"]},
        {"level": "L1", "data_mode": ["input"]},  # a side of each call left out
    ],
    ids=["L1", "mix", "no-stack", "integers-kept", "api-list", "inputs-only"],
)
def test_both_captures_write_the_same_records(tmp_path, monkeypatch, run, config) -> None:
    made = {c: _files(_dump(tmp_path / c, c, run, monkeypatch, **config)) for c in ("compiled", "python")}
    compiled, python = made["compiled"], made["python"]  # dumped from one line: the same stacks
    assert compiled.keys() == python.keys()
    for name in compiled:
        assert compiled[name].splitlines() == python[name].splitlines(), name
    if "list" not in config:
        assert compiled["dump.jsonl"].count("\n") > 10


def test_a_call_that_raises_still_notes_its_devices_settings(tmp_path, monkeypatch) -> None:
    info = json.loads(Path(_dump(tmp_path, "compiled", "raised", monkeypatch), "dump_info.json").read_text())
    assert "meta" in info["devices"] and "torch meta" in info["settings"]
    assert info["devices"][-1] == "cpu"


def test_the_odd_values_are_recorded_as_the_python_capture_records_them(tmp_path, monkeypatch) -> None:
    folder = _dump(tmp_path, "compiled", "odd", monkeypatch, filter_int=False)
    lines = Path(folder, "dump.jsonl").read_text()
    assert '"error":"UnsupportedObjectError' in lines.replace(": ", ":")  # the meta tensor's record says why
    assert '"dtype":"complex64"' in lines.replace(": ", ":")
    assert '"dtype":"bool"' in lines.replace(": ", ":")


def test_dump_compare_finds_the_two_captures_equal(tmp_path, monkeypatch) -> None:
    compiled, python = (_dump(tmp_path / c, c, "encoder", monkeypatch) for c in ("compiled", "python"))
    report = compare_dumps(compiled, python)
    assert report.total_calls > 20
    assert report.first_failure is None and report.first_error is None
    assert set(report.call_counts) <= {"ok", "unknown"}


def test_a_step_dumped_by_the_compiled_capture_is_bit_identical_and_leaves_nothing(tmp_path, monkeypatch):
    plain = _encoder_step()()
    rng = torch.get_rng_state()
    monkeypatch.setenv(compiled_capture.CHOICE_VARIABLE, "compiled")
    captures: list[compiled_capture.CompiledCapture] = []
    original = compiled_capture.CompiledCapture.install

    def install(self: compiled_capture.CompiledCapture):  # type: ignore[no-untyped-def]
        captures.append(self)
        return original(self)

    monkeypatch.setattr(compiled_capture.CompiledCapture, "install", install)
    debugger = ts.dump.Debugger(task="statistics", dump_path=str(tmp_path))
    step = _encoder_step()
    x = torch.ones(3, requires_grad=True)
    debugger.start()
    pending = torch.exp(x)  # its grad_fn hooked, backward never run while dumping
    assert compiled_capture.extension().Capture.post_hooks_on(pending) == 1
    dumped = step()
    assert captures and captures[0].hooks_held > 10
    debugger.stop()
    assert dumped.item() == plain.item() and torch.equal(torch.get_rng_state(), rng)
    assert torch._C._len_torch_function_stack() == 0
    assert captures[0].hooks_held == 0
    assert compiled_capture.extension().Capture.post_hooks_on(pending) == 0  # taken off the graph
    before = Path(tmp_path, "step0", "rank0", "dump.jsonl").read_text()
    pending.sum().backward()  # the hook was removed: no record comes after stop()
    assert Path(tmp_path, "step0", "rank0", "dump.jsonl").read_text() == before
    assert "Torch_exp_0_backward" not in before
    # the compiled side let go of the capture and its recorder: no cycle the collector cannot see through
    gone = weakref.ref(captures.pop())
    gc.collect()
    assert gone() is None


def test_an_error_inside_the_capture_warns_once_and_turns_the_dump_off(tmp_path, monkeypatch, caplog):
    plain = _cnn_step()()
    calls = []

    original = DumpRecorder.stack_here

    def failing(self: DumpRecorder) -> object:
        calls.append(1)
        if len(calls) > 2:
            raise RuntimeError("planted")
        return original(self)

    monkeypatch.setattr(DumpRecorder, "stack_here", failing)
    caplog.set_level(logging.WARNING)
    folder = _dump(tmp_path, "compiled", "cnn", monkeypatch)
    assert _cnn_step()().item() == plain.item()
    warnings = [r.getMessage() for r in caplog.records if "compiled torch capture failed" in r.getMessage()]
    assert len(warnings) == 1 and "planted" in warnings[0]
    names = [line for line in Path(folder, "dump.jsonl").read_text().splitlines() if line]
    assert 0 < len(names) < 6  # the calls before the failure, none after


def test_a_dump_of_tensors_md5_or_overflow_keeps_the_python_capture(tmp_path, monkeypatch, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger=compiled_capture.__name__)
    monkeypatch.setenv(compiled_capture.CHOICE_VARIABLE, "compiled")
    for task, extra in (("tensor", {}), ("statistics", {"summary_mode": "md5"}), ("overflow_check", {})):
        with ts.dump.Debugger(task=task, dump_path=str(tmp_path / task / str(len(extra))), **extra):
            _cnn_step()()
    assert not any("compiled code" in r.getMessage() for r in caplog.records)


def test_an_unknown_choice_is_an_error_naming_the_variable(monkeypatch) -> None:
    monkeypatch.setenv(compiled_capture.CHOICE_VARIABLE, "fast")
    with pytest.raises(ValueError, match="TSCORE_TORCH_CAPTURE='fast'"):
        compiled_capture.choice()


BROKEN_BUILD = textwrap.dedent(
    """
    import json, logging, tempfile
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    import torch, tscore as ts
    folder = tempfile.mkdtemp()
    with ts.dump.Debugger(task="statistics", dump_path=folder):
        torch.relu(torch.ones(3)) + 1
    print(" ".join(json.loads(line)["name"] for line in open(folder + "/step0/rank0/dump.jsonl")))
    """
)


def _broken_build(tmp_path: Path, choice: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CXX": str(tmp_path / "no-such-compiler"),
        compiled_capture.CACHE_VARIABLE: str(tmp_path / "cache"),
        compiled_capture.CHOICE_VARIABLE: choice,
    }
    return subprocess.run(
        [sys.executable, "-c", BROKEN_BUILD], env=env, capture_output=True, text=True, timeout=300
    )


def test_without_a_compiler_one_warning_says_why_and_the_python_capture_runs(tmp_path) -> None:
    done = _broken_build(tmp_path, "")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Torch_ones_0_forward", "Torch_relu_0_forward", "Tensor_add_0_forward"]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1
    assert "compiled torch capture is not available" in warnings[0] and "Python capture" in warnings[0]


def test_a_failed_build_is_an_error_when_the_compiled_capture_is_required(tmp_path) -> None:
    done = _broken_build(tmp_path, "compiled")
    assert done.returncode != 0
    assert "CaptureBuildError" in done.stderr and "TSCORE_TORCH_CAPTURE" in done.stderr


def test_a_capture_built_earlier_loads_without_importing_a_build_tool(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(compiled_capture.CHOICE_VARIABLE, "compiled")
    compiled_capture.extension()  # built (or found) in this session's cache
    script = textwrap.dedent(
        f"""
        import sys, torch, tscore as ts
        before = set(sys.modules)
        with ts.dump.Debugger(task="statistics", dump_path={str(tmp_path)!r}):
            torch.relu(torch.ones(3))
        added = set(sys.modules) - before
        tools = ("setuptools", "torch.utils.cpp_extension", "distutils")
        print(sorted(m for m in added if m.startswith(tools)))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_backward_under_compiled_autograd_runs_and_says_what_is_missing(tmp_path, monkeypatch, caplog):
    from torch._dynamo import compiled_autograd

    monkeypatch.setenv(compiled_capture.CHOICE_VARIABLE, "compiled")
    caplog.set_level(logging.WARNING)
    x = torch.randn(4, requires_grad=True)
    with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path)):
        loss = (torch.sin(x) * 2).sum()
        with compiled_autograd._enable(torch.compile(backend="eager")):
            loss.backward()  # torch's default for a C++ hook here raises: the step must not see it
    assert torch.allclose(x.grad, 2 * torch.cos(x))
    assert any("compiled autograd" in r.getMessage() for r in caplog.records)
