"""The overflow check on real torch float16 networks: where it started, stop at N, backward, ptdbg files."""

from __future__ import annotations

import dataclasses
import gc
import inspect
import json
import re
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.overrides import _get_current_function_mode_stack

import tscore as ts
from tscore.dump.config import DumpConfigError
from tscore.dump.overflow import OverflowLimitError, read_overflow_summary

PKL = re.compile(r"^\[overflow (\d+) times\]: dump file is saved in '(.+Overflow_info_\d+_\d+\.pkl)'\.$")


class Scaled(torch.nn.Module):
    """fc1, ReLU, then fc2 whose weights are scaled so that its float16 output overflows; fc3 after it."""

    def __init__(self, scale: float = 10000.0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.act, self.fc2, self.fc3 = (
            torch.nn.Linear(8, 16),
            torch.nn.ReLU(),
            torch.nn.Linear(16, 16),
            torch.nn.Linear(16, 4),
        )
        with torch.no_grad():
            self.fc2.weight.mul_(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(x))
        h = self.fc2(h)  # OVERFLOWS HERE
        return self.fc3(h)


@dataclasses.dataclass
class Probes:
    """How a test's probes are read: on the CPU at once, or left on a GPU faked by the CPU."""

    faked_gpu: bool
    reads: list[int]  # on the faked GPU: the number of values each read took


@pytest.fixture(params=["probes read at once", "probes left on a faked GPU"])
def probes(request, monkeypatch) -> Probes:
    """Run a test as on the CPU, and as on a GPU faked by CPU tensors whose probes are left unread.

    On a GPU the torch backend leaves each probe on the device and the check reads a window of
    them with one copy (``read_scalars``); here the CPU stands in for that device.
    """
    import ts_torch.plugin

    found = Probes(request.param == "probes left on a faked GPU", [])
    if found.faked_gpu:
        read = ts_torch.plugin.TorchBackend.read_scalars

        def counted(self, values):  # type: ignore[no-untyped-def]
            found.reads.append(len(values))
            return read(self, values)

        monkeypatch.setattr(ts_torch.plugin, "runs_behind_host", lambda tensor: True)
        monkeypatch.setattr(ts_torch.plugin.TorchBackend, "read_scalars", counted)
    return found


def line_of(marker: str) -> int:
    source, first = inspect.getsourcelines(Scaled.forward)
    return first + next(i for i, text in enumerate(source) if marker in text)


def inputs() -> torch.Tensor:
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(1)).half() * 30


def test_an_fp16_layer_that_overflows_is_named_where_it_started(tmp_path, probes) -> None:
    net = Scaled().half()
    debugger = ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=-1)
    debugger.start(net)
    try:
        net(inputs())
    finally:
        debugger.stop()
    summary = debugger.overflows[0]
    first = summary.first_own
    assert first is not None and first.call == "Functional.linear.1.forward" and first.module == "fc2"
    assert first.where == f"{__file__}:{line_of('OVERFLOWS HERE')} in forward"
    assert set(first.outputs.values()) <= {"inf", "-inf"} and first.inputs == {}
    # fc3 only received it: passed on, not counted
    kinds = {event.call: event.kind for event in summary.events}
    assert kinds == {"Functional.linear.1.forward": "own", "Functional.linear.2.forward": "passed_on"}
    assert summary.own == 1 and summary.passed_on == 1 and not summary.stopped
    assert "overflow started at Functional.linear.1.forward in module 'fc2'" in summary.line()
    folder = tmp_path / "step0" / "rank0"
    assert read_overflow_summary(folder) == summary
    # ptdbg's files: the .pkl (names, dtypes, shapes, no statistics) and every tensor of the call
    pkl = folder / f"{first.files}.pkl"
    lines = [json.loads(line) for line in pkl.read_text().splitlines()]
    assert [line[0] for line in lines] == [
        "Functional_linear_1_forward_input.0",
        "Functional_linear_1_forward_input.1",
        "Functional_linear_1_forward_input.2",
        "Functional_linear_1_forward_output",
    ]
    assert lines[1][3:] == ["float16", [16, 16], []]
    saved = np.load(folder / first.files / "Functional_linear_1_forward_output.npy")
    assert saved.dtype == np.float16 and np.isinf(saved).any()
    weight = np.load(folder / first.files / "Functional_linear_1_forward_input.1.npy")
    np.testing.assert_array_equal(weight, net.fc2.weight.detach().numpy())
    records = [json.loads(line) for line in (folder / "dump.jsonl").read_text().splitlines()]
    assert [(r["name"], r["overflow"]) for r in records] == [
        ("Functional_linear_1_forward", "own"),
        ("Functional_linear_2_forward", "passed_on"),
    ]
    assert records[0]["outputs"][0]["max"] in ("inf", "nan") or records[0]["outputs"][0]["min"] == "-inf"


