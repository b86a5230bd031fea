"""Comparisons too big to hold: rows streamed block by block, in worker processes; the report keeps failures.

The block size and the row limits are made small so that a few hundred real files take every path
that a million would: many blocks, forked workers, a spool read back, CSV and JSON written as rows come.
"""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

import tscore as ts
from tscore.compare import blocks, report
from tscore.compare.pair_stats import batch_stats, numpy_stats

PAIRS = 300


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("many")
    rng = np.random.default_rng(0)
    (root / "a").mkdir()
    (root / "b").mkdir()
    for i in range(PAIRS):
        x = rng.standard_normal(int(rng.integers(1, 50))).astype(np.float32)
        y = x + np.float32(0.01) if i % 7 == 0 else x.copy()
        if i % 50 == 3:
            y[0] = np.nan
        np.save(root / "a" / f"{i}_t.npy", x)
        np.save(root / "b" / f"{i}_t.npy", y)
    np.save(root / "a" / "1000_only_a.npy", np.zeros(2))
    (root / "b" / "17_t.npy").write_bytes(b"not an npy file")
    return root


def _small_blocks(monkeypatch, keep_all_rows: int) -> None:
    monkeypatch.setattr(blocks, "PLAN_PAIRS", 32)
    monkeypatch.setattr(report, "KEEP_ALL_ROWS", keep_all_rows)
    monkeypatch.setattr(report, "MAX_FAILED_ROWS", 10)


def _rows(rep):
    return [row.model_dump() for row in rep.iter_pairs()]


def test_streamed_rows_in_workers_equal_the_rows_kept_in_one_process(folders, monkeypatch, tmp_path):
    whole = ts.migrator.compare_npy_dir(folders / "a", folders / "b", print_level=0, num_processes=1)
    assert whole.pairs_complete and len(whole.pairs) == PAIRS + 1

    _small_blocks(monkeypatch, keep_all_rows=100)
    out = tmp_path / "rows.csv"
    streamed = ts.migrator.compare_npy_dir(
        folders / "a", folders / "b", print_level=0, num_processes=2, output_file=out
    )
    assert not streamed.pairs_complete
    assert streamed.total == PAIRS + 1 and streamed.counts == whole.counts
    # The report keeps only failing rows, and at most MAX_FAILED_ROWS of them, in pair order.
    assert len(streamed.pairs) == 10 and not any(p.passed for p in streamed.pairs)
    assert [p.orig_name for p in streamed.pairs] == [p.orig_name for p in whole.pairs if not p.passed][:10]
    # Every row comes back, in order, with the same values (NaN compared as NaN).
    assert json.dumps(_rows(streamed), default=str) == json.dumps(_rows(whole), default=str)
    # The CSV written as the rows came holds every row, the same as the one written at the end.
    with open(out, newline="") as stream:
        written = list(csv.reader(stream))
    assert written == list(csv.reader(whole.to_csv().splitlines()))
    assert "iter_pairs() reads back all 301" in streamed.summary()


def test_streamed_json_is_the_same_document(folders, monkeypatch, tmp_path):
    whole = json.loads(ts.migrator.compare_npy_dir(folders / "a", folders / "b", print_level=0).to_json())
    _small_blocks(monkeypatch, keep_all_rows=100)
    out = tmp_path / "rows.json"
    ts.migrator.compare_npy_dir(folders / "a", folders / "b", print_level=0, output_file=out)
    streamed = json.loads(out.read_text())
    assert streamed["pairs"] == whole["pairs"]
    for key in ("counts", "passed", "orig_dir", "match"):
        assert streamed[key] == whole[key]
    assert streamed["pairs_complete"] is True  # the file holds every pair


def test_many_blocks_in_one_process_give_the_same_rows(folders, monkeypatch):
    whole = ts.migrator.compare_npy_dir(folders / "a", folders / "b", print_level=0)
    monkeypatch.setattr(blocks, "PLAN_PAIRS", 7)
    one = ts.migrator.compare_npy_dir(folders / "a", folders / "b", print_level=0, num_processes=1)
    assert one.pairs_complete
    assert json.dumps(_rows(one), default=str) == json.dumps(_rows(whole), default=str)
    # Batches of small files cut by their bytes, not only by the block: a few pairs a batch.
    monkeypatch.setattr(blocks, "SMALL_BATCH_BYTES", 500)
    cut = ts.migrator.compare_npy_dir(folders / "a", folders / "b", print_level=0, num_processes=1)
    assert json.dumps(_rows(cut), default=str) == json.dumps(_rows(whole), default=str)


