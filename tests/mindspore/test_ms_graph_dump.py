"""Graph mode through MindSpore's own dump: kernel records in the usual layout, the step unchanged.

Each case runs ``graph_step.py`` in a fresh process: MindSpore reads its dump configuration once
per process, when it compiles its first graph.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tscore.dump_compare import compare_dumps
from tscore.dump_format.reading import dump_folders, read_lines

STEP = Path(__file__).with_name("graph_step.py")


def run(case: str, out: Path, scale: float = 1.0) -> tuple[list[float], str]:
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, str(STEP), case, str(out), str(scale)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=out,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "losses.json").read_text()), done.stderr


@pytest.fixture(scope="module")
def dumped(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("graph") / "same"


@pytest.fixture(scope="module")
def runs(dumped) -> dict[str, list[float]]:
    return {"dump": run("dump", dumped)[0], "plain": run("plain", dumped.with_name("plain"))[0]}


def records(folder: Path) -> list[dict]:
    return list(read_lines(str(folder / "dump.jsonl")))


def test_a_graph_mode_step_is_dumped_kernel_by_kernel_and_computes_the_same(runs, dumped) -> None:
    assert runs["dump"] == runs["plain"]  # the losses of both steps, bit for bit
    folders = dump_folders(str(dumped / "dump"))
    assert [Path(f).relative_to(dumped / "dump").as_posix() for f in folders] == [
        "step0/rank0",
        "step1/rank0",
    ]
    step0 = records(Path(folders[0]))
    calls = [r["call"] for r in step0]
    # the layers' kernels in execution order, named by type and numbered per type and direction
    assert calls[:5] == [
        "Kernel.MatMul.0.forward",
        "Kernel.BiasAdd.0.forward",
        "Kernel.ReLU.0.forward",
        "Kernel.MatMul.1.forward",
        "Kernel.BiasAdd.1.forward",
    ]
    assert any(r["direction"] == "backward" and r["api"] == "ReluGrad" for r in step0)
    first = step0[0]
    assert first["module"] == "network._backbone.0" and first["kernel"].endswith("0-Dense/MatMul-op0")
    # its weight operand is named as the network's parameter, its activation is not
    assert [e.get("parameter") for e in first["inputs"] if e["type"] == "tensor"][:2] == [None, "0.weight"]
    # every tensor's statistics are those of its file (task="tensor": MindSpore's file moved in)
    for entry in first["inputs"] + first["outputs"]:
        values = np.load(Path(folders[0]) / entry["file"]).astype(np.float64)
        assert entry["max"] == pytest.approx(values.max()) and entry["mean"] == pytest.approx(values.mean())
    info = json.loads((Path(folders[0]) / "dump_info.json").read_text())
    assert info["recorded_frameworks"] == ["mindspore"] and "kernel records" in info["native_dump"]
    # what MindSpore wrote was read and removed: no second copy of every tensor is left
    assert not list((dumped / "dump" / "native_dump").rglob("*.npy"))


def test_two_graph_mode_dumps_compare_and_name_the_planted_kernel(runs, dumped) -> None:
    planted = dumped.with_name("planted")
    run("dump", planted, scale=3.0)
    report = compare_dumps(
        str(planted / "dump" / "step0" / "rank0"), str(dumped / "dump" / "step0" / "rank0")
    )
    assert not report.passed
    # the second Dense's MatMul is the first kernel that differs, and through its weight: the graph
    # MindSpore saved says which kernel inputs are the network's parameters
    first = report.first_error
    assert first is not None and first.target_call == "Kernel_MatMul_1_forward" and first.status == "weights"
    assert "Kernel_MatMul_1_forward_input.1" in first.reason and "same weights" in first.reason
    assert "Kernel_MatMul_1_forward" in report.summary()
    same = compare_dumps(str(dumped / "dump" / "step1" / "rank0"), str(dumped / "dump" / "step1" / "rank0"))
    assert same.passed


def test_a_graph_compiled_before_the_dump_is_said_not_silently_empty(tmp_path) -> None:
    _, stderr = run("late", tmp_path)
    info = json.loads((tmp_path / "dump" / "step0" / "rank0" / "dump_info.json").read_text())
    assert "start the debugger before the first graph-mode call" in info["native_dump"]
    assert "wrote nothing" in stderr


def test_a_step_run_between_two_dumped_steps_is_not_put_in_the_second(tmp_path) -> None:
    run("gap", tmp_path)
    first, second = (records(tmp_path / "dump" / f"step{k}" / "rank0") for k in (0, 1))
    assert len(first) == len(second) > 0
    assert {r["iteration"] for r in first} == {0} and {r["iteration"] for r in second} == {2}
    assert not list((tmp_path / "dump" / "native_dump").rglob("*.npy"))  # the middle one removed too


def test_only_the_steps_asked_for_are_dumped_though_the_dump_is_armed_at_the_first(tmp_path) -> None:
    losses, _ = run("step1", tmp_path)
    assert len(losses) == 2 and not (tmp_path / "dump" / "step0").exists()
    second = records(tmp_path / "dump" / "step1" / "rank0")
    assert second and {r["iteration"] for r in second} == {1}


def test_kernels_whose_names_are_too_long_for_a_file_are_read_through_mindspores_mapping(tmp_path) -> None:
    run("deep", tmp_path)
    got = records(tmp_path / "dump" / "step0" / "rank0")
    matmul = next(r for r in got if r["call"] == "Kernel.MatMul.0.forward")
    assert matmul["module"].endswith("a_rather_long_attribute_name_for_a_sub_cell") and matmul["outputs"]


def test_the_overflow_check_is_refused_in_graph_mode_with_what_to_do(tmp_path) -> None:
    run("overflow", tmp_path)
    message = (tmp_path / "error.txt").read_text()
    assert "PyNative" in message and "graph mode" in message
