"""A dump comparison too big to keep every row: streamed to the CSV, the calls that differ kept.

Beyond :data:`tscore.compare.report.KEEP_ALL_ROWS` rows the comparison keeps the calls
that differ (and their rows) and spools the rest; the CSV and advisor are those of a comparison
that keeps everything, and ``iter_rows()``/``iter_calls()`` give every row and verdict back. The
threshold and the block size are made small here so that a dump of a few hundred calls crosses
them; the figures at 100,000 calls are ``nox -s bench_dump_compare``'s.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from tscore.dump_compare import compare_dumps, row_stream
from tscore.dump_compare.compare import compare_sources
from tscore.dump_compare.sources import read_dump
from tscore.dump_compare.verdicts import CallVerdict

compare_module = importlib.import_module("tscore.dump_compare.compare")  # the package's compare() hides it
CALLS = 300
BROKEN = 120  # the call whose output differs on its own; every later call inherits it
LABEL = f"Functional_relu_{BROKEN}_forward"  # its name in ptdbg's spelling, as verdicts give it


def _tensor(value: float) -> dict:
    return {
        "type": "torch.Tensor",
        "dtype": "torch.float32",
        "shape": [4, 8],
        "Max": value,
        "Min": -value,
        "Mean": value / 10,
        "Norm": value * 4,
        "requires_grad": False,
    }


def write_statistics_dump(folder: Path, broken: bool, extra_at: int | None = None) -> Path:
    """An msprobe statistics dump of a chain of relu calls; ``broken`` shifts call BROKEN's output.

    ``extra_at``: one more relu call there, on a tensor of another shape, which renumbers every later one.
    """
    folder.mkdir(parents=True)
    data = {}
    value = 1.0
    for index in range(CALLS + (extra_at is not None)):
        if index == extra_at:
            extra = {**_tensor(7.0), "shape": [2, 2]}
            data[f"Functional.relu.{index}.forward"] = {"input_args": [extra], "output": [extra]}
            continue
        before = value
        value = before * 1.01 + (0.5 if broken and index == BROKEN else 0.0)
        data[f"Functional.relu.{index}.forward"] = {
            "input_args": [_tensor(before)],
            "input_kwargs": {},
            "output": [_tensor(value)],
        }
    document = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None}
    (folder / "dump.json").write_text(json.dumps({**document, "data": data}, indent=1))
    return folder


@pytest.fixture
def dumps(tmp_path) -> tuple[Path, Path]:
    return (
        write_statistics_dump(tmp_path / "npu" / "rank0", broken=True),
        write_statistics_dump(tmp_path / "bench" / "rank0", broken=False),
    )


def _compare_both_ways(dumps, tmp_path, monkeypatch):
    whole_out, streamed_out = tmp_path / "whole", tmp_path / "streamed"
    whole_out.mkdir()
    streamed_out.mkdir()
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 32)
    whole = compare_dumps(*dumps, whole_out, stack_mode=True)
    monkeypatch.setattr(row_stream, "KEEP_ALL_ROWS", 100)
    monkeypatch.setattr(row_stream, "MAX_FAILED_ROWS", 40)
    streamed = compare_dumps(*dumps, streamed_out, stack_mode=True)
    return whole, streamed


def _file(report, prefix: str) -> str:
    found = next(f for f in report.files if Path(f).name.startswith(prefix))
    with open(found, encoding="utf-8", newline="") as text:  # the CSV's own line ends, \r\n
        return text.read()


def test_a_big_comparison_writes_the_same_files_and_keeps_the_calls_that_differ(dumps, tmp_path, monkeypatch):
    whole, streamed = _compare_both_ways(dumps, tmp_path, monkeypatch)
    assert whole.rows_complete and not streamed.rows_complete
    assert len(whole.rows) == whole.total_rows == streamed.total_rows == 2 * CALLS
    assert _file(whole, "compare_result") == _file(streamed, "compare_result")
    assert _file(whole, "advisor") == _file(streamed, "advisor").replace(
        f"; the report keeps {len(streamed.calls):,} of {CALLS:,} calls, iter_rows() reads all", ""
    )
    assert whole.first_error.target_call == streamed.first_error.target_call == LABEL
    assert whole.counts() == streamed.counts() == {"ok": BROKEN, "own": 1, "inherited": CALLS - BROKEN - 1}
    assert not whole.passed and not streamed.passed
    # kept: the call with its own error, then inherited ones while their rows fit in MAX_FAILED_ROWS
    kept = [v.target_call for v in streamed.calls]
    assert kept[0] == LABEL and len(kept) == 1 + 40 // 2
    assert all(v.status != "ok" for v in streamed.calls)
    for verdict in streamed.calls:  # a kept call's rows are in the report, and they are its own
        assert [streamed.rows[i].target_name.split(".")[2] for i in verdict.rows] == [
            verdict.target_call.split("_")[2]
        ] * 2


def test_every_row_and_verdict_reads_back_in_order(dumps, tmp_path, monkeypatch):
    whole, streamed = _compare_both_ways(dumps, tmp_path, monkeypatch)
    assert list(streamed.iter_rows()) == whole.rows
    assert list(streamed.iter_rows()) == list(streamed.iter_rows())  # each iteration reads the spool anew
    strip = lambda v: (v.target_call, v.status, v.input_error, v.output_error, v.line)  # noqa: E731
    assert [strip(v) for v in streamed.iter_calls()] == [strip(v) for v in whole.calls]
    assert whole.csv_text(True) == streamed.csv_text(True) == _file(whole, "compare_result")
    lines = _file(whole, "compare_result").splitlines()
    first = whole.first_error
    assert lines[first.line - 1].startswith(f"Functional.relu.{BROKEN}.forward.input.0,")


def test_a_comparison_stopped_midway_leaves_no_csv(dumps, tmp_path, monkeypatch):
    target, orig = read_dump(dumps[0]), read_dump(dumps[1])
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 16)
    seen = []

    def judge_then_stop(*args, **kwargs) -> CallVerdict:
        seen.append(1)
        if len(seen) == 40:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    real = compare_module.judge_in_order
    monkeypatch.setattr(compare_module, "judge_in_order", judge_then_stop)
    csv_path = tmp_path / "result.csv"
    with pytest.raises(KeyboardInterrupt):
        compare_sources(target, orig, csv_path=str(csv_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench", "npu"]  # no CSV, no temporary file


def test_statistics_rows_of_a_big_dump_match_numpy(dumps, tmp_path, monkeypatch):
    """The streamed rows carry the same numbers a direct computation gives."""
    _, streamed = _compare_both_ways(dumps, tmp_path, monkeypatch)
    rows = list(streamed.iter_rows())
    outputs = [r for r in rows if r.role == "output"]
    npu = np.array([r.target_stats[0] for r in outputs])
    bench = np.array([r.orig_stats[0] for r in outputs])
    np.testing.assert_allclose([r.stat_diff[0] for r in outputs], npu - bench)


def test_values_read_on_demand_give_what_reading_them_at_once_gives(tmp_path, monkeypatch):
    """compare_dumps reads an msprobe dump's values a block at a time; one extra call still aligns."""
    target = write_statistics_dump(tmp_path / "npu" / "rank0", broken=True, extra_at=200)
    orig = write_statistics_dump(tmp_path / "bench" / "rank0", broken=False)
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 32)
    lazy = read_dump(target, lazy=True)
    assert sum(not c.inputs for c in lazy.calls) > CALLS - 40  # only the first calls hold their values
    lazy.close()
    at_once = compare_sources(read_dump(target), read_dump(orig), csv_path=str(tmp_path / "at_once.csv"))
    out = tmp_path / "out"
    out.mkdir()
    on_demand = compare_dumps(target, orig, out)
    assert on_demand.counts() == at_once.counts()
    assert on_demand.counts()["unpaired"] == 1 and on_demand.first_error.target_call == LABEL
    assert _file(on_demand, "compare_result") == (tmp_path / "at_once.csv").read_bytes().decode()
    extra = next(v for v in on_demand.calls if v.status == "unpaired")
    assert extra.target_call == "Functional_relu_200_forward" and extra.how == "unpaired"


