"""The API dump on real torch: names, filters, files, provenance, and a run left exactly as it was."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn, relu

import tscore as ts
from tests.conftest import cyclic_garbage
from tscore.dump.config import DumpConfigError
from tscore.dump_format.reading import find_records, read_lines, summarise


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.3)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 6 * 6, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = relu(self.bn(self.conv(x)))  # bound before any tool could patch torch.relu
        return self.head(self.drop(y) + 1)


def train_step(seed: int = 0, debugger: ts.dump.Debugger | None = None) -> dict[str, torch.Tensor]:
    """One SGD step of SmallNet from ``seed``; with ``debugger``, dumped with the model's modules hooked."""
    torch.manual_seed(seed)
    net = SmallNet()
    if debugger is not None:
        debugger.start(net)
    try:
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        x = torch.randn(4, 3, 6, 6)
        loss = F.cross_entropy(net(x), torch.tensor([0, 1, 2, 3]))
        loss.backward()
        grads = {f"grad.{n}": p.grad.clone() for n, p in net.named_parameters()}
        opt.step()
    finally:
        if debugger is not None:
            debugger.stop()
    return {"loss": loss.detach(), **grads, **{n: p.detach().clone() for n, p in net.state_dict().items()}}


def records(folder: Path) -> list[dict]:
    return list(read_lines(str(folder / "dump.jsonl")))


def names(folder: Path) -> list[str]:
    return [r["name"] for r in records(folder)]


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_a_dumped_training_step_is_bit_identical_and_leaves_the_random_state_alone(tmp_path, task) -> None:
    plain = train_step()
    state_after_plain = torch.get_rng_state()
    dumped = train_step(debugger=ts.dump.Debugger(task=task, dump_path=str(tmp_path), level="mix"))
    state_after_dumped = torch.get_rng_state()
    assert plain.keys() == dumped.keys()
    for key in plain:
        assert plain[key].numpy().tobytes() == dumped[key].numpy().tobytes(), key
    assert torch.equal(state_after_plain, state_after_dumped)
    assert len(records(tmp_path / "step0" / "rank0")) > 20


def test_a_dumped_step_leaves_nothing_for_the_garbage_collector(tmp_path) -> None:
    """What a step's dump made is freed when stop() returns, not at Python's next full collection.

    A recorder kept in a reference cycle (by a capture made for each dump) took its weak references,
    keys and records of every tensor into the oldest generation, step after step.
    """
    train_step()  # a first step makes what is made once (imports, caches)
    plain = cyclic_garbage(train_step)
    for level in ("L1", "mix"):
        debugger = ts.dump.Debugger(dump_path=str(tmp_path / level), level=level)
        train_step(debugger=debugger)  # a first dump makes what is made once (caches, pydantic's)
        assert cyclic_garbage(functools.partial(train_step, debugger=debugger)) == plain, level


def test_nothing_is_left_installed_after_stop_or_after_an_exception(tmp_path) -> None:
    net = SmallNet()
    hooks_before = [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in net.modules()]
    debugger = ts.dump.Debugger(dump_path=str(tmp_path), level="mix")
    debugger.start(net)
    assert torch._C._len_torch_function_stack() == 1
    net(torch.randn(1, 3, 6, 6)).sum().backward()
    debugger.stop()
    assert torch._C._len_torch_function_stack() == 0
    assert [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in net.modules()] == hooks_before
    failing = ts.dump.Debugger(dump_path=str(tmp_path / "b"), level="mix")
    failing.start(net)
    with pytest.raises(RuntimeError, match="channels"):
        try:
            net(torch.randn(1, 5, 6, 6))  # a wrong input raises inside the dumped step
        finally:
            failing.stop()
    assert torch._C._len_torch_function_stack() == 0
    assert [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in net.modules()] == hooks_before
    x = torch.randn(2, requires_grad=True)
    with ts.dump.Debugger(dump_path=str(tmp_path / "c")):
        y = torch.exp(x)
    assert not y.grad_fn._forward_hooks if hasattr(y.grad_fn, "_forward_hooks") else True
    y.sum().backward()  # the grad_fn hook was removed at stop: no record after it
    assert [r["name"] for r in records(tmp_path / "c" / "step0" / "rank0")] == ["Torch_exp_0_forward"]


