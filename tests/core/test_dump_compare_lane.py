"""Two msprobe statistics dumps compared as columns (statistics_lane): the same result as call by call.

The lane reads the records of calls that agree straight into arrays and renders their CSV lines
itself, and a big comparison has a helper process render them; every other call goes the usual
way. Each test compares the same two dumps both ways (the usual way alone: call by call, with
objects for every value) and asks for the same CSV bytes, verdicts, rows and summary. The dumps
hold what real msprobe dumps hold (plain arguments, None, keyword tensors, module records with
parameters, backward records, an integer tensor, a list argument, NaN, inf and -0.0 statistics,
stacks with commas and quotes) and what differs between two runs (numbers within and beyond the
tolerance, a dtype, a shape, a plain argument).
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import random
from pathlib import Path

import pytest

from tscore.dump_compare import compare_dumps, csv_helper, row_stream
from tscore.dump_compare.verdicts import CallVerdict
from tscore.json_members import read_members

compare_module = importlib.import_module("tscore.dump_compare.compare")  # the package's compare() hides it
CALLS = 400
OWN = 216  # a convolution whose output differs beyond the tolerance (its inputs agree)


def _tensor(rnd: random.Random, shape: list[int], dtype: str = "torch.float32", **stats: float) -> dict:
    value = {
        "type": "torch.Tensor",
        "dtype": dtype,
        "shape": shape,
        "Max": rnd.uniform(0.5, 2.0),
        "Min": rnd.uniform(-2.0, -0.5),
        "Mean": rnd.uniform(-0.1, 0.1),
        "Norm": rnd.uniform(5.0, 50.0),
        "requires_grad": True,
    }
    value.update(stats)
    return value


def _records(orig: bool) -> dict[str, dict]:
    """The records of one run; the orig run's differ here and there (same names, same order)."""
    rnd = random.Random(7)  # the same draws on both sides: the differences below are the only ones
    data: dict[str, dict] = {}
    for i in range(CALLS):
        kind = i % 8
        x, w, y = _tensor(rnd, [2, 3]), _tensor(rnd, [3, 3]), _tensor(rnd, [2, 3])
        noise = rnd.uniform(-1e-7, 1e-7)  # within the tolerance: the calls agree
        if orig and i == 8:
            x = {**x, "requires_grad": False}  # msprobe 26's Requires_grad columns say so
        if orig:
            y = {**y, "Max": y["Max"] + noise}
        if orig and i == OWN:
            y = {**y, "Max": y["Max"] * 1.5}
        if kind == 0:
            data[f"Functional.conv2d.{i}.forward"] = {
                "input_args": [x, w, _tensor(rnd, [3])],
                "input_kwargs": {"stride": {"type": "int", "value": 1}, "padding": None},
                "output": [y],
            }
        elif kind == 1:
            alpha = 2.0 if orig and i == 9 else 1.5  # a plain argument differs; the output agrees
            keyword = {17: "", 25: "0"}.get(i, "other")  # named "" or like a position: the usual way
            data[f"Tensor.add.{i}.forward"] = {
                "input_args": [x, {"type": "float", "value": alpha}],
                "input_kwargs": {keyword: _tensor(rnd, [2, 3])},
                "output": [y, _tensor(rnd, [2, 3])],
            }
        elif kind == 2:  # its backward weighs what the forward saw and made (the noise on y)
            data[f"Functional.relu.{i}.forward"] = {"input_args": [x], "output": [y]}
            data[f"Functional.relu.{i}.backward"] = {"input": [_tensor(rnd, [2, 3])], "output": [w]}
        elif kind == 3:
            data[f"Module.layer{i}.Conv2d.forward.{i}"] = {
                "input_args": [x],
                "output": [y],
                "parameters": {"weight": w},
            }
        elif kind == 4:
            labels = _tensor(rnd, [2], "torch.int64", Max=9, Min=0, Mean=4.5, Norm=10.0)
            data[f"Functional.cross_entropy.{i}.forward"] = {"input_args": [x, labels], "output": [y]}
        elif kind == 5:
            data[f"Torch.cat.{i}.forward"] = {"input_args": [[x, w]], "output": [y]}
        elif kind == 6:
            odd = _tensor(rnd, [4], Max=float("inf"), Min=-0.0, Mean=float("nan"), Norm=0.0)
            if orig and i == 14:
                odd = {**odd, "dtype": "torch.float16"}  # a dtype differs: the usual way says so
            if orig and i == 22:
                odd = {**odd, "shape": [2, 2]}
            data[f"Functional.linear.{i}.forward"] = {"input_args": [x, odd], "output": [y]}
        else:
            data[f"Tensor.__getitem__.{i}.forward"] = {"input_args": [x, 0], "output": y}  # no list
    data["Module.fc.Linear.parameters_grad"] = {"weight": [_tensor(rnd, [3, 3])], "bias": [_tensor(rnd, [3])]}
    return data


