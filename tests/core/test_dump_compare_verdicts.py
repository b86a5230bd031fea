"""The dump comparison's judgement on dumps written here in tscore's format (numpy only, no framework).

Each dump is a chain of calls ``x -> f0 -> f1 -> ...``: one call's output is the
next one's input, as in a network. Planting a difference at one call must name
that call, and only that one, as the first with an error of its own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tscore.dump_compare import compare_distributed, compare_dumps

APIS = ("conv2d", "relu", "linear", "tanh", "add")


def chain(values: list[np.ndarray]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Calls i = 0..n-1, each reading values[i] and writing values[i + 1]."""
    return [(APIS[i % len(APIS)], values[i], values[i + 1]) for i in range(len(values) - 1)]


def write_dump(folder: Path, calls: list[tuple[str, np.ndarray, np.ndarray]], tensors: bool = True) -> Path:
    """Write a tscore dump (records, and .npy files when ``tensors``) of forward calls."""
    (folder / "tensors").mkdir(parents=True)
    counts: dict[str, int] = {}
    with open(folder / "dump.jsonl", "w", encoding="utf-8") as out:
        for api, x, y in calls:
            index = counts.get(api, 0)
            counts[api] = index + 1
            name = f"Functional_{api}_{index}_forward"

            def entry(side: str, value: np.ndarray, name: str = name) -> dict:
                tensor_name = f"{name}_{side}" + (".0" if side == "input" else "")
                found = {
                    "name": tensor_name,
                    "type": "tensor",
                    "dtype": "float32",
                    "shape": list(value.shape),
                    "max": float(np.max(value)),
                    "min": float(np.min(value)),
                    "mean": float(np.mean(value)),
                    "norm": float(np.linalg.norm(value)),
                }
                if tensors:
                    np.save(folder / "tensors" / f"{tensor_name}.npy", value)
                    found["file"] = f"tensors/{tensor_name}.npy"
                return {
                    k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
                    for k, v in found.items()
                }

            record = {
                "name": name,
                "prefix": "Functional",
                "api": api,
                "index": index,
                "direction": "forward",
                "module": "net",
                "key": f"net#0/{api}#{index}",
                "inputs": [entry("input", x)],
                "outputs": [entry("output", y)],
            }
            out.write(json.dumps(record) + "\n")
    task = "tensor" if tensors else "statistics"
    (folder / "dump_info.json").write_text(json.dumps({"config": {"task": task}, "rank": 0}))
    return folder


def values(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(64).astype(np.float32) for _ in range(n)]


@pytest.mark.parametrize("tensors", [True, False], ids=["tensors", "statistics"])
def test_a_call_whose_outputs_differ_while_its_inputs_agree_is_the_first_own_error(tmp_path, tensors) -> None:
    good = values(7)
    bad = [v.copy() for v in good]
    for later in range(3, 7):  # call 2 computes wrongly; every later value inherits it
        bad[later] = bad[later] * np.float32(1.5) + np.float32(0.1)
    report = compare_dumps(
        write_dump(tmp_path / "bad", chain(bad), tensors), write_dump(tmp_path / "good", chain(good), tensors)
    )
    assert [v.status for v in report.calls] == ["ok", "ok", "own", "inherited", "inherited", "inherited"]
    assert report.first_error is not None and report.first_error.target_call == "Functional_linear_0_forward"
    assert not report.passed


def test_an_output_ten_times_worse_than_its_inputs_is_its_own_error(tmp_path) -> None:
    good = values(5)
    bad = [v.copy() for v in good]
    bad[2] = bad[2] * np.float32(1.0 + 1e-3)  # call 1 sees inputs off by 1e-3 ...
    bad[3] = bad[3] * np.float32(1.1)  # ... and call 2's outputs are off by 1e-1
    bad[4] = bad[4] * np.float32(1.1)
    report = compare_dumps(write_dump(tmp_path / "b", chain(bad)), write_dump(tmp_path / "g", chain(good)))
    statuses = [v.status for v in report.calls]
    assert statuses[1] == "inherited" or statuses[1] == "own"  # 1e-3 at the tolerance's edge
    assert statuses[2] == "own" and report.calls[2].amplified and statuses[3] == "inherited"


def test_when_every_call_inherits_the_advisor_names_the_first_failing_call(tmp_path) -> None:
    good = values(4)
    bad = [v + np.float32(1.0) for v in good]  # the inputs of the first dumped call already differ
    out = tmp_path / "out"
    out.mkdir()
    report = compare_dumps(
        write_dump(tmp_path / "b", chain(bad)), write_dump(tmp_path / "g", chain(good)), out
    )
    assert report.first_error is None and not report.passed
    assert "the first that differs, Functional_conv2d_0_forward" in report.summary()
    advisor = next(out.glob("advisor_*.txt")).read_text().splitlines()
    assert advisor[1] == "Suspect Nodes: Functional_conv2d_0_forward"
    assert "meets the accuracy requirements" not in advisor[2]