def test_aliases_operators_and_counters_are_named_as_ptdbg_names_them(tmp_path) -> None:
    x = torch.randn(3, requires_grad=True)
    with ts.dump.Debugger(dump_path=str(tmp_path)):
        y = relu(x)  # from torch import relu
        z = torch.relu(y) + 2  # the second call of the same API, and an operator
        z.sum().backward()
    got = names(tmp_path / "step0" / "rank0")
    assert got[:4] == [
        "Torch_relu_0_forward",
        "Torch_relu_1_forward",
        "Tensor_add_0_forward",
        "Tensor_sum_0_forward",
    ]
    assert {"Torch_relu_1_backward", "Torch_relu_0_backward", "Tensor_add_0_backward"} <= set(got)
    relu_1 = next(r for r in records(tmp_path / "step0" / "rank0") if r["name"] == "Torch_relu_1_backward")
    assert [e["name"] for e in relu_1["inputs"]] == ["Torch_relu_1_backward_input.0"]
    assert relu_1["call"] == "Torch.relu.1.backward"


def test_a_call_inside_a_captured_call_is_not_recorded_again(tmp_path) -> None:
    x, mean, var = torch.randn(2, 4, 3), torch.zeros(4), torch.ones(4)
    with ts.dump.Debugger(dump_path=str(tmp_path)):
        F.batch_norm(x, mean, var)  # calls torch.batch_norm inside
    assert names(tmp_path / "step0" / "rank0") == ["Functional_batch_norm_0_forward"]


def test_statistics_match_numpy_and_tensors_are_written_once(tmp_path) -> None:
    x = torch.randn(3, 4)
    with ts.dump.Debugger(task="tensor", dump_path=str(tmp_path)):
        y = torch.tanh(x)
        torch.exp(y)  # y is tanh's output and exp's input: one file, two references
    folder = tmp_path / "step0" / "rank0"
    tanh, exp = records(folder)
    out, into = tanh["outputs"][0], exp["inputs"][0]
    assert out["file"] == into["file"] == "tensors/Torch_tanh_0_forward_output.npy"
    saved = np.load(folder / out["file"])
    np.testing.assert_array_equal(saved, y.numpy())
    assert out["max"] == pytest.approx(float(saved.max())) and out["min"] == pytest.approx(float(saved.min()))
    assert out["mean"] == pytest.approx(float(saved.mean()), abs=1e-7)
    assert out["norm"] == pytest.approx(float(np.linalg.norm(saved)), rel=1e-6)
    assert len(list((folder / "tensors").iterdir())) == 3  # tanh's input, tanh's output, exp's output


def test_bfloat16_is_stored_exactly_as_float32_and_named_bfloat16(tmp_path) -> None:
    x = torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16)
    with ts.dump.Debugger(task="tensor", dump_path=str(tmp_path)):
        torch.neg(x)
    (record,) = records(tmp_path / "step0" / "rank0")
    entry = record["outputs"][0]
    assert entry["dtype"] == "bfloat16"
    stored = np.load(tmp_path / "step0" / "rank0" / entry["file"])
    assert stored.dtype == np.float32
    assert stored.astype(ml_dtypes.bfloat16).tobytes() == (-x).view(torch.int16).numpy().tobytes()


def test_provenance_keys_do_not_move_when_a_call_is_added_in_another_module(tmp_path) -> None:
    class Block(nn.Module):
        def __init__(self, extra: bool) -> None:
            super().__init__()
            self.extra = extra

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.extra:
                x = torch.sigmoid(x)  # one more call, here only
            return torch.tanh(x)

    class Net(nn.Module):
        def __init__(self, extra: bool) -> None:
            super().__init__()
            self.first, self.second = Block(extra), Block(False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(self.second(self.first(x)))

    keys = {}
    for extra in (False, True):
        folder = tmp_path / str(extra)
        debugger = ts.dump.Debugger(dump_path=str(folder))
        net = Net(extra)
        debugger.start(net)
        net(torch.randn(2))
        debugger.stop()
        keys[extra] = {r["key"]: r["name"] for r in records(folder / "step0" / "rank0")}
    assert keys[False]["second#0/Torch.tanh#0"] == "Torch_tanh_1_forward"
    assert keys[True]["second#0/Torch.tanh#0"] == "Torch_tanh_1_forward"
    assert keys[False]["#0/Torch.tanh#0"] == "Torch_tanh_2_forward"  # the ptdbg name is the same here,
    assert "first#0/Torch.sigmoid#0" in keys[True] and "first#0/Torch.sigmoid#0" not in keys[False]
    assert set(keys[False]) <= set(keys[True])  # every key of the first run still names the same place


def test_data_mode_md5_and_the_list_filter(tmp_path) -> None:
    x = torch.randn(3, requires_grad=True)
    with ts.dump.Debugger(dump_path=str(tmp_path), data_mode=["forward"], summary_mode="md5", list=["relu"]):
        torch.relu(torch.exp(x)).sum().backward()
    (record,) = records(tmp_path / "step0" / "rank0")
    assert record["name"] == "Torch_relu_0_forward"
    import zlib

    expected = f"{zlib.crc32(torch.relu(torch.exp(x)).detach().numpy().tobytes()):08x}"
    assert record["outputs"][0]["md5"] == expected


def test_msprobe_config_file_and_steps(tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "task": "statistics",
                "dump_path": str(tmp_path / "dump"),
                "rank": [],
                "step": [1],
                "level": "L1",
                "seed": 1234,
                "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"},
            }
        )
    )
    debugger = ts.dump.Debugger(str(config))
    for _ in range(3):
        debugger.start()
        torch.exp(torch.ones(2))
        debugger.stop()
        debugger.step()
    assert sorted(os.listdir(tmp_path / "dump")) == ["step1"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"task": "statistics", "level": "L3"}))
    with pytest.raises(DumpConfigError, match=r"level='L3' is not one of 'L0', 'L1' or 'mix'"):
        ts.dump.Debugger(str(bad))


