"""The ts_npu plugin against a FAKE torch_npu (tests/npu/fake_torch_npu): no Ascend NPU exists here.

Every test name says the NPU is faked. The stand-in provides the functions the
plugin calls (the dump switches, the overflow flag, two NPU-only operators) on
CPU tensors, so the plugin's own logic and tscore's use of it run for real;
what the device itself does is not tested.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import torch_npu

import tscore as ts
from tscore.plugins import get_plugin_manager


@pytest.fixture(autouse=True)
def fresh_fake() -> None:
    assert torch_npu.FAKE, "these tests must run against tests/npu/fake_torch_npu, never a real torch_npu"
    torch_npu.calls.clear()
    torch_npu._state.update(flag=False, dump="off")


def test_the_plugin_loads_where_torch_npu_imports_faked_npu() -> None:
    assert "npu" in get_plugin_manager().loaded_names()


def test_npu_only_apis_are_dumped_with_the_npu_prefix_and_put_back_faked_npu(tmp_path) -> None:
    original = torch_npu.npu_fast_gelu
    x = torch.randn(3, 4, requires_grad=True)
    with ts.dump.Debugger(dump_path=str(tmp_path)):
        y = torch_npu.npu_fast_gelu(torch.relu(x))
        y.sum().backward()
    assert torch_npu.npu_fast_gelu is original
    records = [
        json.loads(line) for line in (tmp_path / "step0" / "rank0" / "dump.jsonl").read_text().splitlines()
    ]
    names = [r["name"] for r in records]
    assert "NPU_npu_fast_gelu_0_forward" in names and "NPU_npu_fast_gelu_0_backward" in names
    # torch calls made inside the NPU operator are not recorded again; the relu before it is
    assert names.index("Torch_relu_0_forward") < names.index("NPU_npu_fast_gelu_0_forward")
    assert not any(n.startswith(("Tensor_mul", "Torch_sigmoid")) for n in names), names


def test_a_saturating_npu_overflow_is_found_through_the_flag_faked_npu(tmp_path) -> None:
    torch_npu._state["flag"] = True  # raised before the check started: must not count
    x = torch.full((4, 8), 300.0, dtype=torch.float16)
    w = torch.full((8, 8), 100.0, dtype=torch.float16)
    debugger = ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=-1)
    debugger.start()
    try:
        torch.relu(x)  # finite, no flag
        out = torch_npu.npu_linear(x, w)  # 240000: clamped to 65504, the flag raised
    finally:
        debugger.stop()
    assert torch.isfinite(out).all()  # saturated: nothing in the values says it overflowed
    summary = debugger.overflows[0]
    assert summary.own == 1 and summary.first_own is not None
    assert summary.first_own.call == "NPU.npu_linear.0.forward"
    assert set(summary.first_own.outputs.values()) == {"overflow flag"}
    assert "clear_overflow" in torch_npu.calls and torch_npu._state["flag"] is False


def test_acl_mode_runs_the_named_call_inside_the_acl_dump_faked_npu(tmp_path, monkeypatch) -> None:
    from tscore import ptdbg

    monkeypatch.chdir(tmp_path)
    config = {"dump": {"dump_list": [], "dump_path": "acl_out", "dump_mode": "all", "dump_op_switch": "on"}}
    (tmp_path / "dump.json").write_text(json.dumps(config))
    x = torch.randn(2, 8)
    ptdbg.set_dump_path(str(tmp_path / "npu_dump.pkl"))
    ptdbg.register_hook(None, ptdbg.acc_cmp_dump, dump_mode="acl", dump_config="dump.json")
    ptdbg.set_dump_switch("ON", mode="acl", scope=["NPU_npu_fast_gelu_1_forward"])
    try:
        torch_npu.npu_fast_gelu(x)  # call 0: not named
        torch.relu(x)
        torch_npu.npu_fast_gelu(x)  # call 1: inside the ACL dump
    finally:
        ptdbg.set_dump_switch("OFF")
    calls = [c for c in torch_npu.calls if c != "synchronize"]
    assert calls == [
        "npu_fast_gelu",
        "init_dump",
        f"set_dump {tmp_path / 'dump.json'}",
        "npu_fast_gelu",
        "finalize_dump",
    ]
    assert torch_npu._state["dump"] == "off"


def test_seed_all_seeds_every_npu_and_makes_hccl_deterministic_faked_npu(tmp_path) -> None:
    probe = (
        "import os, torch_npu, tscore as ts; ts.seed_all(7, mode=True); "
        "print(torch_npu.calls, os.environ.get('HCCL_DETERMINISTIC'), os.environ.get('LCCL_DETERMINISTIC'))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HCCL_DETERMINISTIC", "LCCL_DETERMINISTIC")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "['manual_seed_all 7'] true 1"
