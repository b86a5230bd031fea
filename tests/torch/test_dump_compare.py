"""Comparing dumps on real torch runs and real msprobe 26.2 dumps: pairing, verdicts, files, ranks."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tscore as ts
from tests.data.msprobe_net import build, make_inputs, train_step
from tscore.cli import main
from tscore.dump_compare import DumpReadError, compare_dumps, read_dump
from tscore.errors import TargetPathError
from tscore.ptdbg import compare, compare_distributed

MSPROBE = Path(__file__).resolve().parents[1] / "data" / "msprobe_26.2"


def dump(folder: Path, task: str = "statistics", perturb: str | None = None, rank: int | None = None) -> Path:
    """One training step of the msprobe test net, dumped by tscore at L1; returns the step/rank folder."""
    net = build(0, perturb)
    x, y = make_inputs(0)
    with ts.dump.Debugger(task=task, dump_path=str(folder), level="L1", rank_id=rank):
        train_step(net, x, y)
    return folder / "step0" / f"rank{rank or 0}"


class SmallNet(torch.nn.Module):
    """Two linear layers; a leaky ReLU whose slope is an option; an extra call that changes nothing."""

    def __init__(self, slope: float = 0.01, extra_relu: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.fc2 = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)
        self.slope, self.extra_relu = slope, extra_relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        if self.extra_relu:
            h = torch.relu(h)  # one more call, and every later relu is numbered one higher
        h = torch.tanh(self.fc2(F.leaky_relu(h - 0.5, negative_slope=self.slope)))
        return torch.relu(h)


def dump_small(folder: Path, task: str = "tensor", **options: object) -> Path:
    net = SmallNet(**options)  # type: ignore[arg-type]
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    with ts.dump.Debugger(task=task, dump_path=str(folder), level="L1"):
        net(x).sum().backward()
    return folder / "step0" / "rank0"


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_the_same_run_twice_agrees_call_for_call(tmp_path, task) -> None:
    report = compare_dumps(dump(tmp_path / "a", task), dump(tmp_path / "b", task))
    assert report.passed and report.first_error is None
    assert {v.status for v in report.calls} == {"ok"} and len(report.calls) == 14
    assert report.basis == task
    if task == "tensor":
        assert all(r.cosine == 1.0 and r.max_abs_err == 0.0 for r in report.rows if r.basis == "tensor")


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_perturbed_weights_are_named_at_the_first_call_that_uses_them(tmp_path, task) -> None:
    report = compare_dumps(dump(tmp_path / "p", task, "conv2"), dump(tmp_path / "b", task))
    first = report.first_error
    assert first is not None and first.target_call == "Functional_conv2d_1_forward"
    assert first.status == "weights" and "input.1" in first.reason
    assert first.where is not None and first.where.startswith(
        str(Path("tests/data/msprobe_net.py").resolve())
    )
    statuses = [v.status for v in report.calls]
    assert statuses[:2] == ["ok", "ok"]  # conv2d_0 and relu_0 are before the perturbed weight
    assert "own" not in statuses  # everything after it only inherits
    assert (first.basis == "statistics") is (task == "statistics")
    assert (
        "less certain" in report.summary() if task == "statistics" else "less certain" not in report.summary()
    )


def test_an_api_called_with_another_option_is_its_own_error_and_what_follows_inherits(tmp_path) -> None:
    report = compare_dumps(dump_small(tmp_path / "steep", slope=0.2), dump_small(tmp_path / "plain"))
    first = report.first_error
    assert (
        first is not None and first.target_call == "Functional_leaky_relu_0_forward" and first.status == "own"
    )
    assert "0.2 vs 0.01" in first.reason
    forward = [v for v in report.calls if v.direction == "forward"]
    before = forward[: [v.target_call for v in forward].index(first.target_call)]
    assert before and all(v.status == "ok" for v in before)
    assert next(v for v in forward if v.target_call == "Functional_linear_1_forward").status == "inherited"


class Halves(torch.nn.Module):
    """Rotates the halves of its input: ``cat(-x[..., h:], x[..., :h])``, or with the halves mixed up."""

    def __init__(self, mixed_up: bool = False) -> None:
        super().__init__()
        self.mixed_up = mixed_up

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        if self.mixed_up:
            low, high = x[..., half:], x[..., :half]
        else:
            low, high = x[..., :half], x[..., half:]
        return torch.cat((-high, low), dim=-1)


def test_an_index_is_compared_as_a_value_and_one_that_differs_is_named(tmp_path) -> None:
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(2))
    folders = []
    for mixed_up in (True, False):
        folder = tmp_path / str(mixed_up)
        with ts.dump.Debugger(task="statistics", dump_path=str(folder), level="L1"):
            Halves(mixed_up)(x)
        folders.append(folder / "step0" / "rank0")
    report = compare_dumps(*folders)
    rows = {r.target_name: r for r in report.rows}
    index = rows["Tensor___getitem___0_forward_input.1.1"]  # the slice after the ellipsis
    assert index.basis == "value" and "[4, None, None] vs [None, 4, None]" in index.message
    first = report.first_error
    assert first is not None and first.target_call == "Tensor___getitem___0_forward", report.summary()
    assert first.status == "own" and "an argument differs" in first.reason
    assert rows["Tensor___getitem___0_forward_input.1.0"].message == ""  # the ellipsis, the same


def test_one_extra_call_shifts_nothing_else(tmp_path) -> None:
    report = compare_dumps(dump_small(tmp_path / "extra", extra_relu=True), dump_small(tmp_path / "plain"))
    unpaired = sorted(v.target_call or "" for v in report.calls if v.status == "unpaired")
    # the two first relus look alike (same shapes, same values): either may be the extra one
    assert unpaired in (
        ["Torch_relu_0_backward", "Torch_relu_0_forward"],
        ["Torch_relu_1_backward", "Torch_relu_1_forward"],
    )
    assert report.passed and report.first_error is None
    # the last relu is relu_2 in one run and relu_1 in the other: paired by alignment, and agreeing
    last = next(v for v in report.calls if v.target_call == "Torch_relu_2_forward")
    assert (last.orig_call, last.how, last.status) == ("Torch_relu_1_forward", "aligned", "ok")


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_real_msprobe_dumps_compare_with_each_other_and_with_tscore(tmp_path, task) -> None:
    base, perturbed = MSPROBE / task / "base/step0/rank0", MSPROBE / task / "perturbed/step0/rank0"
    assert read_dump(base).format == "msprobe" and read_dump(base).task == task
    between = compare_dumps(perturbed, base)
    assert (
        between.first_error is not None and between.first_error.target_call == "Functional_conv2d_1_forward"
    )
    ours = dump(tmp_path / "ours", task)
    same = compare_dumps(base, ours)  # msprobe's run against tscore's of the same step
    assert same.passed, same.summary()
    assert (same.target_label, same.orig_label) == ("msprobe dump, pytorch", "tscore dump, torch on cpu")
    paired = [v for v in same.calls if v.status != "unpaired"]
    assert len(paired) == 12 and all(v.status == "ok" for v in paired)
    # msprobe does not dump torch.flatten: tscore's two flatten calls are rows without a partner
    assert sorted(v.orig_call or "" for v in same.calls if v.status == "unpaired") == [
        "Torch_flatten_0_backward",
        "Torch_flatten_0_forward",
    ]
    if task == "tensor":  # values read from msprobe's .pt files and tscore's .npy files
        assert sum(r.basis == "tensor" for r in same.rows) >= 30
    # requires_grad as msprobe records it: tscore's dump says the same of every tensor both have
    grads = [
        (r.target_requires_grad, r.orig_requires_grad) for r in same.rows if r.orig_requires_grad is not None
    ]
    assert len(grads) >= 20 and all(a == b for a, b in grads if a is not None)
    assert {b for _, b in grads} == {True, False}  # the data (False) and the weights and activations (True)
    crossed = compare_dumps(perturbed, ours)
    assert crossed.first_error is not None and crossed.first_error.status == "weights"


def write_ptdbg_layout(source: Path, folder: Path) -> Path:
    """Lay a tscore tensor dump out as ptdbg_ascend 2.x does (its .pkl and one .npy per tensor name).

    ptdbg_ascend itself cannot run here (it needs torch_npu); the layout follows spec 004 and its source.
    """
    folder.mkdir(parents=True)
    pkl, data = folder / "npu_dump.pkl", folder / "npu_dump_data"  # spec 004 names it apart
    data.mkdir()
    with open(pkl, "w", encoding="utf-8") as out:
        for record in read_dump(source).calls:
            for item in record.items:
                if not item.is_tensor or item.file is None:
                    continue
                np.save(data / f"{item.name}.npy", np.load(item.file))
                summary = [item.stats[0], item.stats[1], item.stats[2]] if item.stats else [[], [], []]
                out.write(
                    json.dumps([item.name, 0, [], f"torch.{item.dtype}", list(item.shape), summary]) + "\n"
                )
    return pkl


def test_ptdbg_compare_with_its_keys_writes_its_csv_and_advisor(tmp_path) -> None:
    npu_pkl = write_ptdbg_layout(dump(tmp_path / "p", "tensor", "conv2"), tmp_path / "ptdbg")
    bench = dump(tmp_path / "b", "tensor")
    out = tmp_path / "output"
    out.mkdir()
    report = compare(
        {
            "npu_pkl_path": str(npu_pkl),
            "npu_dump_data_dir": str(npu_pkl.parent / "npu_dump_data"),
            "bench_pkl_path": str(bench / "dump.jsonl"),
            "bench_dump_data_dir": str(bench / "tensors"),
            "is_print_compare_log": True,
        },
        str(out),
        True,
    )
    assert report.target_format == "ptdbg" and report.basis == "tensor"
    assert report.first_error is not None and report.first_error.target_call == "Functional_conv2d_1_forward"
    names = sorted(os.listdir(out))
    assert names[0].startswith("advisor_") and names[1].startswith("compare_result_")
    with open(out / names[1], encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    header = list(rows[0])
    assert header[:8] == [
        "NPU Name",
        "Bench Name",
        "NPU Tensor Dtype",
        "Bench Tensor Dtype",
        "NPU Tensor Shape",
        "Bench Tensor Shape",
        "Cosine",
        "EucDist",
    ]
    weight = next(r for r in rows if r["NPU Name"] == "Functional_conv2d_1_forward_input.1")
    assert weight["Accuracy Reached or Not"] == "No" and float(weight["Cosine"]) < 0.99
    advisor = (out / names[0]).read_text().splitlines()
    assert advisor[0].startswith("Line: ") and advisor[1] == "Suspect Nodes: Functional_conv2d_1_forward"
    assert advisor[2].startswith("Expert Advice: The two runs do not hold the same weights")


def test_bad_input_is_a_clear_error_or_a_row(tmp_path) -> None:
    with pytest.raises(DumpReadError, match="no dump in"):
        compare_dumps(tmp_path, tmp_path)
    a, b = dump(tmp_path / "a", "tensor"), dump(tmp_path / "b", "tensor")
    with pytest.raises(TargetPathError, match="not an existing folder"):
        compare_dumps(a, b, tmp_path / "missing")
    # a run killed mid-write: the last line cut short; a tensor file gone
    with open(a / "dump.jsonl", "rb+") as stream:
        stream.seek(-40, os.SEEK_END)
        stream.truncate()
    gone = next((a / "tensors").iterdir())
    gone.unlink()
    report = compare_dumps(a, b)
    assert any("tensor not read" in r.message and "No such file" in r.message for r in report.rows)
    assert [v.status for v in report.calls].count("unpaired") == 1  # the cut record's call
    assert report.passed


def test_compare_distributed_pairs_ranks_and_refuses_unequal_counts(tmp_path) -> None:
    for side in ("npu", "bench"):
        for rank in (0, 1):
            dump(tmp_path / side, "statistics", "conv2" if side == "npu" and rank == 1 else None, rank)
    out = tmp_path / "out"
    out.mkdir()
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        reports = compare_distributed(str(tmp_path / "npu"), str(tmp_path / "bench"), str(out), executor=pool)
    assert [r.passed for r in reports] == [True, False]
    assert sorted(f for f in os.listdir(out) if f.endswith(".csv"))[0].startswith(
        "compare_result_rank0-rank0_"
    )
    local = compare_distributed(str(tmp_path / "npu"), str(tmp_path / "bench"), str(out))  # local processes
    assert [r.first_error.target_call if r.first_error else None for r in local] == [
        None,
        "Functional_conv2d_1_forward",
    ]
    dump(tmp_path / "npu", "statistics", rank=2)
    with pytest.raises(DumpReadError, match=r"3 rank folders .* but 2"):
        compare_distributed(str(tmp_path / "npu"), str(tmp_path / "bench"), str(out))


def test_compare_distributed_on_a_dask_local_cluster(tmp_path) -> None:
    import distributed  # a test dependency: CI installs it

    for side in ("npu", "bench"):
        for rank in (0, 1):
            dump(tmp_path / side, "tensor", "conv2" if side == "npu" and rank == 1 else None, rank)
    out = tmp_path / "out"
    out.mkdir()
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        with distributed.Client(cluster) as client:
            reports = compare_distributed(
                str(tmp_path / "npu"), str(tmp_path / "bench"), str(out), client=client
            )
    # rank 1 of the NPU run holds the perturbed weight: its pair, and only its pair, says so from the tensors
    assert [r.passed for r in reports] == [True, False]
    assert (
        reports[1].basis == "tensor" and reports[1].first_error.target_call == "Functional_conv2d_1_forward"
    )
    assert sorted(f for f in os.listdir(out) if f.endswith(".csv"))[:2] == sorted(
        f for f in os.listdir(out) if f.startswith("compare_result_rank")
    )
    summary = next(out.glob("compare_summary_*.csv")).read_text().splitlines()
    assert len(summary) == 3 and summary[2].split(",")[2:4] == ["no", "Functional_conv2d_1_forward"]


def test_dump_compare_command_exit_codes(tmp_path, capsys) -> None:
    a, b = dump(tmp_path / "a"), dump(tmp_path / "b")
    p = dump(tmp_path / "p", perturb="conv2")
    assert main(["dump-compare", str(a), str(b)]) == 0
    assert main(["dump-compare", str(p), str(b), "-o", str(tmp_path / "o")]) == 1
    assert "Functional_conv2d_1_forward" in capsys.readouterr().out
    assert main(["dump-compare", str(tmp_path / "nothing"), str(b)]) == 2
    assert main(["dump-compare", str(p), str(b), "--json", "-"]) == 1
    assert json.loads(capsys.readouterr().out)["first_error"]["status"] == "weights"


@pytest.mark.parametrize(
    "tensor",
    [
        torch.randn(3, 4),
        torch.randn(4, 6)[1:, ::2],  # a view: offset and strides into a larger storage
        torch.randn(5).to(torch.bfloat16),
        torch.randn(2, 2).half(),
        torch.arange(7, dtype=torch.int64),
        torch.tensor([True, False]),
        torch.tensor(3.5),
        torch.zeros(0, 3),
    ],
    ids=["f32", "view", "bf16", "f16", "i64", "bool", "0d", "empty"],
)
def test_msprobes_pt_files_read_without_torch_equal_torch_load(tmp_path, tensor) -> None:
    from tscore.checkpoint.torch_zip import read_torch_tensor

    path = tmp_path / "t.pt"
    torch.save(tensor, path)
    ours = read_torch_tensor(str(path))
    theirs = torch.load(path, weights_only=True)
    assert ours.shape == tuple(theirs.shape)
    expected = theirs.float().numpy() if theirs.dtype == torch.bfloat16 else theirs.numpy()
    assert np.array_equal(np.asarray(ours, dtype=expected.dtype), expected)
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")


def test_a_pt_file_holding_more_than_a_tensor_is_refused_by_the_torch_free_reader(tmp_path) -> None:
    from tscore.checkpoint.torch_zip import TorchZipError, read_torch_tensor

    torch.save({"w": torch.ones(2)}, tmp_path / "d.pt")
    with pytest.raises(TorchZipError, match="not one tensor"):
        read_torch_tensor(str(tmp_path / "d.pt"))
    torch.save(torch.nn.Linear(2, 2), tmp_path / "m.pt")
    with pytest.raises(TorchZipError, match=r"torch\.nn\.modules"):
        read_torch_tensor(str(tmp_path / "m.pt"))


def test_parse_reads_msprobes_dump_too(capsys) -> None:
    from tscore.ptdbg import parse

    found = parse(str(MSPROBE / "statistics/base/step0/rank0/dump.json"), "Functional.conv2d.1.forward")
    assert [r["name"] for r in found] == ["Functional_conv2d_1_forward"]
    shown = capsys.readouterr().out
    assert "Trace back(Functional_conv2d_1_forward)" in shown and "msprobe_net.py, line 28" in shown
    assert "[dtype: float32][shape: [2, 4, 6, 6]]" in shown
