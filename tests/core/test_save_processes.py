"""Several processes saving into one folder, and a save killed half way: nothing lost, debris removed.

Real processes (``sys.executable``), real ``kill -9``, real files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import tscore as ts
from tests.conftest import run_together
from tscore import cli, folder_writers
from tscore.npy_files import read_meta

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and flock")

# Each writer saves 20 arrays filled with its own number; both wait for each other before saving
# and before exiting, so they are two live writers of one folder, as two ranks of a job are.
WRITER = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    import tscore as ts
    me, folder, barrier = int(sys.argv[1]), sys.argv[2], sys.argv[3]

    def wait_all(tag):
        open(os.path.join(barrier, f"{tag}{me}"), "w").close()
        while not all(os.path.exists(os.path.join(barrier, f"{tag}{i}")) for i in (0, 1)):
            time.sleep(0.01)

    wait_all("start")
    for step in range(20):
        ts.save(os.path.join(folder, "x"), np.full(4, me * 1000 + step, dtype=np.float32))
    wait_all("done")
    """
)


def _run_writers(tmp_path: Path, script: str, folder: Path) -> None:
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    run_together([[sys.executable, "-c", script, str(i), str(folder), str(barrier)] for i in (0, 1)], 120)


def _values(folder: Path) -> dict[float, str]:
    """Map the first value of every saved array to its file name."""
    return {float(np.load(p)[0]): p.name for p in folder.glob("*.npy")}


def test_two_processes_saving_into_one_folder_keep_every_array(tmp_path):
    folder = tmp_path / "out"
    _run_writers(tmp_path, WRITER, folder)
    values = _values(folder)
    expected = {float(me * 1000 + step) for me in (0, 1) for step in range(20)}
    assert set(values) == expected  # all 40 arrays, each with its own values
    # The metadata records exactly the files that exist, each with its writer.
    meta = read_meta(str(folder))
    assert set(meta) == {p.name for p in folder.glob("*.npy")}
    assert len(open(folder / "tscore_meta.jsonl").read().splitlines()) == 40
    assert len({record["writer"] for record in meta.values()}) == 2
    # Nothing of tscore's bookkeeping is left once both writers have exited.
    assert not [n for n in os.listdir(folder) if n.startswith(".")]


def test_the_second_writer_gets_suffixed_names_and_one_warning(tmp_path):
    folder = tmp_path / "out"
    _run_writers(tmp_path, WRITER, folder)
    suffixed = [n for n in os.listdir(folder) if n.endswith(".npy") and n.count(".") == 2]
    plain = [n for n in os.listdir(folder) if n.endswith(".npy") and n.count(".") == 1]
    assert len(plain) == 20 and len(suffixed) == 20
    # The suffix names the process that wrote the file.
    meta = read_meta(str(folder))
    assert all(name.split(".")[1] == meta[name]["writer"] for name in suffixed)