def test_a_tensor_that_cannot_be_read_is_a_record_saying_so(tmp_path) -> None:
    meta, one = torch.empty(2, device="meta"), torch.ones(1)
    with ts.dump.Debugger(dump_path=str(tmp_path)):
        torch.exp(meta)
        torch.exp(one)
    first, second = records(tmp_path / "step0" / "rank0")
    assert "meta" in first["inputs"][0]["error"]
    assert second["outputs"][0]["max"] == pytest.approx(np.e)


def test_a_disk_that_fails_turns_the_dump_off_and_the_training_goes_on(tmp_path, caplog) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with ts.dump.Debugger(dump_path=str(blocked / "dump")):
        assert torch.exp(torch.zeros(1)).item() == 1.0
    assert "dump off, the training goes on" in caplog.text
    debugger = ts.dump.Debugger(dump_path=str(tmp_path / "ok"))
    debugger.start()
    assert debugger.writer is not None

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    debugger.writer._write_line = full_disk  # type: ignore[method-assign]
    for _ in range(50):
        torch.exp(torch.ones(1))
    debugger.stop()
    assert caplog.text.count("turned off, the training goes on") == 1


KILLED_RUN = """
import sys, torch, tscore as ts
debugger = ts.dump.Debugger(dump_path=sys.argv[1], task=sys.argv[2])
debugger.start()
x = torch.ones(64)
i = 0
while True:
    x = torch.sin(x) + 1e-3
    i += 1
    if i == 200:
        print("running", flush=True)
"""


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_a_run_killed_in_the_middle_leaves_every_written_record_readable(tmp_path, task) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, str(tmp_path), task], stdout=subprocess.PIPE, text=True
    )
    folder = tmp_path / "step0" / "rank0"
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "running"
        # killed once its writer has put a good part of the run on disk, however loaded the machine
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _lines(folder / "dump.jsonl") <= 150:
            time.sleep(0.05)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    read = records(folder)
    assert len(read) > 100
    for record in read[-20:]:
        for entry in record["outputs"]:
            if entry.get("file"):
                assert np.load(folder / entry["file"]).shape == (64,)


DISTRIBUTED = """
import os, sys, torch, torch.distributed as dist, tscore as ts
address = f"tcp://127.0.0.1:{sys.argv[3]}"
dist.init_process_group("gloo", init_method=address, rank=int(sys.argv[1]), world_size=2)
x = torch.ones(3) * (dist.get_rank() + 1)
with ts.dump.Debugger(dump_path=sys.argv[2]):
    torch.exp(x)
    dist.all_reduce(x)  # 1 + 2 on both ranks
dist.destroy_process_group()
"""