def write_dump(folder: Path, orig: bool) -> Path:
    folder.mkdir(parents=True)
    data = _records(orig)
    document = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None}
    (folder / "dump.json").write_text(json.dumps({**document, "data": data}, indent=1))
    lines = ['File "/home/me/train.py", line 42, in forward, x = self.conv(x, "a")', "File /x.py, line 1"]
    stacks = {"0": [list(data)[::3], lines]}
    (folder / "stack.json").write_text(json.dumps(stacks))
    return folder


@pytest.fixture
def dumps(tmp_path) -> tuple[Path, Path]:
    return write_dump(tmp_path / "npu" / "rank0", False), write_dump(tmp_path / "bench" / "rank0", True)


def _compare(dumps, out: Path, usual: bool, monkeypatch, **options):
    out.mkdir()
    with monkeypatch.context() as patch:
        if usual:  # call by call: no lane
            patch.setattr(compare_module, "_record_blocks", compare_module._call_blocks)
        return compare_dumps(*dumps, out, **options)


def _files(report) -> dict[str, bytes]:
    return {Path(f).name.split("_")[0]: Path(f).read_bytes() for f in report.files}


def _assert_same(lane, usual) -> None:
    assert _files(lane) == _files(usual)
    assert lane.counts() == usual.counts() and lane.summary() == usual.summary()
    assert repr(lane.first_error) == repr(usual.first_error) and lane.passed == usual.passed
    assert [repr(v) for v in lane.calls] == [repr(v) for v in usual.calls]  # the calls kept
    assert [repr(r) for r in lane.rows] == [repr(r) for r in usual.rows]  # repr: NaN is NaN
    assert [repr(v) for v in lane.iter_calls()] == [repr(v) for v in usual.iter_calls()]
    assert [repr(r) for r in lane.iter_rows()] == [repr(r) for r in usual.iter_rows()]


@pytest.mark.parametrize("stack_mode", [False, True], ids=["plain", "stack_mode"])
@pytest.mark.parametrize("kept", ["all rows kept", "calls that differ kept"])
def test_the_lane_gives_what_comparing_call_by_call_gives(dumps, tmp_path, monkeypatch, stack_mode, kept):
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 64)
    if kept != "all rows kept":
        monkeypatch.setattr(row_stream, "KEEP_ALL_ROWS", 300)
        monkeypatch.setattr(row_stream, "MAX_FAILED_ROWS", 40)
    monkeypatch.setattr(row_stream, "HELPER_AFTER_ROWS", float("inf"))  # rendered here
    lane = _compare(dumps, tmp_path / "lane", False, monkeypatch, stack_mode=stack_mode)
    usual = _compare(dumps, tmp_path / "usual", True, monkeypatch, stack_mode=stack_mode)
    _assert_same(lane, usual)
    assert lane.rows_complete == (kept == "all rows kept")
    assert lane.first_error.target_call == f"Functional_conv2d_{OWN}_forward"
    statuses = {v.target_call: v for v in lane.iter_calls()}
    assert (
        statuses["Functional_relu_2_backward"].input_error
        == statuses["Functional_relu_2_forward"].output_error
        > 0
    )
    assert statuses["Tensor_add_9_forward"].status == "ok"  # its argument differs, its outputs agree
    assert "argument differs: 1.5 vs 2.0" in _files(lane)["compare"].decode()
    for call in ("Functional_linear_14_forward", "Functional_linear_22_forward"):
        assert statuses[call].status in ("own", "unknown", "ok")  # judged the usual way, whatever it is
    assert b"dtypes differ: float32 vs float16" in _files(lane)["compare"]
    assert b"shapes differ ((4,) vs (2, 2))" in _files(lane)["compare"]
    rows = list(csv.DictReader(io.StringIO(_files(lane)["compare"].decode())))
    grads = {
        r["NPU Name"]: (r["NPU Requires_grad"], r["Bench Requires_grad"], r["Requires_grad Consistent"])
        for r in rows
    }
    assert grads["Functional.conv2d.8.forward.input.0"] == ("True", "False", "False")
    assert grads["Functional.conv2d.8.forward.input.1"] == ("True", "True", "True")
    assert grads["Functional.conv2d.8.forward.input.stride"] == ("N/A", "N/A", "N/A")  # a plain argument