# Writers started together that save one after the other: each waits until the one before it has
# saved, exited and let go of its lock. A file written after a process started is no earlier run's.
IN_TURN = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    import tscore as ts
    me, count, folder, barrier = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    locks = os.path.join(folder, ".tscore-writers")

    def mark(tag):
        open(os.path.join(barrier, f"{tag}{me}"), "w").write(str(os.getpid()))

    def has(tag, i):
        return os.path.exists(os.path.join(barrier, f"{tag}{i}"))

    mark("start")
    while not all(has("start", i) for i in range(count)):
        time.sleep(0.01)
    if me:
        before = open(os.path.join(barrier, f"start{me - 1}")).read()
        while not has("done", me - 1) or any(
            n.endswith(f"-{before}.lock") for n in (os.listdir(locks) if os.path.isdir(locks) else [])
        ):
            time.sleep(0.01)
    for step in range(20):
        ts.save(os.path.join(folder, "x"), np.full(4, me * 1000 + step, dtype=np.float32))
    mark("done")
    """
)


@pytest.mark.parametrize("count", [2, 3])
def test_processes_started_together_keep_every_array_when_the_first_ends_before_the_next_saves(
    tmp_path, count
):
    folder, barrier = tmp_path / "out", tmp_path / "barrier"
    barrier.mkdir()
    args = [str(count), str(folder), str(barrier)]
    run_together([[sys.executable, "-c", IN_TURN, str(i), *args] for i in range(count)], 180)
    values = _values(folder)
    assert set(values) == {float(me * 1000 + step) for me in range(count) for step in range(20)}
    # The first writer's files keep their names; each later one saved under its own suffix.
    assert sorted(values[float(step)] for step in range(20)) == sorted(f"{i}_x.npy" for i in range(20))
    meta = read_meta(str(folder))
    assert len({record["writer"] for record in meta.values()}) == count
    assert set(meta) == {p.name for p in folder.glob("*.npy")}


def test_a_single_process_keeps_troubleshooters_names_and_replaces_its_own_files(tmp_path):
    ts.save(str(tmp_path / "a"), np.zeros(2), auto_id=False)
    ts.save(str(tmp_path / "a"), np.ones(2), auto_id=False)
    assert sorted(n for n in os.listdir(tmp_path) if not n.startswith(".")) == ["a.npy", "tscore_meta.jsonl"]
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.ones(2))


def test_a_later_run_replaces_the_files_of_an_earlier_one(tmp_path):
    folder = tmp_path / "out"
    script = "import sys, numpy as np, tscore as ts; ts.save(sys.argv[1], np.full(2, float(sys.argv[2])))"
    for value in (1, 2):
        subprocess.run([sys.executable, "-c", script, str(folder / "x"), str(value)], check=True)
    assert [n for n in os.listdir(folder) if n.endswith(".npy")] == ["0_x.npy"]
    np.testing.assert_array_equal(np.load(folder / "0_x.npy"), [2.0, 2.0])


def test_a_process_that_outlives_runs_replaces_their_files_after_reset_save_id(tmp_path):
    """A notebook kernel: a script beside it saved and ended; the kernel's next run replaces its files."""
    folder = tmp_path / "out"
    script = "import sys, numpy as np, tscore as ts; ts.save(sys.argv[1], np.zeros(2))"
    subprocess.run([sys.executable, "-c", script, str(folder / "x")], check=True)
    ts.reset_save_id()
    ts.save(str(folder / "x"), np.ones(2))
    assert [n for n in os.listdir(folder) if n.endswith(".npy")] == ["0_x.npy"]
    np.testing.assert_array_equal(np.load(folder / "0_x.npy"), [1.0, 1.0])


KILLED = textwrap.dedent(
    """
    import sys, numpy as np, tscore as ts
    ts.save(sys.argv[1], np.arange(3.0))
    big = np.ones(25_000_000, dtype=np.float64)  # 200 MB
    while True:
        ts.save(sys.argv[1], big)
    """
)


def _kill_mid_save(folder: Path) -> None:
    """Kill -9 a process that saves 200 MB arrays in a loop while it writes a temporary file.

    The kill can land just after a write finished (the temporary file renamed); then it is tried again.
    """
    for _ in range(10):
        proc = subprocess.Popen([sys.executable, "-c", KILLED, str(folder / "big")])
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                started = (folder / "0_big.npy").exists()  # the small first save is done: the big ones run
                if started and any(folder_writers.TEMP_NAME.match(n) for n in os.listdir(folder)):
                    break
                time.sleep(0.002)
            else:
                pytest.fail("the saving process never wrote a temporary file")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        if any(folder_writers.TEMP_NAME.match(n) for n in os.listdir(folder)):
            return
    pytest.fail("ten kills all landed between two saves")


def test_a_killed_save_is_skipped_by_compare_then_removed_by_the_next_save(tmp_path):
    folder = tmp_path / "out"
    _kill_mid_save(folder)
    left = [n for n in os.listdir(folder) if folder_writers.TEMP_NAME.match(n)]
    assert left, "the kill left no temporary file"
    report = ts.migrator.compare_npy_dir(str(folder), str(folder), print_level=0)
    assert report.skipped_files["orig"] == left
    assert all(not folder_writers.TEMP_NAME.match(p.orig_name or "") for p in report.pairs)
    assert "unfinished save" in report.summary()
    ts.save(str(folder / "next"), np.zeros(3))
    assert not [n for n in os.listdir(folder) if folder_writers.TEMP_NAME.match(n)]
    assert not [
        n for n in os.listdir(folder) if folder_writers.LOCK_NAME.match(n) and str(os.getpid()) not in n
    ]