def test_two_gloo_ranks_dump_into_two_rank_folders(tmp_path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    processes = [
        subprocess.Popen([sys.executable, "-c", DISTRIBUTED, str(rank), str(tmp_path), str(port)])
        for rank in range(2)
    ]
    try:
        assert [p.wait(timeout=120) for p in processes] == [0, 0]
    finally:
        for process in processes:
            process.kill()  # nothing left running if a rank hangs
    assert sorted(os.listdir(tmp_path / "step0")) == ["rank0", "rank1"]
    for rank in range(2):
        got = {r["name"]: r for r in records(tmp_path / "step0" / f"rank{rank}")}
        exp = got["Torch_exp_0_forward"]
        assert exp["rank"] == rank and exp["inputs"][0]["max"] == rank + 1
        reduced = got["Distributed_all_reduce_0_forward"]  # collectives are captured too
        assert reduced["inputs"][0]["max"] == rank + 1  # taken before the call changed x in place


def test_dump_info_says_what_a_dump_holds(tmp_path, capsys) -> None:
    from tscore.cli import main

    ones = torch.ones(2)
    with ts.dump.Debugger(dump_path=str(tmp_path), task="tensor"):
        torch.exp(ones)
    summary = summarise(str(tmp_path))
    (folder,) = summary["folders"]
    assert (folder["step"], folder["rank"], folder["records"], folder["apis"], folder["tensor_files"]) == (
        0,
        0,
        1,
        1,
        2,
    )
    assert main(["dump-info", str(tmp_path)]) == 0
    assert "torch" in capsys.readouterr().out
    assert main(["dump-info", str(tmp_path / "nothing")]) == 2


SCENARIO_1 = """
from tscore.ptdbg import *
import torch
from torch import nn

model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 2))

# 在main函数开始前固定随机数
seed_all()
# 默认不开启确定性计算，当需要使能确定性计算时需要使用以下模式
seed_all(mode=True)

# 设置dump路径（含文件名）和dump_tag。dump_tag会体现在数据文件夹的文件名上
set_dump_path("./npu_dump.pkl", dump_tag="dump_conv2d")

register_hook(model, acc_cmp_dump)

set_dump_switch("ON")

model(torch.randn(2, 3, 6, 6)).sum().backward()

# 在期望dump的step结束后关闭dump开关
set_dump_switch("OFF")

# 第二步：缩小范围分析
set_dump_path("./npu_dump_scope.pkl")
register_hook(model, acc_cmp_dump)
set_dump_switch("ON", mode="list", scope=["Tensor_permute_1_forward", "Tensor_transpose_2_forward", "Functional_relu_0_forward"])
model(torch.randn(2, 3, 6, 6)).sum().backward()
set_dump_switch("ON", mode="range", scope=["Functional_batch_norm_0_forward", "Functional_linear_0_forward"])
model(torch.randn(2, 3, 6, 6)).sum().backward()
set_dump_switch("OFF")

# 场景2
parse("./npu_dump.pkl", "Functional_conv2d_0_forward")
"""


def test_spec_004_scenarios_1_and_2_run_with_only_the_import_changed(tmp_path) -> None:
    script = tmp_path / "scenario.py"
    script.write_text(textwrap.dedent(SCENARIO_1), encoding="utf-8")
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Trace back(Functional_conv2d_0_forward)" in out.stdout
    assert "[Functional_conv2d_0_forward_output][dtype: float32][shape: [2, 4, 4, 4]]" in out.stdout
    whole = tmp_path / "dump_conv2d" / "step0" / "rank0"
    assert {"Functional_conv2d_0_forward", "Functional_linear_0_backward"} <= set(names(whole))
    assert (whole / "npu_dump.pkl").exists()
    lines = [json.loads(line) for line in (whole / "npu_dump.pkl").read_text().splitlines()]
    conv_input = next(line for line in lines if line[0] == "Functional_conv2d_0_forward_input.0")
    assert conv_input[3:5] == ["float32", [2, 3, 6, 6]] and len(conv_input[5]) == 3
    listed = names(tmp_path / "ptdbg_dump" / "step0" / "rank0")
    assert listed == ["Functional_relu_0_forward"]
    ranged = names(tmp_path / "ptdbg_dump" / "step1" / "rank0")
    assert ranged == [
        "Functional_batch_norm_0_forward",
        "Functional_relu_0_forward",
        "Tensor_flatten_0_forward",
        "Functional_linear_0_forward",
    ]


def test_every_set_dump_switch_mode(tmp_path, monkeypatch) -> None:
    from tscore import ptdbg

    monkeypatch.chdir(tmp_path)
    x = torch.randn(3, requires_grad=True)

    def step() -> None:
        (torch.relu(torch.exp(x)) + F.relu(x)).sum().backward()

    ptdbg.set_dump_path("./d.pkl", dump_tag="modes")
    ptdbg.register_hook(nn.Linear(1, 1), ptdbg.acc_cmp_dump)
    expected = {
        ("all", ()): 10,
        ("api_list", ()): 4,  # Torch_relu and Functional_relu, forward and backward
        ("api_stack", ()): 10,
        ("stack", ("Torch_exp_0_forward", "Torch_relu_0_forward")): 2,
        ("list", ("Torch_exp_0_backward",)): 1,
        ("range", ("Torch_relu_0_forward", "Tensor_add_0_forward")): 3,
    }
    for step_index, ((mode, scope), count) in enumerate(expected.items()):
        ptdbg.set_dump_switch("ON", mode=mode, scope=list(scope), api_list=["relu"])
        step()
        ptdbg.set_dump_switch("OFF")
        folder = tmp_path / "modes" / f"step{step_index}" / "rank0"
        got = records(folder)
        assert len(got) == count, (mode, [r["name"] for r in got])
        if mode in ("stack", "api_stack"):
            assert all(r["stack"] is not None for r in got)
            stacks = list(read_lines(str(folder / "stack.jsonl")))
            assert any("step()" in line for s in stacks for line in s["stack"])
        if mode == "stack":
            assert all(not r["inputs"] and not r["outputs"] for r in got)
    with pytest.raises(DumpConfigError, match="Ascend NPU"):
        ptdbg.set_dump_switch("ON", mode="acl", scope=["Torch_exp_0_forward"])  # no ACL register_hook
    with pytest.raises(DumpConfigError, match="mode 'everything' is not one of all, list, range"):
        ptdbg.set_dump_switch("ON", mode="everything")
    with pytest.raises(DumpConfigError, match="'ON' or 'OFF'"):
        ptdbg.set_dump_switch("on")
    assert find_records(str(tmp_path / "modes"), "Torch.exp.0.forward")


def test_reuse_never_hides_a_change_in_place_or_through_data(tmp_path) -> None:
    x = torch.ones(4)
    with ts.dump.Debugger(dump_path=str(tmp_path)):
        y = torch.exp(x)
        y.add_(1)  # in place, between two uses of y
        torch.neg(y)
        x.data.add_(5)  # through .data: x's own version counter does not move
        torch.exp(x)
    by_name = {r["name"]: r for r in records(tmp_path / "step0" / "rank0")}
    assert by_name["Torch_neg_0_forward"]["inputs"][0]["max"] == pytest.approx(np.e + 1)
    assert by_name["Torch_exp_1_forward"]["inputs"][0]["max"] == pytest.approx(6.0)


def test_inference_mode_tensors_get_statistics(tmp_path) -> None:
    with torch.inference_mode(), ts.dump.Debugger(dump_path=str(tmp_path)):
        torch.exp(torch.zeros(3))
    exp = next(r for r in records(tmp_path / "step0" / "rank0") if r["api"] == "exp")
    assert exp["outputs"][0]["max"] == 1.0 and "error" not in exp["outputs"][0]


def test_a_call_that_returns_its_input_has_no_backward_of_its_own(tmp_path) -> None:
    x = torch.randn(3, requires_grad=True)
    with ts.dump.Debugger(dump_path=str(tmp_path)):
        torch.exp(x).contiguous().float().sum().backward()
    got = names(tmp_path / "step0" / "rank0")
    assert "Torch_exp_0_backward" in got
    assert "Tensor_contiguous_0_backward" not in got and "Tensor_float_0_backward" not in got


def test_a_range_given_by_backward_names(tmp_path) -> None:
    x = torch.randn(3, requires_grad=True)
    scope = ["Torch_tanh_0_backward", "Torch_exp_0_backward"]
    with ts.dump.Debugger(dump_path=str(tmp_path), scope=scope):
        torch.tanh(torch.exp(x)).sum().backward()
    assert names(tmp_path / "step0" / "rank0") == scope


def test_dumping_again_into_the_same_folder_replaces_the_earlier_dump(tmp_path) -> None:
    for _ in range(2):
        with ts.dump.Debugger(dump_path=str(tmp_path)):
            torch.exp(torch.zeros(1))
    assert [r["name"] for r in records(tmp_path / "step0" / "rank0") if r["api"] == "exp"] == [
        "Torch_exp_0_forward"
    ]


def test_module_level_records_each_modules_parameter_gradients(tmp_path) -> None:
    net = SmallNet()
    debugger = ts.dump.Debugger(dump_path=str(tmp_path), level="L0")
    debugger.start(net)
    net(torch.randn(2, 3, 6, 6)).sum().backward()
    debugger.stop()
    got = records(tmp_path / "step0" / "rank0")
    assert not any(r["prefix"] != "Module" for r in got)  # L0: module calls only
    conv = next(r for r in got if r["name"] == "Module.conv.Conv2d.parameters_grad.0")
    weight = next(e for e in conv["outputs"] if e["name"].endswith(".weight"))
    assert weight["max"] == pytest.approx(float(net.conv.weight.grad.max()))
    assert {r["name"] for r in got} >= {"Module.conv.Conv2d.forward.0", "Module.SmallNet.forward.0"}


def test_a_module_that_raised_does_not_claim_the_calls_of_the_next_one(tmp_path) -> None:
    class Failing(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            torch.exp(x)
            raise ValueError("this layer fails")

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bad, self.good = Failing(), nn.Tanh()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            try:
                return self.bad(x)
            except ValueError:
                return self.good(x)  # the user's fallback

    net = Net()
    debugger = ts.dump.Debugger(dump_path=str(tmp_path))
    debugger.start(net)
    net(torch.zeros(2))
    debugger.stop()
    keys = {r["name"]: r["key"] for r in records(tmp_path / "step0" / "rank0")}
    assert keys["Torch_exp_0_forward"] == "bad#0/Torch.exp#0"
    assert keys["Torch_tanh_0_forward"] == "good#0/Torch.tanh#0"


def test_the_dump_keeps_no_activation_alive(tmp_path) -> None:
    import gc
    import weakref

    debugger = ts.dump.Debugger(dump_path=str(tmp_path), task="tensor")
    debugger.start()
    y = torch.sin(torch.ones(1000))
    gone = weakref.ref(y)
    z = torch.cos(y)  # y is cos's input: its file is reused through the recorder's weak entry
    del y
    gc.collect()
    assert gone() is None  # the recorder does not hold it
    torch.exp(z)
    debugger.stop()
    files = {r["name"]: r["inputs"][0].get("file") for r in records(tmp_path / "step0" / "rank0")}
    assert files["Torch_cos_0_forward"] == "tensors/Torch_sin_0_forward_output.npy"
    assert files["Torch_exp_0_forward"] == "tensors/Torch_cos_0_forward_output.npy"


def test_inf_and_nan_statistics_are_strict_json_and_read_back_as_floats(tmp_path) -> None:
    """An overflow is what a user dumps for: inf and nan must survive, in JSON that any parser reads."""
    x = torch.tensor([1.0, float("inf"), 2.0])
    with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1"):
        y = x - x  # inf - inf: nan
        torch.clamp(x, max=float("inf"))
    folder = tmp_path / "step0" / "rank0"

    def no_constants(text: str) -> float:
        raise AssertionError(f"non-standard JSON constant {text} in the dump")

    for line in (folder / "dump.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=no_constants)
    sub = next(r for r in records(folder) if r["api"] == "sub")
    first, out = sub["inputs"][0], sub["outputs"][0]
    assert (first["max"], first["min"], first["norm"]) == (float("inf"), 1.0, float("inf"))
    assert all(np.isnan(out[key]) for key in ("max", "min", "mean", "norm"))
    assert torch.isnan(y)[1]  # nan propagates into every statistic
    clamp = next(r for r in records(folder) if r["api"] == "clamp")
    assert next(e for e in clamp["inputs"] if e["name"].endswith("max"))["value"] == float("inf")


def test_every_step_writes_the_stacks_its_records_name(tmp_path) -> None:
    """Stacks are worked out once per debugger, but each step's stack.jsonl holds all it refers to."""
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    debugger = ts.dump.Debugger(dump_path=str(tmp_path), task="statistics")
    for _ in range(2):
        debugger.start(net)
        net(torch.ones(2, 4)).sum().backward()
        debugger.step()
    debugger.close()
    per_step = []
    for step in (0, 1):
        folder = tmp_path / f"step{step}" / "rank0"
        stacks = {s["id"]: s["stack"] for s in read_lines(str(folder / "stack.jsonl"))}
        named = {r["stack"] for r in records(folder) if r["stack"] is not None}
        assert named and named <= set(stacks), step
        assert any("test_every_step_writes_the_stacks" in line for s in stacks.values() for line in s)
        per_step.append(stacks)
    assert per_step[0] == per_step[1]  # the same calls, the same stacks, in both steps' files