def test_a_helper_process_renders_the_csv_of_a_big_comparison(dumps, tmp_path, monkeypatch):
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 64)
    monkeypatch.setattr(row_stream, "KEEP_ALL_ROWS", 300)
    monkeypatch.setattr(row_stream, "HELPER_AFTER_ROWS", 300)
    started = []
    real = row_stream.CsvHelper

    def helper(*args):
        started.append(args)
        return real(*args)

    monkeypatch.setattr(row_stream, "CsvHelper", helper)
    lane = _compare(dumps, tmp_path / "lane", False, monkeypatch, stack_mode=True)
    assert len(started) == 1
    monkeypatch.setattr(row_stream, "HELPER_AFTER_ROWS", float("inf"))
    usual = _compare(dumps, tmp_path / "usual", True, monkeypatch, stack_mode=True)
    assert len(started) == 1
    _assert_same(lane, usual)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("import sys; sys.exit(3)", "exit code 3"),
        ("import time; time.sleep(0.3)", "exit code 0 after 'nothing'"),  # stops early, "successfully"
    ],
    ids=["fails", "stops early"],
)
def test_a_helper_that_fails_leaves_no_csv_and_says_so(dumps, tmp_path, monkeypatch, command, said):
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 64)
    monkeypatch.setattr(row_stream, "HELPER_AFTER_ROWS", 300)
    monkeypatch.setattr(csv_helper, "_COMMAND", command)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(csv_helper.CsvHelperError, match=said) as raised:
        compare_dumps(*dumps, out)
    assert "compare_result" in str(raised.value) and "not kept" in str(raised.value)
    assert list(out.iterdir()) == []  # no CSV, no temporary file


def test_the_helper_imports_what_this_process_imports_not_the_working_folder(dumps, tmp_path, monkeypatch):
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 64)
    monkeypatch.setattr(row_stream, "HELPER_AFTER_ROWS", 300)
    here = tmp_path / "cwd"
    here.mkdir()
    (here / "numpy.py").write_text("raise ImportError('the working folder was imported')\n")
    monkeypatch.chdir(here)
    lane = _compare(dumps, tmp_path / "lane", False, monkeypatch)
    monkeypatch.setattr(row_stream, "HELPER_AFTER_ROWS", float("inf"))
    usual = _compare(dumps, tmp_path / "usual", True, monkeypatch)
    _assert_same(lane, usual)


def test_a_shape_is_whole_numbers_whatever_was_read_before():
    from tscore.dump_compare.calls import shape_of

    assert shape_of([1, 2]) == (1, 2)
    assert shape_of([1.0, 2.0]) is None and shape_of((1, 2)) is None and shape_of([1, -2]) is None