def test_the_nth_own_overflow_stops_the_step_with_ptdbgs_message(tmp_path) -> None:
    net = Scaled().half()
    debugger = ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=2)
    debugger.start(net)
    try:
        net(inputs())  # one own overflow (fc2): goes on
        with pytest.raises(ValueError, match=r"^\[overflow 2 times\]") as raised:
            net(inputs())  # the second: stops
    finally:
        debugger.stop()
    assert isinstance(raised.value, OverflowLimitError)
    found = PKL.match(str(raised.value))
    assert found and Path(found[2]).is_file() and found[1] == "2"
    summary = debugger.overflows[0]
    assert summary.stopped and summary.own == 2
    assert _get_current_function_mode_stack() == []  # stop() took the capture off


def test_on_a_faked_gpu_the_nth_overflow_stops_the_step_within_a_window_or_at_stop(
    tmp_path, monkeypatch
) -> None:
    """Probes left on the device are read a window at a time: the limit stops the step at the read
    that finds it, in a later call or at ``stop()``, with ptdbg's message; ``step()`` still moves on."""
    import ts_torch.plugin
    from tscore.dump.overflow import WINDOW

    monkeypatch.setattr(ts_torch.plugin, "runs_behind_host", lambda tensor: True)
    net = Scaled().half()
    debugger = ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=1)
    debugger.start(net)
    net(inputs())  # fc2 overflows; few calls follow it: still waiting for the window's read
    with pytest.raises(OverflowLimitError, match=r"^\[overflow 1 times\]") as raised:
        debugger.step()  # stop() reads it
    assert PKL.match(str(raised.value)) and not debugger.running and debugger.current_step == 1
    assert _get_current_function_mode_stack() == []
    debugger.start(net)
    x = torch.ones(4, 16, dtype=torch.float16)
    torch.mul(x, 1e5)  # inf
    with pytest.raises(OverflowLimitError):
        for _ in range(WINDOW):
            torch.add(x, 1.0)  # the read after this many calls finds it, inside the step
    debugger.stop()
    assert debugger.overflows[-1].first_own.call == "Torch.mul.0.forward"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step0", "step1"]


def test_on_a_faked_gpu_close_ends_the_writer_even_when_the_limit_is_found_there(
    tmp_path, monkeypatch
) -> None:
    import threading

    import ts_torch.plugin

    monkeypatch.setattr(ts_torch.plugin, "runs_behind_host", lambda tensor: True)

    def writers() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "tscore-dump-writer"}

    # Earlier tests' debuggers that were stopped but never closed end their writers when the
    # collector finds them, which may happen at any moment here: so this debugger's own thread
    # is told apart by identity, not by counting.
    before = writers()
    debugger = ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=1)
    debugger.start()
    try:
        torch.mul(torch.full((4,), 40000.0, dtype=torch.float16), 2.0)  # inf, still waiting
        ours = writers() - before
        assert len(ours) == 1
    finally:
        with pytest.raises(OverflowLimitError):
            debugger.close()
    assert not any(t.is_alive() for t in ours) and not debugger.running


def test_on_a_faked_gpu_probes_are_read_a_window_at_a_time_never_per_call(tmp_path, probes) -> None:
    """No read of the device per API call: one copy of many probes per window (and one at stop)."""
    from tscore.dump.overflow import WINDOW

    net = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(100)])
    x = torch.randn(2, 8)
    plain = net(x).sum()
    with ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=-1) as debugger:
        checked = net(x).sum()
        checked.backward()
    assert torch.equal(plain, checked) and debugger.overflows[0].events == []
    if probes.faked_gpu:  # 100 linears and a sum forward, their 101 backwards: a read per window
        calls = 101 + 101
        assert len(probes.reads) == calls // WINDOW + 1 and sum(probes.reads) > calls  # 2-3 gradients each
    else:
        assert probes.reads == []
    probes.reads.clear()
    with ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path / "b"), overflow_nums=-1):
        for _ in range(WINDOW):
            torch.add(x, 1.0)  # waits for the window's read
            torch.add(torch.empty(0), 1.0)  # no probe: checked at once, finite, reads nothing else
    assert probes.reads == ([WINDOW] if probes.faked_gpu else [])


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_an_overflow_changed_in_place_before_the_window_is_read_still_counts(tmp_path, probes, dtype) -> None:
    """-inf made 0 by an in-place ReLU: on a faked GPU the probe, taken at the call, says what it made."""
    x = torch.full((4,), -40000.0 if dtype == torch.float16 else -3e38, dtype=dtype)
    with ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=-1) as debugger:
        y = torch.mul(x, 2.0)  # -inf
        torch.relu_(y)  # 0 now
    (event,) = debugger.overflows[0].events
    assert event.call == "Torch.mul.0.forward" and event.kind == "own"
    # read at once: the largest magnitude, inf; read later: what the probe taken at the call said
    said = "inf (changed in place after the call)" if probes.faked_gpu else "inf"
    assert event.outputs == {"Torch_mul_0_forward_output": said}