def test_nan_at_other_positions_is_a_difference_and_nan_at_the_same_ones_is_not(tmp_path) -> None:
    good = values(3)
    same_nan = [v.copy() for v in good]
    moved_nan = [v.copy() for v in good]
    for chain_values in (good, same_nan):
        chain_values[2][0] = np.nan
    moved_nan[2][1] = np.nan
    bench = write_dump(tmp_path / "good", chain(good))
    agree = compare_dumps(write_dump(tmp_path / "same", chain(same_nan)), bench)
    assert agree.passed
    differ = compare_dumps(write_dump(tmp_path / "moved", chain(moved_nan)), bench)
    row = next(r for r in differ.rows if r.target_name == "Functional_relu_0_forward_output")
    assert row.accuracy == "No" and row.error == math.inf and "NaN/inf differ" in row.message
    assert differ.first_error is not None and differ.first_error.target_call == "Functional_relu_0_forward"


def test_a_call_only_the_bench_run_made_sits_in_execution_order_and_changes_no_verdict(tmp_path) -> None:
    good = values(5)
    npu_calls = chain(good)
    bench_calls = [
        *npu_calls[:2],
        ("add", good[2], good[2]),
        *npu_calls[2:],
    ]  # one more call in the bench run
    report = compare_dumps(write_dump(tmp_path / "n", npu_calls), write_dump(tmp_path / "b", bench_calls))
    order = [(v.target_call, v.orig_call, v.status) for v in report.calls]
    assert order[2] == (None, "Functional_add_0_forward", "unpaired")
    assert [s for _, _, s in order if s != "unpaired"] == ["ok"] * 4
    assert order[3][:2] == ("Functional_linear_0_forward", "Functional_linear_0_forward")


def test_a_missing_tensor_file_falls_back_to_the_statistics_and_never_claims_agreement_unseen(
    tmp_path,
) -> None:
    good = values(3)
    bad = [v.copy() for v in good]
    bad[2] = bad[2] * np.float32(2)
    npu = write_dump(tmp_path / "n", chain(bad))
    bench = write_dump(tmp_path / "b", chain(good))
    for file in (npu / "tensors").glob("Functional_relu_0_forward_output*.npy"):
        file.unlink()
    report = compare_dumps(npu, bench)
    row = next(r for r in report.rows if r.target_name == "Functional_relu_0_forward_output")
    assert row.basis == "statistics" and "compared by its statistics" in row.message and row.accuracy == "No"
    assert report.first_error is not None and report.first_error.target_call == "Functional_relu_0_forward"


def test_compare_distributed_accepts_msprobes_proc_folder_and_reports_a_bad_rank_in_its_summary(
    tmp_path,
) -> None:
    good = values(3)
    for side in ("npu", "bench"):
        write_dump(tmp_path / side / "step0" / "proc4242", chain(good))
    out = tmp_path / "out"
    out.mkdir()
    reports = compare_distributed(str(tmp_path / "npu"), str(tmp_path / "bench"), str(out), shape_flag=True)
    assert [r.passed for r in reports] == [True]
    assert next(out.glob("compare_result_proc4242-proc4242_*.csv"))
    # two ranks, one of them an empty folder: its line says why, the other rank is compared
    for side in ("npu", "bench"):
        write_dump(tmp_path / f"{side}2" / "rank0", chain(good))
        (tmp_path / f"{side}2" / "rank1").mkdir()
    out2 = tmp_path / "out2"
    out2.mkdir()
    reports = compare_distributed(str(tmp_path / "npu2"), str(tmp_path / "bench2"), str(out2))
    assert len(reports) == 1 and reports[0].passed
    summary = next(out2.glob("compare_summary_*.csv")).read_text()
    assert "no dump in" in summary and summary.count("\n") == 3


def test_statistics_drowned_by_a_mask_fill_value_judge_nothing(tmp_path) -> None:
    """An attention score matrix with -3.4e38 where it is masked: its statistics cannot show the rest."""
    good = values(4)
    fill = np.float32(np.finfo(np.float32).min)
    for v in good[2:]:
        v.reshape(-1)[:3] = fill
    bad = [v.copy() for v in good]
    bad[2].reshape(-1)[3:] *= np.float32(4.0)  # the unmasked scores four times too large ...
    bad[3].reshape(-1)[3:] *= np.float32(4.0)
    report = compare_dumps(
        write_dump(tmp_path / "b", chain(bad), tensors=False),
        write_dump(tmp_path / "g", chain(good), tensors=False),
    )
    masked = report.calls[1]  # ... which its mean and norm, both near -1e38, do not show
    assert masked.status == "unknown" and masked.output_error is None, masked
    assert any("fill values near the largest float" in row.message for row in report.rows)
    assert report.calls[0].status == "ok"


