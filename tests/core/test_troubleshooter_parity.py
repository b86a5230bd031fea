"""TroubleShooter 1.0.18's functions that need no framework, under their names: a script changes one import.

The folder that TroubleShooter 1.0.18 itself wrote (``tests/data/troubleshooter_1.0.18``, made by
``tests/data/make_troubleshooter_saves.py`` in its own venv) pairs with tscore's saves of the same
calls; ``cal_cosine_sim`` is checked against what TroubleShooter's computed there (``cosine.json``).
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tscore as ts
from tscore.errors import ObjectFileError

sys.path.insert(0, str(Path(__file__).parents[1] / "data"))
from make_troubleshooter_saves import cosine_cases, values

SAVED_BY_TS = Path(__file__).parents[1] / "data" / "troubleshooter_1.0.18" / "saves"
# what TroubleShooter 1.0.18 wrote -> what tscore writes for the same calls (spec 003's names)
PARTNERS = {
    "0_l.0.npy": "0_l_0.npy",
    "1_l.1.npy": "0_l_1.npy",
    "2_d.x.npy": "1_d_x.npy",
    "3_d.y.npy": "1_d_y.npy",
    "4_ls.0_bw.npy": "2_ls_0_bw.npy",
}


def _tscore_saves(folder: Path, extra_first: bool = False, layout: str = "spec003") -> Path:
    v = values()
    ts.reset_save_id()
    if extra_first:
        ts.save(str(folder / "other"), np.zeros(1, dtype=np.float32))
    ts.save(str(folder / "l"), [v["a"], v["b"]], layout=layout)
    ts.save(str(folder / "d"), {"x": v["x"], "y": v["y"]}, layout=layout)
    ts.save(str(folder / "ls"), [v["a"]], suffix="bw", layout=layout)
    return folder


def _pairs(report) -> dict[str, str | None]:
    return {row.orig_name: row.target_name for row in report.pairs}


@pytest.mark.parametrize("compare", ["compare_list_dir", "compare_dict_dir"])
def test_a_folder_saved_by_troubleshooter_1_0_18_pairs_with_tscore_saves(tmp_path, compare):
    ours = _tscore_saves(tmp_path / "ours")
    assert sorted(p.name for p in ours.glob("*.npy")) == sorted(PARTNERS.values())
    report = getattr(ts.migrator, compare)(SAVED_BY_TS, ours, print_level=0)
    assert _pairs(report) == PARTNERS
    assert report.passed and all(row.cosine == 1.0 for row in report.pairs)


def test_compare_npy_dir_pairs_a_troubleshooter_1_0_18_folder_with_tscore_saves_and_says_how(
    tmp_path, capsys
):
    ours = _tscore_saves(tmp_path / "ours")
    report = ts.migrator.compare_npy_dir(SAVED_BY_TS, ours)  # the default call: by name
    assert _pairs(report) == PARTNERS and report.passed and report.counts["ok"] == 5
    assert report.match == "name" and report.paired_by_key == 5
    assert "5 pair(s) by the name and key they saved, their ids differ" in capsys.readouterr().out
    # one value changed: that pair, and only it, fails
    np.save(ours / "1_d_y.npy", values()["y"] * 1.5)
    report = ts.migrator.compare_npy_dir(SAVED_BY_TS, ours, print_level=0)
    assert [row.orig_name for row in report.pairs if not row.passed] == ["3_d.y.npy"]
    assert report.first_divergence.target_name == "1_d_y.npy"


def test_compare_npy_dir_pairs_by_name_first_and_a_save_one_run_made_shifts_no_pair(tmp_path):
    plain = _tscore_saves(tmp_path / "plain")
    shifted = _tscore_saves(tmp_path / "shifted", extra_first=True)  # every id one higher
    report = ts.migrator.compare_npy_dir(plain, shifted, print_level=0)
    assert _pairs(report) == {
        "0_l_0.npy": "1_l_0.npy",
        "0_l_1.npy": "1_l_1.npy",
        "1_d_x.npy": "2_d_x.npy",
        "1_d_y.npy": "2_d_y.npy",
        "2_ls_0_bw.npy": "3_ls_0_bw.npy",
        None: "0_other.npy",
    }
    assert report.counts["ok"] == 5 and report.counts["missing"] == 1 and report.paired_by_key == 5
    # the same names on both sides pair by name alone, whatever they saved
    same = ts.migrator.compare_npy_dir(plain, plain, print_level=0)
    assert same.paired_by_key == 0 and all(row.orig_name == row.target_name for row in same.pairs)


def test_a_name_saved_in_a_loop_never_pairs_across_the_steps_that_paired_by_name(tmp_path):
    orig, target = tmp_path / "orig", tmp_path / "target"
    for folder in (orig, target):
        folder.mkdir()
    for step in range(3):
        np.save(orig / f"{step}_x.npy", np.full(2, float(step)))
    np.save(target / "0_pre.npy", np.zeros(2))
    for step in range(1, 4):
        np.save(target / f"{step}_x.npy", np.full(2, float(step)))
    report = ts.migrator.compare_npy_dir(orig, target, print_level=0)
    pairs = _pairs(report)
    assert pairs["1_x.npy"] == "1_x.npy" and pairs["2_x.npy"] == "2_x.npy"
    assert pairs["0_x.npy"] is None and report.paired_by_key == 0  # not 0_x with 3_x, across 1_x and 2_x


def test_save_writes_troubleshooter_1_0_18s_names_when_asked(tmp_path):
    ours = _tscore_saves(tmp_path / "ours", layout="1.0.18")
    assert sorted(p.name for p in ours.glob("*.npy")) == sorted(PARTNERS)
    for name in PARTNERS:
        assert np.array_equal(np.load(ours / name), np.load(SAVED_BY_TS / name)), name
    report = ts.migrator.compare_npy_dir(SAVED_BY_TS, ours, print_level=0)
    assert report.passed and report.counts["ok"] == 5
    with pytest.raises(ValueError, match="layout"):
        ts.save(str(tmp_path / "x"), np.zeros(1), layout="1.0.17")


def test_a_changed_value_is_the_one_failing_pair(tmp_path):
    ours = _tscore_saves(tmp_path / "ours")
    np.save(ours / "1_d_y.npy", values()["y"] * 1.5)
    report = ts.migrator.compare_dict_dir(SAVED_BY_TS, ours, print_level=0)
    failing = [row.target_name for row in report.pairs if not row.passed]
    assert failing == ["1_d_y.npy"]


def test_dicts_pair_key_by_key_when_one_run_saved_one_more_tensor_first(tmp_path):
    shifted = _tscore_saves(tmp_path / "shifted", extra_first=True)  # every id one higher
    plain = _tscore_saves(tmp_path / "plain")
    report = ts.migrator.compare_dict_dir(plain, shifted, print_level=0)
    pairs = _pairs(report)
    assert pairs["1_d_x.npy"] == "2_d_x.npy" and pairs["0_l_1.npy"] == "1_l_1.npy"
    assert report.counts.get("ok") == 5
    assert [row.target_name for row in report.pairs if row.orig_name is None] == ["0_other.npy"]


def test_cal_algorithm_gives_allclose_ratio_cosine_and_differences():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5))
    b = a + rng.standard_normal((4, 5)) * 1e-3
    allclose, ratio, cosine, (mean, biggest) = ts.migrator.cal_algorithm(a, b, 1e-4, 1e-4, False)
    close = np.isclose(a, b, rtol=1e-4, atol=1e-4)  # numpy's own rule, computed apart from tscore
    assert allclose is False and ratio == pytest.approx(close.mean(), abs=1e-15)
    assert cosine == pytest.approx(
        float(a.ravel() @ b.ravel() / np.linalg.norm(a) / np.linalg.norm(b)), abs=1e-12
    )
    assert mean == pytest.approx(np.abs(a - b).mean(), rel=1e-12)  # over every position (TroubleShooter:
    assert biggest == pytest.approx(np.abs(a - b).max(), rel=1e-12)  # over the unequal ones only)
    assert ts.migrator.cal_algorithm(a, a, 1e-4, 1e-4, False) == (True, 1.0, 1.0, (0.0, 0.0))
    assert ts.migrator.cal_algorithm(a, b.T, 1e-4, 1e-4, False)[0] == "Shape is inconsistent"
    none = ts.migrator.cal_algorithm(None, b, 1e-4, 1e-4, False)
    assert none[:2] == (False, 0) and np.isnan(none[2]) and all(np.isnan(none[3]))


# where tscore's cosine deliberately differs from TroubleShooter's (docs/coming-from/troubleshooter.md):
# NaN and inf positions are left out rather than making the whole cosine NaN, and a tiny norm is not zero
DIFFERENT = {
    "nan": 1.0,
    "inf": float(np.array([1.0, 3.0]) @ [1.0, 3.5] / np.hypot(1, 3) / np.hypot(1, 3.5)),
    "tiny": 0.8,
}


def test_cal_cosine_sim_agrees_with_troubleshooter_1_0_18_except_where_documented():
    theirs = json.loads((SAVED_BY_TS.parent / "cosine.json").read_text())
    cases = cosine_cases()
    assert set(theirs) == set(cases)
    for key, (a, b) in cases.items():
        ours = ts.migrator.cal_cosine_sim(a, b)
        if key in DIFFERENT:
            assert ours == pytest.approx(DIFFERENT[key], abs=1e-12) and ours != theirs[key], key
        elif theirs[key] is None:
            assert np.isnan(ours), key
        else:
            assert ours == pytest.approx(theirs[key], abs=1e-12), key


def test_arrays_equal_everywhere_infinities_included_read_as_identical(capsys):
    a = np.array([np.inf, -np.inf, np.inf])
    row = ts.migrator.compare_arrays(a, a.copy())
    assert (row.cosine, row.mean_abs_diff, row.max_abs_diff, row.max_rel_diff) == (1.0, 0.0, 0.0, 0.0)
    assert row.passed and row.message == "" and row.orig_inf == row.target_inf == 3  # counted, no note
    other = ts.migrator.compare_arrays(a, -a)
    assert not other.passed and other.cosine is None


def test_identical_infinities_print_as_troubleshooter_prints_them(tmp_path, capsys):
    for side in ("orig", "target"):
        (tmp_path / side).mkdir()
        np.save(tmp_path / side / "0_t.npy", np.array([np.inf, -np.inf], dtype=np.float32))
    ts.migrator.compare_npy_dir(tmp_path / "orig", tmp_path / "target")
    line = next(line for line in capsys.readouterr().out.splitlines() if "0_t.npy" in line)
    assert "True" in line and "100.00%" in line and "1.00000" in line and "0.00000, 0.00000" in line


def test_object_dump_and_load_read_back_json_and_never_unpickle(tmp_path):
    data = {"name_map": {"fc.weight": "fc.weight"}, "steps": [1, 2.5, None], "ok": True}
    ts.widget.object_dump(data, tmp_path / "obj.json")
    assert ts.widget.object_load(tmp_path / "obj.json") == data
    (tmp_path / "code.pkl").write_bytes(pickle.dumps(os.system))  # a pickle runs code when loaded
    with pytest.raises(ObjectFileError, match=r"code\.pkl"):
        ts.widget.object_load(tmp_path / "code.pkl")
    with pytest.raises(ObjectFileError, match="does not exist"):
        ts.widget.object_load(tmp_path / "missing.json")
    with pytest.raises(TypeError):
        ts.widget.object_dump({"array": np.ones(2)}, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "code.pkl",
        "obj.json",
    ]


def test_fix_random_is_seed_all_under_troubleshooter_names(monkeypatch):
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)  # set back after the test, as the seeds below
    state, python_state = np.random.get_state(), random.getstate()
    try:
        assert ts.fix_random is ts.widget.fix_random
        ts.fix_random(16)
        first = np.random.random(3)
        ts.fix_random()  # TroubleShooter's default seed, 16
        assert np.array_equal(np.random.random(3), first)
        assert os.environ["PYTHONHASHSEED"] == "16"
    finally:
        np.random.set_state(state)
        random.setstate(python_state)


def test_every_troubleshooter_migrator_and_widget_name_is_there():
    migrator = {
        "compare_list_dir",
        "compare_dict_dir",
        "cal_algorithm",
        "cal_cosine_sim",
        "convert_weight_and_load",
        "save_net_and_weight_params",
        "api_dump_init",
        "api_dump_start",
        "api_dump_stop",
        "api_dump_compare",
    }
    widget = {"fix_random", "load_ms_weight2net", "object_load", "object_dump", "get_pt_grads"}
    assert migrator <= set(ts.migrator.__all__) and all(callable(getattr(ts.migrator, n)) for n in migrator)
    assert all(callable(getattr(ts.widget, n)) for n in widget)


def test_the_helpers_import_no_framework():
    code = (
        "import sys, tscore as ts; ts.migrator.cal_cosine_sim; ts.widget.object_load; ts.fix_random; "
        "print([m for m in sys.modules if m.split('.')[0] in ('torch', 'mindspore', 'paddle')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_saves_of_troubleshooter_are_as_committed(tmp_path):
    """The committed folder holds exactly what the generating script says, nothing touched by hand."""
    assert sorted(p.name for p in SAVED_BY_TS.iterdir()) == sorted(PARTNERS)
    v = values()
    expected = {"0_l.0.npy": v["a"], "1_l.1.npy": v["b"], "2_d.x.npy": v["x"], "3_d.y.npy": v["y"]}
    for name, array in expected.items():
        assert np.array_equal(np.load(SAVED_BY_TS / name), array)
    shutil.copytree(SAVED_BY_TS, tmp_path / "copy")  # readable as any folder of .npy files
    assert ts.migrator.compare_npy_dir(SAVED_BY_TS, tmp_path / "copy", print_level=0).passed


def test_precision_tracker_says_which_plugin_reads_graph_files(tmp_path):
    from tscore.precision_tracker import GraphFileError

    (tmp_path / "graph.pb").write_bytes(b"\x00\x01 not a graph")
    with pytest.raises(GraphFileError, match=r"graph\.pb.*ts_mindspore"):
        ts.widget.precision_tracker(tmp_path / "graph.pb")
    with pytest.raises(ValueError, match="precision_flags"):
        ts.widget.precision_tracker(tmp_path / "graph.pb", ("lower",))


def test_dicts_in_rank_folders_pair_rank_by_rank(tmp_path):
    ours = _tscore_saves(tmp_path / "ours")
    for rank in ("rank0", "rank1"):
        shutil.copytree(SAVED_BY_TS, tmp_path / "theirs" / rank)
        (tmp_path / "mine" / rank).mkdir(parents=True)
        for name in PARTNERS.values():
            shutil.copy(ours / name, tmp_path / "mine" / rank / name)
    np.save(tmp_path / "mine" / "rank1" / "1_d_y.npy", values()["y"] * 2)  # one value differs, on rank 1
    report = ts.migrator.compare_dict_dir(tmp_path / "theirs", tmp_path / "mine", print_level=0)
    pairs = _pairs(report)
    assert pairs == {f"{r}/{a}": f"{r}/{b}" for r in ("rank0", "rank1") for a, b in PARTNERS.items()}
    assert [row.target_name for row in report.pairs if not row.passed] == ["rank1/1_d_y.npy"]


def test_troubleshooters_layout_counts_one_id_per_tensor_written(tmp_path, capsys):
    ts.reset_save_id()
    for nothing in (None, []):
        ts.save(str(tmp_path / "n"), nothing, layout="1.0.18")
    ts.save(str(tmp_path / "l"), [np.zeros(1), np.ones(1)], output_mode="print", layout="1.0.18")
    ts.save(str(tmp_path / "y"), np.zeros(2), layout="1.0.18")
    assert "_TS_SAVE_NAME:l.0" in capsys.readouterr().out
    assert [p.name for p in tmp_path.glob("*.npy")] == ["2_y.npy"]  # after the two printed tensors, 0 and 1