def test_tscore_clean_removes_debris_and_keeps_live_writers_files(tmp_path, capsys):
    folder = tmp_path / "out"
    _kill_mid_save(folder)
    live = folder / f".0_x.npy.{folder_writers.writer_id()}-0.tmp"  # this process is alive
    live.write_bytes(b"in progress")
    assert cli.main(["clean", "--dry-run", str(tmp_path)]) == 0
    assert "would remove" in capsys.readouterr().out
    assert any(folder_writers.TEMP_NAME.match(n) and n != live.name for n in os.listdir(folder))
    assert cli.main(["clean", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "removed" in out and "process that is gone" in out
    assert [n for n in os.listdir(folder) if folder_writers.TEMP_NAME.match(n)] == [live.name]
    assert not (folder / folder_writers.LOCKS_FOLDER).exists()  # the killed writer's lock, and its folder


def test_debris_is_never_read_as_data(tmp_path):
    ts.save(str(tmp_path / "x"), np.arange(4.0))
    host = folder_writers.writer_id().rsplit("-", 1)[0]
    debris = tmp_path / f".1_x.npy.{host}-999999999-0.tmp"  # a pid that cannot exist: its writer is gone
    np.save(tmp_path / "data.npy", np.arange(4.0))
    os.replace(tmp_path / "data.npy", debris)
    report = ts.migrator.compare_npy_dir(str(tmp_path), str(tmp_path), print_level=0)
    assert [p.orig_name for p in report.pairs] == ["0_x.npy"]
    assert json.loads(report.to_json())["skipped_files"] == {"orig": [debris.name], "target": [debris.name]}
    # The same file from a writer on another machine may still be in progress there: kept, not skipped.
    os.replace(debris, tmp_path / ".1_x.npy.otherhost-999999999-0.tmp")
    assert ts.migrator.compare_npy_dir(str(tmp_path), str(tmp_path), print_level=0).skipped_files == {}


EARLIER_AND_LIVE = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    import tscore as ts
    role, folder, barrier = sys.argv[1], sys.argv[2], sys.argv[3]
    if role == "other":  # a live writer of the folder that saves other names, and stays
        ts.save(os.path.join(folder, "y"), np.zeros(1), auto_id=False)
        open(os.path.join(barrier, "ready"), "w").close()
        while not os.path.exists(os.path.join(barrier, "done")):
            time.sleep(0.01)
    else:  # a new run saving the name an earlier (dead) run left
        ts.save(os.path.join(folder, "x"), np.full(2, 2.0), auto_id=False)
    """
)


def test_an_earlier_runs_file_is_replaced_even_while_another_process_writes_the_folder(tmp_path):
    folder, barrier = tmp_path / "out", tmp_path / "barrier"
    barrier.mkdir()
    old = "import sys, numpy as np, tscore as ts; ts.save(sys.argv[1], np.zeros(2), auto_id=False)"
    subprocess.run([sys.executable, "-c", old, str(folder / "x")], check=True)  # the earlier run: gone
    other = subprocess.Popen([sys.executable, "-c", EARLIER_AND_LIVE, "other", str(folder), str(barrier)])
    try:
        deadline = time.monotonic() + 120
        while not (barrier / "ready").exists():
            assert other.poll() is None and time.monotonic() < deadline, "the other writer never got ready"
            time.sleep(0.01)
        subprocess.run([sys.executable, "-c", EARLIER_AND_LIVE, "new", str(folder), str(barrier)], check=True)
    finally:
        (barrier / "done").touch()
        other.wait(timeout=60)
    assert sorted(p.name for p in folder.glob("*.npy")) == ["x.npy", "y.npy"]
    np.testing.assert_array_equal(np.load(folder / "x.npy"), [2.0, 2.0])


def test_without_file_locks_a_live_process_is_still_told_from_a_dead_one(tmp_path, monkeypatch):
    """A file system without flock: the lock files still name their writers, judged by process id."""

    def no_flock(*args: object) -> None:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(folder_writers.fcntl, "flock", no_flock)
    ts.save(str(tmp_path / "x"), np.zeros(1))
    assert folder_writers.writer_alive(
        str(tmp_path), *folder_writers.writer_id().rsplit("-", 1)[:1], os.getpid()
    )
    lock = tmp_path / folder_writers.LOCKS_FOLDER / f"{folder_writers.writer_id()}.lock"
    assert lock.exists()
    host = folder_writers.writer_id().rsplit("-", 1)[0]
    (tmp_path / folder_writers.LOCKS_FOLDER / f"{host}-999999999.lock").touch()  # no such process
    (tmp_path / f".1_x.npy.{host}-999999999-0.tmp").touch()
    assert folder_writers.live_writers(str(tmp_path)) == []
    assert {d.reason.split(" ")[0] for d in folder_writers.find_debris(str(tmp_path))} == {
        "unfinished",
        "lock",
    }