def test_a_big_report_copied_pickled_or_rebuilt_says_where_its_rows_are(dumps, tmp_path, monkeypatch):
    import copy
    import pickle

    _, streamed = _compare_both_ways(dumps, tmp_path, monkeypatch)
    copied = copy.deepcopy(streamed)
    assert list(copied.iter_rows()) == list(streamed.iter_rows())  # the same spool
    for elsewhere in (
        pickle.loads(pickle.dumps(streamed)),
        type(streamed).model_validate_json(streamed.model_dump_json()),
    ):
        assert elsewhere.counts() == streamed.counts() and not elsewhere.passed
        assert elsewhere._spool is None, type(elsewhere._spool)
        assert "the CSV holds all" in elsewhere.summary()
        with pytest.raises(ValueError, match="every row is in its CSV file"):
            list(elsewhere.iter_rows())


def test_a_damaged_dump_json_is_a_clear_error_not_a_silent_misreading(tmp_path):
    from tscore.dump_compare.calls import DumpReadError

    folder = write_statistics_dump(tmp_path / "rank0", broken=False)
    text = (folder / "dump.json").read_text()
    assert "\n  },\n" in text
    (folder / "dump.json").write_text(text.replace("\n  },\n", "\n  }},\n", 1))  # one bracket too many
    with pytest.raises(DumpReadError, match=r"dump\.json"):
        read_dump(folder)