def test_a_stopped_comparison_leaves_no_output_file(folders, monkeypatch, tmp_path):
    _small_blocks(monkeypatch, keep_all_rows=100)

    def explode(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(blocks, "batch_stats", explode)
    out = tmp_path / "rows.csv"
    with pytest.raises(KeyboardInterrupt):
        ts.migrator.compare_npy_dir(
            folders / "a", folders / "b", print_level=0, num_processes=1, output_file=out
        )
    assert list(tmp_path.iterdir()) == []


def _random_pairs(rng, count):
    orig, target = [], []
    for i in range(count):
        n = int(rng.integers(0, 40))
        dtype = [np.float32, np.float16, np.float64, np.int32, np.bool_][i % 5]
        a = (rng.standard_normal(n) * 3).astype(dtype)
        b = a.astype(np.float64) + (rng.standard_normal(n) * 1e-3 if i % 3 else 0)
        if n and i % 11 == 0:
            b[rng.integers(0, n)] = [np.nan, np.inf, -np.inf][i % 3]
        if n and i % 13 == 0:
            a = np.zeros(n, dtype)
            b = np.zeros(n)
        orig.append(a)
        target.append(b.astype([np.float32, np.float64][i % 2]))
    return orig, target


@pytest.mark.parametrize("equal_nan", [False, True])
@pytest.mark.parametrize("tolerances", [(1e-4, 1e-4), (0.0, 0.0), (1e-2, 0.0)])
def test_batched_statistics_equal_the_per_pair_kernel(equal_nan, tolerances):
    orig, target = _random_pairs(np.random.default_rng(5), 400)
    batched = batch_stats(orig, target, *tolerances, equal_nan)
    for a, b, got in zip(orig, target, batched, strict=True):
        want = numpy_stats(a, b, *tolerances, equal_nan)
        for name, value in vars(want).items():
            assert getattr(got, name) == pytest.approx(value, rel=1e-12, abs=1e-300, nan_ok=True), name


def test_a_parent_of_rank_folders_pairs_rank_by_rank(tmp_path):
    for side, scale in (("a", 1.0), ("b", 2.0)):
        for rank in (1, 0, 10):
            folder = tmp_path / side / f"rank{rank}"
            folder.mkdir(parents=True)
            np.save(folder / "0_x.npy", np.full(3, rank * scale))
    rep = ts.migrator.compare_npy_dir(tmp_path / "a", tmp_path / "b", print_level=0)
    assert [p.orig_name for p in rep.pairs] == ["rank0/0_x.npy", "rank1/0_x.npy", "rank10/0_x.npy"]
    assert [p.passed for p in rep.pairs] == [True, False, False]


def test_a_worker_that_dies_costs_only_its_block(folders, monkeypatch):
    """A worker killed mid-block (a crash, the OOM killer): that block's pairs become rows that say so."""
    parent = os.getpid()
    real_plan = blocks.plan_block

    def dying(names, *args, **kwargs):
        if os.getpid() != parent and any(name == "40_t.npy" for name, _ in names):
            os._exit(3)
        return real_plan(names, *args, **kwargs)

    monkeypatch.setattr(blocks, "plan_block", dying)
    _small_blocks(monkeypatch, keep_all_rows=1000)
    rep = ts.migrator.compare_npy_dir(folders / "a", folders / "b", print_level=0, num_processes=2)
    assert rep.total == PAIRS + 1
    died = [p for p in rep.pairs if "worker process died" in p.message]
    assert [p.orig_name for p in died] == [f"{i}_t.npy" for i in range(32, 64)]  # the block of 40_t.npy
    assert all(p.status.value == "unreadable" for p in died)
    whole = {
        p.orig_name: p.passed
        for p in ts.migrator.compare_npy_dir(folders / "a", folders / "b", print_level=0).pairs
    }
    assert all(p.passed == whole[p.orig_name] for p in rep.pairs if p not in died)


def test_file_names_that_are_not_utf8_are_compared_and_written(tmp_path, monkeypatch):
    name = os.fsdecode(b"x\xff.npy")
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        np.save(tmp_path / side / "plain.npy", np.ones(2))
        np.save(os.path.join(tmp_path / side, name), np.ones(2))
    out = tmp_path / "rows.csv"
    rep = ts.migrator.compare_npy_dir(tmp_path / "a", tmp_path / "b", print_level=0, output_file=out)
    assert rep.passed and {p.orig_name for p in rep.pairs} == {name, "plain.npy"}
    assert b"x\xff.npy" in out.read_bytes()
    rep.write(tmp_path / "rows.json")  # JSON escapes the byte
    assert "x\\\\xff.npy" in (tmp_path / "rows.json").read_text()
    _small_blocks(monkeypatch, keep_all_rows=0)
    streamed = ts.migrator.compare_npy_dir(tmp_path / "a", tmp_path / "b", print_level=0)
    assert {p.orig_name for p in streamed.iter_pairs()} == {name, "plain.npy"}


def test_two_readers_of_a_streamed_report_do_not_disturb_each_other(folders, monkeypatch):
    _small_blocks(monkeypatch, keep_all_rows=10)
    rep = ts.migrator.compare_npy_dir(folders / "a", folders / "b", print_level=0)
    pairs = list(zip(rep.iter_pairs(), rep.iter_pairs(), strict=True))
    assert len(pairs) == PAIRS + 1 and all(a.orig_name == b.orig_name for a, b in pairs)


def test_files_saved_before_the_job_started_are_compared_beside_the_rank_folders(tmp_path):
    for side, value in (("a", 1.0), ("b", 2.0)):
        (tmp_path / side / "rank0").mkdir(parents=True)
        np.save(tmp_path / side / "0_early.npy", np.ones(2))
        np.save(tmp_path / side / "rank0" / "1_late.npy", np.full(2, value))
    rep = ts.migrator.compare_npy_dir(tmp_path / "a", tmp_path / "b", print_level=0)
    assert [(p.orig_name, p.passed) for p in rep.pairs] == [
        ("0_early.npy", True),
        ("rank0/1_late.npy", False),
    ]