def test_a_helper_that_cannot_start_leaves_the_csv_to_this_process(dumps, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 64)
    monkeypatch.setattr(row_stream, "HELPER_AFTER_ROWS", 300)

    def cannot(*args):
        raise OSError("no processes left")

    monkeypatch.setattr(row_stream, "CsvHelper", cannot)
    lane = _compare(dumps, tmp_path / "lane", False, monkeypatch)
    assert "could not start (no processes left)" in caplog.text
    usual = _compare(dumps, tmp_path / "usual", True, monkeypatch)
    _assert_same(lane, usual)


def test_names_the_same_as_written_are_checked_without_decoding_them(tmp_path):
    text = '{"task": "x", "data": {"a.b": 1, "\\u0063": [2, {"k": 3}], "d" : {}}}'
    (tmp_path / "dump.json").write_text(text)
    with read_members(str(tmp_path / "dump.json"), "data") as members:
        assert list(members.raw_keys()) == [b'"a.b"', b'"\\u0063"', b'"d"']
        assert list(members.keys()) == ["a.b", "c", "d"]
    (tmp_path / "cut.json").write_text(text[:-10])  # cut short: the raw names are not trusted
    with read_members(str(tmp_path / "cut.json"), "data") as members:
        assert members.raw_keys() is None
        assert list(members.keys()) == ["a.b", "c"]


def test_names_spelled_apart_but_the_same_still_compare_in_step(dumps, tmp_path, monkeypatch):
    path = dumps[1] / "dump.json"
    text = path.read_text()
    path.write_text(text.replace('"Functional.conv2d.0.forward"', '"\\u0046unctional.conv2d.0.forward"'))
    monkeypatch.setattr(compare_module, "read_dump", None)  # in step: the whole reading is never asked
    report = compare_dumps(*dumps, None)
    assert report.first_error.target_call == f"Functional_conv2d_{OWN}_forward"


def _entry(rnd: random.Random, name: str, shape: list[int], **more: object) -> dict:
    return {
        "name": name,
        "type": "tensor",
        "dtype": "float32",
        "shape": shape,
        "max": rnd.uniform(0.5, 2.0),
        "min": rnd.uniform(-2.0, -0.5),
        "mean": rnd.uniform(-0.1, 0.1),
        "norm": rnd.uniform(5.0, 50.0),
        **more,
    }


def write_tscore_dump(folder: Path, orig: bool) -> Path:
    """A tscore dump.jsonl of what the recorder writes, and what differs between two runs."""
    rnd = random.Random(11)
    folder.mkdir(parents=True)
    lines = []
    for i in range(CALLS):
        kind = i % 6
        direction = "backward" if kind == 2 else "forward"
        api = ("conv2d", "add", "relu", "cross_entropy", "linear", "dropout")[kind]
        name = f"Functional_{api}_{i}_{direction}"
        x = _entry(rnd, f"{name}_input.0", [2, 3])
        w = _entry(rnd, f"{name}_input.1", [3, 3])
        y = _entry(rnd, f"{name}_output" + (".0" if i % 12 == 0 else ""), [2, 3])  # a tuple of one
        noise = rnd.uniform(-1e-7, 1e-7)  # drawn on both sides: the same draws after it
        if orig:
            y["max"] += noise
        if orig and i == OWN:
            y["max"] *= 1.5
        inputs: list = [x, w]
        if kind == 1:
            inputs.append(
                {"name": f"{name}_input.alpha", "type": "float", "value": 2.0 if orig and i == 7 else 1.5}
            )
            inputs.append({"name": f"{name}_input.out", "type": "None", "value": None})
        elif kind == 3:
            inputs[1] = {**w, "dtype": "int64", "max": 9, "min": 0}  # integer statistics: the usual way
        elif kind == 4:
            inputs[1] = {**w, "parameter": True}  # a kernel's weight: the usual way
            if i == 10:
                inputs[0] = {**x, "max": "inf", "min": "-inf", "mean": "nan"}  # as the writer spells them
            if orig and i == 16:
                inputs[0] = {**x, "dtype": "float16"}
            if orig and i == 22:
                inputs[0] = {**x, "shape": [6]}
        elif kind == 5:
            inputs[0] = {**x, "file": "tensors/x.npy"}  # a file: the usual way
        record = {
            "name": name,
            "call": name,
            "prefix": "Functional",
            "api": api,
            "index": i,
            "direction": direction,
            "module": f"layer{i % 3}" if kind != 5 else None,
            "key": None,
            "stack": i % 2,
            "step": 0,
            "rank": 0,
            "inputs": inputs,
            "outputs": [y] if kind != 2 else [y, _entry(rnd, f"{name}_output.1", [2])],
        }
        lines.append(json.dumps(record))
    (folder / "dump.jsonl").write_text("\n".join(lines) + "\n")
    stacks = [{"id": 0, "stack": ['File "train.py", line 3, in step, y = f(x, "a")']}, {"id": 1, "stack": []}]
    (folder / "stack.jsonl").write_text("\n".join(json.dumps(s) for s in stacks) + "\n")
    return folder