@pytest.mark.parametrize("tensors", [True, False], ids=["tensors", "statistics"])
def test_a_tscore_dump_read_on_demand_gives_what_reading_it_at_once_gives(tmp_path, monkeypatch, tensors):
    from tests.core.test_dump_compare_verdicts import chain, values, write_dump

    base = values(81)
    changed = [v * 1.5 if n >= 50 else v for n, v in enumerate(base)]  # call 49's own error, then inherited
    target = write_dump(tmp_path / "npu" / "rank0", chain(changed), tensors)
    orig = write_dump(tmp_path / "bench" / "rank0", chain(base), tensors)
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 16)
    lazy = read_dump(target, lazy=True)
    assert sum(not c.inputs for c in lazy.calls) == 80 - 32  # beyond the first calls, names only
    lazy.close()
    at_once = compare_sources(read_dump(target), read_dump(orig), csv_path=str(tmp_path / "at_once.csv"))
    out = tmp_path / "out"
    out.mkdir()
    on_demand = compare_dumps(target, orig, out)
    assert on_demand.counts() == at_once.counts() == {"ok": 49, "own": 1, "inherited": 30}
    assert on_demand.rows == at_once.rows
    assert _file(on_demand, "compare_result") == (tmp_path / "at_once.csv").read_bytes().decode()


def test_runs_that_made_the_same_calls_are_compared_in_step_holding_no_call_list(
    dumps, tmp_path, monkeypatch
):
    def no_whole_reading(*args, **kwargs):
        raise AssertionError("read_dump holds every call: not needed when the names agree")

    monkeypatch.setattr(compare_module, "read_dump", no_whole_reading)
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 32)
    out = tmp_path / "out"
    out.mkdir()
    in_step = compare_dumps(*dumps, out)
    assert in_step.first_error.target_call == LABEL
    assert in_step.counts() == {"ok": BROKEN, "own": 1, "inherited": CALLS - BROKEN - 1}
    monkeypatch.undo()
    compare_sources(read_dump(dumps[0]), read_dump(dumps[1]), csv_path=str(tmp_path / "at_once.csv"))
    assert _file(in_step, "compare_result") == (tmp_path / "at_once.csv").read_bytes().decode()


def test_a_damaged_record_is_a_call_with_no_values_and_the_rest_compare_in_step(
    dumps, tmp_path, monkeypatch, caplog
):
    path = dumps[0] / "dump.json"
    text = path.read_text()
    damaged = text.index('"Functional.relu.5.forward"')
    at = text.index('"Max"', damaged)
    path.write_text(text[:at] + '"Max": tru' + text[text.index(",", at) :])  # call 5's record is not JSON
    monkeypatch.setattr(compare_module, "read_dump", None)  # in step: the whole reading is never asked
    report = compare_dumps(*dumps, None)
    assert report.first_error.target_call == LABEL
    assert report.total_calls == CALLS
    five = next(v for v in report.calls if v.target_call == "Functional_relu_5_forward")
    assert five.status == "unknown" and five.reason == "no output of this call could be compared"
    assert "Functional.relu.5.forward" in caplog.text and "read with no value" in caplog.text
    monkeypatch.undo()  # read whole, the damaged record is the same call with no values
    whole = compare_sources(read_dump(dumps[0]), read_dump(dumps[1]))
    assert whole.counts() == report.counts() and whole.total_calls == CALLS