def test_calls_checked_at_once_wait_for_those_before_them_on_a_faked_gpu_too(tmp_path, probes) -> None:
    """A call with several outputs (``var_mean``) or a filtered backward is checked at once: the calls
    still waiting before it are checked first, so the first overflow and the limit stay where they were."""
    x = torch.full((4,), 40000.0, dtype=torch.float16)
    debugger = ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path / "a"), overflow_nums=1)
    debugger.start()
    with pytest.raises(OverflowLimitError):
        torch.mul(x, 2.0)  # inf: the first own overflow, the limit (raised here when read at once)
        spread = torch.tensor([300.0, -300.0, 300.0, -300.0], dtype=torch.float16)
        torch.var_mean(spread)  # 120000: var_mean's own overflow (two outputs: checked at once)
        debugger.stop()
    debugger.stop()
    summary = debugger.overflows[0]
    assert summary.first_own.call == "Torch.mul.0.forward" and summary.own == 1
    # a list filter: exp's backward is checked at once, after its forward (still waiting) was
    w = torch.full((4,), 12.0, dtype=torch.float16, requires_grad=True)
    with ts.dump.Debugger(
        task="overflow_check", dump_path=str(tmp_path / "b"), overflow_nums=-1, list=["exp"]
    ) as debugger:
        torch.exp(w).float().sum().backward()  # exp(12) = 162754 > 65504: inf; its backward passes it on
    kinds = [(e.call, e.kind) for e in debugger.overflows[0].events]
    assert kinds == [("Torch.exp.0.forward", "own"), ("Torch.exp.0.backward", "passed_on")]


def test_an_overflow_limit_found_at_stop_keeps_no_later_tensor_alive(tmp_path, probes) -> None:
    """The calls waiting behind the one that reached the limit hold nothing once it is raised."""
    x = torch.full((1024,), 40000.0, dtype=torch.float16)
    debugger = ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=1)
    debugger.start()
    refs = []
    with pytest.raises(OverflowLimitError) as raised:
        torch.mul(x, 2.0)  # inf
        refs = [weakref.ref(torch.add(x, 1.0)) for _ in range(30)]  # finite, dropped at once
        debugger.stop()
    assert raised.value.__traceback__ is not None  # the caught exception, with its frames, still here
    gc.collect()
    assert [r for r in refs if r() is not None] == []
    debugger.stop()


def test_a_backward_overflow_is_found_with_finite_forward_values(tmp_path, probes) -> None:
    x = torch.full((4,), 1e-3, dtype=torch.float16, requires_grad=True)
    with ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=-1) as debugger:
        y = x * 100.0  # 0.1: finite
        y.backward(torch.full((4,), 1000.0, dtype=torch.float16))  # 1000 * 100 > 65504
    summary = debugger.overflows[0]
    assert summary.first_own is not None and summary.first_own.call == "Tensor.mul.0.backward"
    assert summary.first_own.inputs == {} and list(summary.first_own.outputs.values()) == ["inf"]
    assert torch.isinf(x.grad).all()  # the run's own result, untouched


def test_half_outputs_close_to_their_largest_value_are_listed(tmp_path, probes) -> None:
    x = torch.full((3,), 100.0, dtype=torch.float16)
    with ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path / "a")) as debugger:
        torch.mul(x, 400.0)  # 40000: within a factor 2 of 65504
    (near,) = debugger.overflows[0].near_misses
    assert near.name == "Torch_mul_0_forward" and near.abs_max == 40000.0 and near.largest == 65504.0
    with ts.dump.Debugger(
        task="overflow_check", dump_path=str(tmp_path / "b"), overflow_factor=1.5
    ) as debugger:
        torch.mul(x, 400.0)
    assert debugger.overflows[0].near_misses == []
    assert "no overflow" in debugger.overflows[0].line()