@pytest.mark.parametrize("tensors", [True, False], ids=["tensors", "statistics"])
def test_a_call_given_another_value_after_agreeing_calls_is_the_first_suspect(tmp_path, tensors) -> None:
    """Call 2 reads another tensor than its twin (one run made an extra call): named, in both modes."""
    good = values(6)
    calls = chain(good)
    other = good[2] * np.float32(3) + np.float32(1)
    made = np.tanh(other).astype(np.float32)
    changed = [*calls[:2], (APIS[2], other, made), (APIS[3], made, made + 1), (APIS[4], made + 1, made + 2)]
    report = compare_dumps(
        write_dump(tmp_path / "b", changed, tensors=tensors),
        write_dump(tmp_path / "g", calls, tensors=tensors),
    )
    assert [c.status for c in report.calls[:3]] == ["ok", "ok", "own"]
    assert "given another value than its twin" in report.calls[2].reason
    assert report.first_error is not None and report.first_error.target_call == "Functional_linear_0_forward"


@pytest.mark.parametrize("tensors", [True, False], ids=["tensors", "statistics"])
def test_two_calls_of_one_framework_that_swap_their_results_are_never_re_paired_to_hide_it(
    tmp_path, tensors
) -> None:
    """Pairing by values is for two frameworks' orders; in one framework's run the swap is the bug."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(64).astype(np.float32)
    q, k = (x * 2).astype(np.float32), (x * -0.5 + 1).astype(np.float32)
    z = (q * k).astype(np.float32)
    good = [("relu", x, x), ("tanh", x, q), ("tanh", x, k), ("mul", q, z)]
    swapped = [("relu", x, x), ("tanh", x, k), ("tanh", x, q), ("mul", k, z), ("sigmoid", z, z)]
    report = compare_dumps(
        write_dump(tmp_path / "b", swapped, tensors=tensors),
        write_dump(tmp_path / "g", good, tensors=tensors),
    )
    assert not report.passed and all(c.how != "values" for c in report.calls)


def test_the_first_suspect_names_the_call_one_run_made_alone_just_before_it(tmp_path) -> None:
    """The orig run divides between relu and tanh, the target does not: tanh is named, and the division."""
    x = values(1)[0]
    a = np.maximum(x, 0).astype(np.float32)
    half = (a / 2).astype(np.float32)
    orig = [("relu", x, a), ("div", a, half), ("tanh", half, np.tanh(half).astype(np.float32))]
    target = [("relu", x, a), ("tanh", a, np.tanh(a).astype(np.float32))]
    report = compare_dumps(write_dump(tmp_path / "b", target), write_dump(tmp_path / "g", orig))
    first = report.first_error
    assert first is not None and first.target_call == "Functional_tanh_0_forward", report.summary()
    assert (
        "made by one run alone since the last call that agreed: Functional_div_0_forward (orig only)"
        in first.reason
    )


def _as_framework(folder: Path, framework: str, prefixes: dict[str, str] | None = None) -> Path:
    """Say that ``framework`` wrote a dump; move some APIs to another namespace (``{"tanh": "Torch"}``)."""
    info = json.loads((folder / "dump_info.json").read_text())
    (folder / "dump_info.json").write_text(json.dumps({**info, "recorded_frameworks": [framework]}))
    records = [json.loads(line) for line in (folder / "dump.jsonl").read_text().splitlines()]
    for record in records:
        prefix = (prefixes or {}).get(record["api"])
        if prefix is not None:
            old = f"{record['prefix']}_{record['api']}"
            record["prefix"] = prefix
            record["name"] = record["name"].replace(old, f"{prefix}_{record['api']}")
            for entry in record["inputs"] + record["outputs"]:
                entry["name"] = entry["name"].replace(old, f"{prefix}_{record['api']}")
    (folder / "dump.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_a_dump_of_a_framework_running_torchs_api_pairs_by_name_with_no_false_warning(
    tmp_path, caplog
) -> None:
    """mindtorch (msadapter) dumps under torch's names: no table is missing; one namespace moved pairs."""
    good = values(6)  # five APIs, one of them in another namespace
    target = _as_framework(write_dump(tmp_path / "m", chain(good)), "msadapter")
    orig = _as_framework(write_dump(tmp_path / "t", chain(good)), "torch", {"tanh": "Torch"})
    with caplog.at_level("INFO"):
        report = compare_dumps(target, orig)
    assert "no installed plugin names the APIs" not in caplog.text
    assert "their APIs named alike" in caplog.text
    assert report.passed and report.counts().get("unpaired", 0) == 0, report.summary()
    assert ("Functional_tanh_0_forward", "Torch_tanh_0_forward") in {
        (v.target_call, v.orig_call) for v in report.calls
    }
