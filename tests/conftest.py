"""Fixtures shared by every test folder."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tscore
import tscore.ptdbg
from tscore.dump import api_dump
from tscore.dump.debugger import Debugger

# the GPU tests run only where `nox -s gpu` asks for them, on a machine with CUDA (see tests/gpu)
collect_ignore = [] if os.environ.get("TSCORE_GPU") == "1" else ["gpu"]


@pytest.fixture(autouse=True)
def fresh_ids() -> Iterator[None]:
    """Each test starts the save id counter at 0, as a new process would."""
    tscore.reset_save_id()
    yield
    tscore.reset_save_id()


@pytest.fixture(autouse=True)
def no_dump_left_running() -> Iterator[None]:
    """A test that ends with a debugger still running fails, and that debugger is closed.

    A running debugger keeps its hooks installed (and ``atexit`` keeps it alive), so a test that
    fails between ``start()`` and ``stop()`` would otherwise change every later test in the
    process. The per-process settings of ptdbg's functions and of ``api_dump_*`` start fresh
    for each test, as in a new process. (Patched apart from the test's ``monkeypatch``, which a
    test may undo.)
    """
    started: list[weakref.ref[Debugger]] = []  # weak: the test's own references decide when one is freed
    start = Debugger.start

    @functools.wraps(start)
    def recorded_start(self: Debugger, *args: object, **kwargs: object) -> None:
        start(self, *args, **kwargs)
        started.append(weakref.ref(self))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Debugger, "start", recorded_start)
        patch.setattr(tscore.ptdbg, "_session", tscore.ptdbg._Session())
        patch.setattr(api_dump, "_state", api_dump._ApiDump())
        yield
        left = [
            debugger for debugger in (ref() for ref in started) if debugger is not None and debugger.running
        ]
        for debugger in left:
            with contextlib.suppress(Exception):  # an overflow limit found at stop(), for one
                debugger.close()
    assert not left, f"the test left {len(left)} debugger(s) running; they are closed now"


@pytest.fixture()
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test inside its own temporary folder (spec examples write to ./)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def npy_names(folder: str | os.PathLike[str]) -> list[str]:
    """Sorted .npy file names in ``folder``."""
    return sorted(p.name for p in Path(folder).glob("*.npy"))


def cyclic_garbage(run: Callable[[], object]) -> list[str]:
    """The types of the objects ``run()`` left in reference cycles: freed only by Python's collector."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return sorted(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def run_together(commands: list[list[str]], timeout: float) -> None:
    """Run ``commands`` as processes side by side; each must exit 0 (else its stderr is the message).

    The first to fail is reported as soon as it exits, and all are then killed and reaped, so
    none is left waiting for the others (a barrier, a rendezvous).
    """
    errors = [tempfile.TemporaryFile() for _ in commands]
    procs = [subprocess.Popen(command, stderr=err) for command, err in zip(commands, errors, strict=True)]
    try:
        deadline = time.monotonic() + timeout
        while [proc.poll() for proc in procs].count(None) and time.monotonic() < deadline:  # polls each
            for proc, err in zip(procs, errors, strict=True):
                if proc.returncode not in (None, 0):
                    err.seek(0)
                    raise AssertionError(f"{proc.args!r} exited {proc.returncode}: {err.read().decode()}")
            time.sleep(0.05)
        for proc, err in zip(procs, errors, strict=True):
            err.seek(0)
            assert proc.returncode is not None, f"{proc.args!r} still ran after {timeout} s"
            assert proc.returncode == 0, f"{proc.args!r} exited {proc.returncode}: {err.read().decode()}"
    finally:
        for proc, err in zip(procs, errors, strict=True):
            proc.kill()
            proc.wait()
            err.close()