def test_the_check_changes_no_number_and_leaves_nothing_installed(tmp_path, probes) -> None:
    def step() -> tuple[torch.Tensor, torch.Tensor]:
        net = Scaled(scale=1.0)
        x = inputs().float()
        out = net(x)
        out.sum().backward()
        return out.detach(), net.fc1.weight.grad

    plain = step()
    with ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path)) as debugger:
        checked = step()
    assert torch.equal(plain[0], checked[0]) and torch.equal(plain[1], checked[1])
    assert _get_current_function_mode_stack() == []
    assert debugger.overflows[0].events == [] and debugger.overflows[0].first_own is None
    assert not list((tmp_path / "step0" / "rank0").glob("Overflow_info_*"))


@pytest.mark.parametrize("value", [0, -2, 1.5, "2"])
def test_an_overflow_count_that_is_not_a_count_is_refused_before_the_step(tmp_path, value) -> None:
    with pytest.raises(DumpConfigError, match="overflow_nums"):
        ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=value)


def test_ptdbg_overflow_functions_refuse_bad_input_before_anything_runs(tmp_path, monkeypatch) -> None:
    from tscore import ptdbg

    monkeypatch.chdir(tmp_path)
    with pytest.raises(DumpConfigError, match="overflow_nums"):
        ptdbg.register_hook(Scaled(), ptdbg.overflow_check, overflow_nums=0)
    with pytest.raises(DumpConfigError, match="not part of this version"):
        ptdbg.register_hook(Scaled(), ptdbg.overflow_check, dump_mode="acl", dump_config="dump.json")
    with pytest.raises(DumpConfigError, match="register_hook"):
        ptdbg.set_overflow_check_switch("ON")
    with pytest.raises(DumpConfigError, match="'ON' or 'OFF'"):
        ptdbg.set_overflow_check_switch("on")
    assert _get_current_function_mode_stack() == []


def test_acl_mode_refuses_a_missing_or_malformed_config_and_a_device_without_acl(
    tmp_path, monkeypatch
) -> None:
    from tscore import ptdbg

    monkeypatch.chdir(tmp_path)
    with pytest.raises(DumpConfigError, match="needs dump_config"):
        ptdbg.register_hook(Scaled(), ptdbg.acc_cmp_dump, dump_mode="acl")
    with pytest.raises(DumpConfigError, match=r"missing\.json"):
        ptdbg.register_hook(Scaled(), ptdbg.acc_cmp_dump, dump_mode="acl", dump_config="missing.json")
    (tmp_path / "bad.json").write_text(json.dumps({"dump": {"dump_path": "", "dump_mode": "everything"}}))
    with pytest.raises(
        DumpConfigError, match=r"bad.json.*dump_path.*'dump_mode' is one of output, input, all"
    ):
        ptdbg.register_hook(Scaled(), ptdbg.acc_cmp_dump, dump_mode="acl", dump_config="bad.json")
    good = {"dump": {"dump_list": [], "dump_path": "out", "dump_mode": "all", "dump_op_switch": "on"}}
    (tmp_path / "dump.json").write_text(json.dumps(good))
    with pytest.raises(DumpConfigError, match="Ascend NPU: torch_npu"):  # no torch_npu here
        ptdbg.register_hook(Scaled(), ptdbg.acc_cmp_dump, dump_mode="acl", dump_config="dump.json")
    with pytest.raises(DumpConfigError, match="Ascend NPU"):
        ts.dump.Debugger(acl_config=str(tmp_path / "dump.json")).start()
    with pytest.raises(DumpConfigError, match="not part of this version"):
        ptdbg.set_backward_input(["Functional_conv2d_1_backward_input.0.npy"])
    assert _get_current_function_mode_stack() == []


def test_api_dump_with_overflow_check_records_only_calls_that_overflow(tmp_path) -> None:
    net = Scaled().half()
    with pytest.warns(DeprecationWarning):
        ts.migrator.api_dump_init(net, tmp_path)
        ts.migrator.api_dump_start(overflow_check=True)
    net(inputs())
    net(inputs())  # never stopped
    with pytest.warns(DeprecationWarning):
        ts.migrator.api_dump_stop()
    records = (tmp_path / "step0" / "rank0" / "dump.jsonl").read_text().splitlines()
    assert [json.loads(r)["name"] for r in records] == [
        "Functional_linear_1_forward",
        "Functional_linear_2_forward",
        "Functional_linear_4_forward",
        "Functional_linear_5_forward",
    ]


