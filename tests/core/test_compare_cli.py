"""``tscore compare``: exit status 0 / 1 / 2 / 3 so that it can gate a CI job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tscore.cli import main


@pytest.fixture()
def folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder in (a, b, c):
        folder.mkdir()
    x = np.linspace(0, 1, 50, dtype=np.float32)
    for folder in (a, b):
        np.save(folder / "0_x.npy", x)
    np.save(c / "7_y.npy", x + np.float32(0.01))
    return a, b, c


def test_exit_0_when_every_pair_is_within_tolerance(folders, capsys: pytest.CaptureFixture[str]) -> None:
    a, b, _ = folders
    assert main(["compare", str(a), str(b)]) == 0
    assert "The list of comparison results" in capsys.readouterr().out


def test_exit_1_when_a_pair_is_not(folders, capsys: pytest.CaptureFixture[str]) -> None:
    a, _, c = folders
    assert main(["compare", str(a), str(c), "--match", "number"]) == 1
    assert main(["compare", str(a), str(c), "--match", "number", "--atol", "0.02", "--rtol", "0"]) == 0
    assert main(["compare", str(a), str(c)]) == 1  # by name nothing pairs: two missing rows


def test_exit_2_on_usage_errors_and_bad_input(folders, tmp_path: Path, capsys) -> None:
    a, b, _ = folders
    assert main(["compare", str(a), str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--csv", str(tmp_path / "no" / "r.csv")]) == 2
    for bad in (["--rtol", "x"], ["--atol", "-1"], ["--match", "size"], ["--processes", "0"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["compare", str(a), str(b), *bad])
        assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(a)])
    assert exit_info.value.code == 2


def test_exit_3_names_each_unreadable_file_even_when_quiet(folders, capsys) -> None:
    a, b, _ = folders
    np.save(a / "1_y.npy", np.ones(1000))
    (b / "1_y.npy").write_bytes((a / "1_y.npy").read_bytes()[:200])  # truncated
    np.save(a / "2_z.npy", np.ones(3))
    np.save(b / "2_z.npy", np.zeros(3))  # differs too: an unreadable file still decides the status
    for quiet in ([], ["-q"], ["--json", "-"]):
        assert main(["compare", str(a), str(b), *quiet]) == 3
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if "unreadable" in line]
        assert len(lines) == (1 if quiet else 0)  # without -q the table's note names it
        if quiet:
            assert f"{b / '1_y.npy'}: truncated" in lines[0]
    (b / "1_y.npy").write_bytes((a / "1_y.npy").read_bytes())
    assert main(["compare", str(a), str(b), "-q"]) == 1  # readable again: the difference decides


def test_errors_name_arguments_as_the_help_shows_them(folders, tmp_path: Path, capsys) -> None:
    a, _, _ = folders
    assert main(["compare", str(tmp_path / "none"), str(a)]) == 2
    assert main(["compare", str(a), str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert f"DIR_A '{tmp_path / 'none'}' does not exist" in err
    assert f"DIR_B '{tmp_path / 'none'}' does not exist" in err
    assert "orig_dir" not in err and "target_dir" not in err
    assert main(["dump-compare", str(tmp_path / "none"), str(a)]) == 2
    assert capsys.readouterr().err.startswith("tscore dump-compare: error: NPU: no dump in")
    assert main(["dump-compare", str(a), str(a)]) == 2  # a folder of .npy files is no dump either
    assert "NPU: no dump in" in capsys.readouterr().err


def test_the_table_fits_the_terminal_names_both_folders_and_ends_with_the_first_divergence(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    a, b = tmp_path / "a_run_with_a_long_name", tmp_path / "b_run_with_a_long_name"
    names = [f"{i}_encoder.layers.{i}.self_attention.query_key_value.weight_backward.npy" for i in range(3)]
    for folder in (a, b):
        folder.mkdir()
        for i, name in enumerate(names):
            np.save(folder / name, np.full(4, float(i)))
    np.save(b / names[1], np.full(4, 1.5))  # the second pair differs
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["compare", str(a), str(b), "--compare-shape"]) == 1
    assert max(map(len, capsys.readouterr().out.splitlines())) <= 100
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80, out
    assert lines[1].strip("| ") == "The list of comparison results"
    rule = next(i for i in range(1, len(lines)) if lines[i].startswith("+"))
    title = "".join(line.strip("| ") for line in lines[1:rule])  # long paths break after a "/"
    assert str(a) in title and str(b) in title
    cells = "".join(line.split("|")[1].strip() for line in lines if line.startswith("|"))
    assert all(name in cells for name in names)  # wrapped in their column, never cut
    summary = " ".join(out[out.index("3 pairs:") :].split())
    assert summary.startswith(
        f"3 pairs: 2 within tolerance, 1 mismatch first divergence: {names[1]} (mismatch, max abs diff 0.5"
    )
    assert summary.endswith("look at what computes it in the target run")
    monkeypatch.delenv("COLUMNS")  # not a terminal: one row a line, whole names
    assert main(["compare", str(a), str(b)]) == 1
    assert f"| {names[0]} |" in capsys.readouterr().out


def test_a_path_that_holds_an_argument_name_is_left_as_it_is(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "orig_dir" / "missing"
    assert main(["compare", str(missing), str(tmp_path)]) == 2
    assert f"DIR_A '{missing}' does not exist" in capsys.readouterr().err


def test_a_tiny_terminal_width_wraps_without_hanging(folders, monkeypatch, capsys) -> None:
    from tscore.terminal import fit_lines, wrap_name

    assert wrap_name("abc_def", 0) == "a\nb\nc\n_\nd\ne\nf" and fit_lines("ab cd", 1) == "a\nb\nc\nd"
    a, _, c = folders
    for columns in ("1", "4", "9"):
        monkeypatch.setenv("COLUMNS", columns)
        assert main(["compare", str(a), str(c), "--match", "number"]) == 1
        assert "divergence" in "".join(capsys.readouterr().out.split())  # however narrow, it ends


def test_json_to_stdout_and_files(folders, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, _, c = folders
    assert main(["compare", str(a), str(c), "--match", "shape", "--json", "-"]) == 1
    report = json.loads(capsys.readouterr().out)  # only JSON on stdout
    assert report["passed"] is False and report["match"] == "shape"
    assert report["pairs"][0]["orig_name"] == "0_x.npy" and report["pairs"][0]["target_name"] == "7_y.npy"
    csv_path, json_path = tmp_path / "r", tmp_path / "r.json"
    files = ["--csv", str(csv_path), "--json", str(json_path)]
    assert main(["compare", str(a), str(c), "--match", "number", "-q", *files]) == 1
    assert capsys.readouterr().out == ""
    assert (tmp_path / "r.csv").read_text().startswith("orig_name,target_name,status")
    assert json.loads(json_path.read_text())["counts"]["mismatch"] == 1


def test_console_script_runs(folders) -> None:
    a, b, _ = folders
    done = subprocess.run(
        [sys.executable, "-m", "tscore", "compare", str(a), str(b), "--only-failed"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "1 pairs: 1 within tolerance" in done.stdout