@pytest.mark.parametrize("stack_mode", [False, True], ids=["plain", "stack_mode"])
@pytest.mark.parametrize("kept", ["all rows kept", "calls that differ kept"])
def test_tscore_dumps_are_read_as_columns_too(tmp_path, monkeypatch, stack_mode, kept):
    dumps = (
        write_tscore_dump(tmp_path / "npu" / "rank0", False),
        write_tscore_dump(tmp_path / "bench" / "rank0", True),
    )
    monkeypatch.setattr(compare_module, "BLOCK_CALLS", 64)
    if kept != "all rows kept":
        monkeypatch.setattr(row_stream, "KEEP_ALL_ROWS", 300)
        monkeypatch.setattr(row_stream, "MAX_FAILED_ROWS", 40)
    seen = []
    real = compare_module.compare_block

    def counted(records, *args):
        block = real(records, *args)
        seen.append(sum(not isinstance(e, CallVerdict) for e in block.entries))
        return block

    monkeypatch.setattr(compare_module, "compare_block", counted)
    lane = _compare(dumps, tmp_path / "lane", False, monkeypatch, stack_mode=stack_mode)
    assert sum(seen) > CALLS / 3  # most calls went as columns
    usual = _compare(dumps, tmp_path / "usual", True, monkeypatch, stack_mode=stack_mode)
    _assert_same(lane, usual)
    assert lane.first_error.target_call == f"Functional_conv2d_{OWN}_forward"
    text = _files(lane)["compare"].decode()
    assert "argument differs: 1.5 vs 2.0" in text and "dtypes differ: float32 vs float16" in text


def test_a_tscore_record_cut_short_is_paired_not_an_error(tmp_path, caplog):
    """Names as written agree (the cut record still has its name); read, they do not: paired instead."""
    target = write_tscore_dump(tmp_path / "npu" / "rank0", False)
    orig = write_tscore_dump(tmp_path / "bench" / "rank0", True)
    text = (target / "dump.jsonl").read_bytes()
    (target / "dump.jsonl").write_bytes(text[:-40])  # the run was killed while writing its last record
    report = compare_dumps(target, orig, None)
    assert report.total_calls == CALLS and report.counts()["unpaired"] == 1
    assert report.first_error.target_call == f"Functional_conv2d_{OWN}_forward"
    assert "line 400 is incomplete" in caplog.text


def test_msprobe_26_requires_grad_columns_come_from_real_msprobe_dumps(tmp_path):
    data = Path(__file__).parents[1] / "data" / "msprobe_26.2" / "statistics"
    report = compare_dumps(
        data / "perturbed" / "step0" / "rank0", data / "base" / "step0" / "rank0", tmp_path
    )
    rows = {r["NPU Name"]: r for r in csv.DictReader(io.StringIO(_files(report)["compare"].decode()))}
    conv = "Functional.conv2d.0.forward"
    cells = ("NPU Requires_grad", "Bench Requires_grad", "Requires_grad Consistent")
    assert tuple(rows[f"{conv}.input.0"][c] for c in cells) == ("False", "False", "True")  # the data
    assert tuple(rows[f"{conv}.input.1"][c] for c in cells) == ("True", "True", "True")  # the weight