SCENARIO_3 = """
from tscore.ptdbg import *
import torch
from torch import nn

# 在main函数起始位置固定随机数
seed_all()
# 默认不开启确定性计算，当需要使能确定性计算时需要使用以下模式
seed_all(mode=True)

# seeded first: with some initial weights fc2's backward overflows first, and fc1's only passes it on
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Linear(16, 4)).half()
with torch.no_grad():
    model[2].weight.mul_(10000)

# 注册溢出检测的hook：
# 示例，检测到2次溢出后退出
register_hook(model, overflow_check, overflow_nums=2)

for step in range(3):
    x = torch.randn(4, 8).half() * 30
    model(x).float().sum().backward()
    print("step", step, "done")
"""


def test_spec_004_scenario_3_runs_with_only_the_import_changed(tmp_path) -> None:
    script = tmp_path / "scenario3.py"
    script.write_text(textwrap.dedent(SCENARIO_3), encoding="utf-8")
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "tscore.dump.overflow.OverflowLimitError: [overflow 2 times]: dump file is saved in"
    )
    found = PKL.match(last.partition(": ")[2])
    assert found and (tmp_path / found[2]).is_file()
    # forward fc2 overflowed in step 0, then fc1's backward weight gradient: the second stops step 0
    assert "step 0 done" not in out.stdout
    folder = tmp_path / "ptdbg_dump" / "step0" / "rank0"
    assert len(list(folder.glob("Overflow_info_*.pkl"))) == 2


def test_calls_that_only_move_values_are_not_looked_at_and_attribution_holds(tmp_path, probes) -> None:
    x = torch.full((4,), 40000.0, dtype=torch.float16)
    with ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=-1) as debugger:
        y = torch.mul(x, 2.0)  # inf: own
        z = torch.relu(y).reshape(2, 2)  # move values: not looked at
        torch.exp(z)  # computes with inf: passed on
    events = [(e.call, e.kind) for e in debugger.overflows[0].events]
    assert events == [("Torch.mul.0.forward", "own"), ("Torch.exp.0.forward", "passed_on")]


def test_float32_values_whose_sum_overflows_are_no_overflow_and_a_real_inf_still_is(tmp_path, probes) -> None:
    big = torch.full((8,), 3.0e38)  # finite float32 values whose sum is beyond float32: the cheap probe's inf
    assert not torch.isfinite(big.sum()) and torch.isfinite(big).all()
    with ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=-1) as debugger:
        torch.mul(big, 1.0)  # finite: confirmed by the largest magnitude, not called an overflow
        torch.mul(big, 2.0)  # inf
        torch.sub(big, big).div(0.0)  # 0/0: NaN
    events = [(e.call, e.kind, e.outputs) for e in debugger.overflows[0].events]
    assert events == [
        ("Torch.mul.1.forward", "own", {"Torch_mul_1_forward_output": "inf"}),
        ("Tensor.div.0.forward", "own", {"Tensor_div_0_forward_output": "nan"}),
    ]


def test_a_healthy_step_writes_no_module_tree_and_an_overflowing_one_writes_all_of_it(
    tmp_path, probes
) -> None:
    net = Scaled(scale=1.0).half()  # fc2 unscaled: nothing overflows
    debugger = ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=-1)
    debugger.start(net)
    net(inputs())
    debugger.step()
    with torch.no_grad():
        net.fc2.weight.mul_(10000.0)  # now fc2 overflows, after fc1 and act have run
    debugger.start(net)
    net(inputs())
    debugger.stop()
    healthy, overflowed = tmp_path / "step0" / "rank0", tmp_path / "step1" / "rank0"
    assert "no overflow" in read_overflow_summary(healthy).line()
    assert not (healthy / "construct.jsonl").exists() and not (healthy / "dump.jsonl").exists()
    tree = [json.loads(line) for line in (overflowed / "construct.jsonl").read_text().splitlines()]
    # every module the step entered, those before the first overflow included, in the order entered
    assert [(m["module"], m["parent"]) for m in tree] == [
        ("", None),
        ("fc1", ""),
        ("act", ""),
        ("fc2", ""),
        ("fc3", ""),
    ]
    assert read_overflow_summary(overflowed).first_own.module == "fc2"
