"""compare_npy_dir / compare_grads_dir and the name maps on real folders written by ts.save."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tscore as ts
from tscore.compare import CompareReport, PairStatus, blocks, segments
from tscore.errors import TargetPathError


def spec003_folders(tmp_path: Path) -> tuple[str, str]:
    """The spec 003 example: data0, data1, data2 saved against data0, data2."""
    rng = np.random.default_rng(0)
    data0, data1, data2 = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3), (3, 5), (5, 5)])
    path1, path2 = str(tmp_path / "ta"), str(tmp_path / "tb")
    ts.save(os.path.join(path1, "data"), [data0, data1, data2])
    ts.save(os.path.join(path2, "data"), [data0, data2])
    return path1, path2


def test_spec003_three_mappings(tmp_path: Path) -> None:
    path1, path2 = spec003_folders(tmp_path)
    assert ts.migrator.get_name_map_list_by_name(path1, path2) == [
        ("0_data_0.npy", None),
        ("0_data_1.npy", None),
        ("0_data_2.npy", None),
        (None, "1_data_0.npy"),
        (None, "1_data_1.npy"),
    ]
    assert ts.migrator.get_name_map_list_by_number(path1, path2) == [
        ("0_data_0.npy", "1_data_0.npy"),
        ("0_data_1.npy", "1_data_1.npy"),
        ("0_data_2.npy", None),
    ]
    assert ts.migrator.get_name_map_list_by_shape_edit_distance(path1, path2) == [
        ("0_data_0.npy", "1_data_0.npy"),
        ("0_data_1.npy", None),
        ("0_data_2.npy", "1_data_1.npy"),
    ]


def test_spec003_compare_same_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(1)
    data1, data2 = rng.standard_normal((2, 3)), rng.standard_normal((3, 5))
    path1, path2 = str(tmp_path / "ta"), str(tmp_path / "tb")
    ts.save(os.path.join(path1, "data"), [data1, data2], auto_id=False)
    ts.save(os.path.join(path2, "data"), [data1, data1], auto_id=False)
    report = ts.migrator.compare_npy_dir(path1, path2)
    out = capsys.readouterr().out
    assert [(p.orig_name, p.status) for p in report.pairs] == [
        ("data_0.npy", PairStatus.OK),
        ("data_1.npy", PairStatus.SHAPE_MISMATCH),
    ]
    assert "The list of comparison results" in out and "Shape is inconsistent" in out
    assert not report.passed


def test_spec002_number_map_then_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(2)
    data1, data2 = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 5))
    path1, path2 = str(tmp_path / "ta"), str(tmp_path / "tb")
    ts.save(os.path.join(path1, "data"), [data1, data2])
    ts.save(os.path.join(path2, "data"), [data1, data1])
    name_map = ts.migrator.get_name_map_list_by_number(path1, path2)
    report = ts.migrator.compare_npy_dir(path1, path2, name_map_list=name_map)
    lines = capsys.readouterr().out.splitlines()
    assert report.match == "custom"
    row = next(line for line in lines if "0_data_0.npy" in line)
    assert [c.strip() for c in row.strip("|").split("|")] == [
        "0_data_0.npy",
        "1_data_0.npy",
        "True",
        "100.00%",
        "1.00000",
        "0.00000, 0.00000",
    ]
    assert "Shape is inconsistent" in next(line for line in lines if "0_data_1.npy" in line)


def test_table_layout_matches_the_spec(tmp_path: Path) -> None:
    path1, path2 = spec003_folders(tmp_path)
    report = ts.migrator.compare_npy_dir(path1, path2, match="number", print_level=0)
    text = report.table(compare_shape=True).splitlines()
    # TroubleShooter's box and title, then the two folders (tscore's), then TroubleShooter's table
    assert text[2].strip("| ") == f"orig: {path1}" and text[3].strip("| ") == f"target: {path2}"
    lines = [*text[:2], *text[4:]]
    assert set(lines[0][1:-1]) == {"-"} and lines[2].count("+") == 9
    assert lines[1].strip("|").strip() == "The list of comparison results"
    headers = [c.strip() for c in lines[3].strip("|").split("|")]
    assert headers == [
        "orig array name",
        "target array name",
        "shape of orig",
        "shape of target",
        "result of allclose",
        "ratio of allclose",
        "cosine similarity",
        "mean & max diffs",
    ]
    assert "(2, 3)" in lines[5] and len({len(line) for line in lines[:9]}) == 1
    assert "shape of orig" not in report.table()


def test_grads_dir_aligns_by_shape_and_shows_shapes(tmp_path: Path, capsys) -> None:
    """The spec 000 case without frameworks: torch has fc and bn grads, MindSpore only fc."""
    rng = np.random.default_rng(3)
    weight, bias = rng.standard_normal((5, 10)), rng.standard_normal(5)
    pt, ms = tmp_path / "pt", tmp_path / "ms"
    grads = {"fc.weight_0": weight, "fc.bias_1": bias, "bn.weight_2": bias, "bn.bias_3": bias}
    ts.save(str(pt / "torch_grads"), grads)
    ts.save(str(ms / "ms_grads"), [weight, bias])
    report = ts.migrator.compare_grads_dir(pt, ms)
    assert [(p.orig_name, p.target_name) for p in report.pairs] == [
        ("0_torch_grads_fc.weight_0.npy", "1_ms_grads_0.npy"),
        ("0_torch_grads_fc.bias_1.npy", "1_ms_grads_1.npy"),
        ("0_torch_grads_bn.weight_2.npy", None),
        ("0_torch_grads_bn.bias_3.npy", None),
    ]
    assert [p.passed for p in report.pairs] == [True, True, False, False]
    assert "shape of orig" in capsys.readouterr().out


def test_names_with_and_without_digits(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
    for name in ("input.npy", "2_out.npy", "10_out.npy", "label.npy"):
        np.save(a / name, np.ones(2))
    for name in ("x.npy", "3_y.npy", "11_y.npy", "z.npy"):
        np.save(b / name, np.ones(2))
    assert ts.migrator.get_name_map_list_by_number(a, b) == [
        ("2_out.npy", "3_y.npy"),
        ("10_out.npy", "11_y.npy"),
        ("input.npy", "x.npy"),
        ("label.npy", "z.npy"),
    ]
    assert len(ts.migrator.get_name_map_list_by_shape_edit_distance(a, b)) == 4
    assert ts.migrator.compare_npy_dir(a, b, match="number", print_level=0).passed


def test_files_of_one_save_keep_their_write_order(tmp_path: Path) -> None:
    """Dict keys share the save id; tscore_meta.jsonl keeps the order they were written in."""
    ts.save(str(tmp_path / "a" / "t"), {"zeta": np.ones(1), "alpha": np.zeros(1)})
    ts.save(str(tmp_path / "b" / "t"), {"second": np.ones(1), "first": np.zeros(1)})
    assert ts.migrator.get_name_map_list_by_number(tmp_path / "a", tmp_path / "b") == [
        ("0_t_zeta.npy", "1_t_second.npy"),
        ("0_t_alpha.npy", "1_t_first.npy"),
    ]


def test_shape_matching_reads_headers_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path1, path2 = spec003_folders(tmp_path)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("array data were read")

    monkeypatch.setattr(np, "load", refuse)
    monkeypatch.setattr(np, "memmap", refuse)
    monkeypatch.setattr(np, "fromfile", refuse)
    assert len(ts.migrator.get_name_map_list_by_shape_edit_distance(path1, path2)) == 3


def test_edit_distance_costs_change_the_alignment() -> None:
    from tscore.compare.name_maps import align_by_edit_distance

    cost, pairs = align_by_edit_distance([(2,), (3,)], [(2,), (4,)])
    assert cost == 2 and pairs == [(0, 0), (None, 1), (1, None)]  # TroubleShooter's order on ties
    cost, pairs = align_by_edit_distance([(2,), (3,)], [(2,), (4,)], rep_cost=1)
    assert cost == 1 and pairs == [(0, 0), (1, 1)]
    with pytest.raises(ValueError, match="rep_cost"):
        align_by_edit_distance([], [], rep_cost=-1)


# ---------------------------------------------------------------- outputs


def noisy_folders(tmp_path: Path, count: int = 3) -> tuple[Path, Path]:
    rng = np.random.default_rng(4)
    a, b = tmp_path / "a", tmp_path / "b"
    for i in range(count):
        x = rng.standard_normal(100).astype(np.float32)
        ts.save(str(a / "t"), x, auto_id=False, suffix=str(i))
        ts.save(str(b / "t"), x + np.float32(i * 1e-3), auto_id=False, suffix=str(i))
    return a, b


def test_report_is_data_and_prints_only_when_asked(tmp_path: Path, capsys) -> None:
    a, b = noisy_folders(tmp_path)
    report = ts.migrator.compare_npy_dir(a, b, print_level=0)
    assert capsys.readouterr() == ("", "")  # no table; no progress bar off a terminal either
    assert isinstance(report, CompareReport)
    assert [p.passed for p in report.pairs] == [True, False, False]
    assert report.counts["passed"] == 1 and report.counts["mismatch"] == 2
    ts.migrator.compare_npy_dir(a, b, print_level=2)
    out = capsys.readouterr().out
    assert "t_1.npy" in out and "t_0.npy" not in out
    with pytest.raises(ValueError, match="print_level"):
        ts.migrator.compare_npy_dir(a, b, print_level=3)


def test_csv_has_numbers_and_is_rewritten_cleanly(tmp_path: Path) -> None:
    a, b = noisy_folders(tmp_path)
    out = tmp_path / "compare.csv"
    out.write_text("stale line\n" * 1000)
    report = ts.migrator.compare_npy_dir(a, b, print_level=0, output_file=out)
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 3 and "stale" not in out.read_text()
    assert float(rows[2]["max_abs_diff"]) == pytest.approx(report.pairs[2].max_abs_diff)
    assert float(rows[0]["ratio_close"]) == 1.0 and rows[0]["passed"] == "True"
    assert json.loads(rows[0]["orig_shape"]) == [100]


def test_json_round_trips(tmp_path: Path) -> None:
    a, b = noisy_folders(tmp_path)
    np.save(b / "t_0.npy", np.array([0.0] * 99 + [1.0], dtype=np.float32))  # max_rel_diff becomes inf
    out = tmp_path / "compare.json"
    report = ts.migrator.compare_npy_dir(a, b, print_level=0, output_file=out)
    again = CompareReport.model_validate_json(out.read_text())
    assert again.pairs == report.pairs and again.passed is False
    assert json.loads(out.read_text())["pairs"][0]["max_rel_diff"] == "Infinity"


def test_parallel_runs_equal_the_serial_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segments, "SEGMENT_ELEMENTS", 1000)  # one pair becomes several segments
    monkeypatch.setattr(blocks, "SMALL_FILE_BYTES", 1024)  # memory-mapped and cut, not read whole
    rng = np.random.default_rng(5)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for i in range(4):
        x = rng.standard_normal((50, 97))
        np.save(a / f"{i}.npy", x)
        noisy = x + rng.standard_normal(x.shape) * 1e-4
        np.save(b / f"{i}.npy", np.asfortranarray(noisy) if i == 3 else noisy)
    serial = ts.migrator.compare_npy_dir(a, b, print_level=0, num_processes=1, kernel="numpy")
    for kernel in ("c", "numpy", "numba"):
        parallel = ts.migrator.compare_npy_dir(a, b, print_level=0, num_processes=2, kernel=kernel)
        assert parallel.kernel == kernel
        for one, other in zip(serial.pairs, parallel.pairs, strict=True):
            assert one.ratio_close == other.ratio_close and one.max_abs_diff == other.max_abs_diff
            assert one.mean_abs_diff == pytest.approx(other.mean_abs_diff, rel=1e-12)


def test_unguarded_script_with_worker_processes(tmp_path: Path) -> None:
    """Spec examples call compare at top level, without an ``if __name__ == "__main__"`` guard."""
    a, b = noisy_folders(tmp_path, count=4)
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import tscore as ts
            report = ts.migrator.compare_npy_dir({str(a)!r}, {str(b)!r}, print_level=0,
                                                 num_processes=2, kernel="numpy")
            print("RESULT", report.counts["passed"])
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["RESULT", "1"]


# ---------------------------------------------------------------- bad input


def test_missing_or_empty_folder_fails_before_work(tmp_path: Path) -> None:
    a, _ = noisy_folders(tmp_path)
    with pytest.raises(TargetPathError, match=r"target_dir .*nowhere.* does not exist"):
        ts.migrator.compare_npy_dir(a, tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    with pytest.raises(TargetPathError, match=r"orig_dir .*empty.* holds no \.npy file"):
        ts.migrator.compare_npy_dir(tmp_path / "empty", a)
    with pytest.raises(TargetPathError, match="is not a folder"):
        ts.migrator.compare_npy_dir(a, tmp_path / "empty" / "notes.txt")


def test_output_file_in_missing_folder_fails_before_work(tmp_path: Path, capsys) -> None:
    a, b = noisy_folders(tmp_path)
    with pytest.raises(TargetPathError, match="does not exist; create it first"):
        ts.migrator.compare_npy_dir(a, b, output_file=tmp_path / "no" / "such" / "out.csv")
    assert capsys.readouterr().out == ""  # nothing was compared or printed


def test_bad_tolerances_and_name_maps(tmp_path: Path) -> None:
    a, b = noisy_folders(tmp_path)
    with pytest.raises(ValueError, match="rtol"):
        ts.migrator.compare_npy_dir(a, b, rtol=-1)
    with pytest.raises(TypeError, match="atol"):
        ts.migrator.compare_npy_dir(a, b, atol="0.1")
    with pytest.raises(TypeError, match=r"name_map_list\[0\]"):
        ts.migrator.compare_npy_dir(a, b, name_map_list=["t_0.npy"])
    with pytest.raises(ValueError, match="match"):
        ts.migrator.compare_npy_dir(a, b, match="size")


def test_each_bad_file_is_a_row_and_the_batch_goes_on(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    good = np.arange(10, dtype=np.float32)
    for folder in (a, b):
        np.save(folder / "good.npy", good)
    (a / "corrupt.npy").write_bytes(b"this is not an npy file at all")
    np.save(b / "corrupt.npy", good)
    np.save(a / "truncated.npy", good)
    np.save(b / "truncated.npy", good)
    data = (b / "truncated.npy").read_bytes()
    (b / "truncated.npy").write_bytes(data[:-8])
    np.save(a / "pickled.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(b / "pickled.npy", good)
    np.save(a / "shape.npy", np.zeros((2, 5), dtype=np.float32))
    np.save(b / "shape.npy", np.zeros((3, 5), dtype=np.float32))
    np.save(a / "dtype.npy", good.astype(np.float16))
    np.save(b / "dtype.npy", good)
    np.save(a / "only_orig.npy", good)
    np.save(b / "only_target.npy", good)
    (a / "README.txt").write_text("not data")
    (b / "log.json").write_text("{}")
    (b / "run.log").write_text("")

    report = ts.migrator.compare_npy_dir(a, b, print_level=0)
    rows = {p.orig_name or p.target_name: p for p in report.pairs}
    assert rows["good.npy"].status is PairStatus.OK
    corrupt = rows["corrupt.npy"]
    assert corrupt.status is PairStatus.UNREADABLE and "not a .npy file" in corrupt.message
    assert str(a / "corrupt.npy") in rows["corrupt.npy"].message
    truncated = rows["truncated.npy"]
    assert truncated.status is PairStatus.UNREADABLE and "truncated" in truncated.message
    assert "pickled" in rows["pickled.npy"].message and rows["pickled.npy"].status is PairStatus.UNREADABLE
    assert rows["shape.npy"].status is PairStatus.SHAPE_MISMATCH
    dtype = rows["dtype.npy"]
    assert dtype.status is PairStatus.DTYPE_MISMATCH and "float16 vs float32" in dtype.message
    assert rows["only_orig.npy"].status is PairStatus.MISSING and rows["only_orig.npy"].target_name is None
    assert rows["only_target.npy"].status is PairStatus.MISSING and rows["only_target.npy"].orig_name is None
    assert report.ignored_files == {"orig": ["README.txt"], "target": ["log.json", "run.log"]}
    assert "3 non-.npy file(s) ignored" in report.summary()
    assert not report.passed and report.counts["passed"] == 2  # good, and dtype (values equal)


def test_name_map_naming_a_missing_file(tmp_path: Path) -> None:
    a, b = noisy_folders(tmp_path)
    report = ts.migrator.compare_npy_dir(a, b, print_level=0, name_map_list=[("t_0.npy", "nope.npy")])
    (row,) = report.pairs
    assert row.status is PairStatus.MISSING and "'nope.npy' not found in target_dir" in row.message


def test_meta_file_gives_the_source_dtype(tmp_path: Path) -> None:
    import ml_dtypes

    x = np.arange(6, dtype=np.float32)
    ts.save(str(tmp_path / "a" / "x"), x.astype(ml_dtypes.bfloat16), auto_id=False)
    ts.save(str(tmp_path / "b" / "x"), x, auto_id=False)
    (row,) = ts.migrator.compare_npy_dir(tmp_path / "a", tmp_path / "b", print_level=0).pairs
    assert row.orig_dtype == "bfloat16" and row.target_dtype == "float32"
    assert row.status is PairStatus.DTYPE_MISMATCH and row.passed
    assert "tscore_meta.jsonl" not in str(
        ts.migrator.compare_npy_dir(tmp_path / "a", tmp_path / "b", print_level=0).ignored_files
    )


def test_import_tscore_leaves_the_compare_engine_for_first_use() -> None:
    code = (
        "import sys, tscore as ts; before = 'tscore.compare' in sys.modules or 'tqdm' in sys.modules; "
        "ts.migrator.compare_npy_dir; from tscore import migrator; "
        "print(before, 'tscore.compare' in sys.modules, migrator is ts.migrator)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True", "True"]
