"""Fixtures shared by every test folder."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import subprocess
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tscore
import tscore.ptdbg
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
def no_dump_left_running(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that ends with a debugger still running fails, and that debugger is closed.

    A running debugger keeps its hooks installed (and ``atexit`` keeps it alive), so a test that
    fails between ``start()`` and ``stop()`` would otherwise change every later test in the
    process. ptdbg's per-process settings start fresh for each test, as in a new process.
    """
    started: list[weakref.ref[Debugger]] = []  # weak: the test's own references decide when one is freed
    start = Debugger.start

    @functools.wraps(start)
    def recorded_start(self: Debugger, *args: object, **kwargs: object) -> None:
        start(self, *args, **kwargs)
        started.append(weakref.ref(self))

    monkeypatch.setattr(Debugger, "start", recorded_start)
    monkeypatch.setattr(tscore.ptdbg, "_session", tscore.ptdbg._Session())
    yield
    left = [debugger for debugger in (ref() for ref in started) if debugger is not None and debugger.running]
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

    All are killed when one fails or hangs, so none is left waiting for the others.
    """
    procs = [subprocess.Popen(command, stderr=subprocess.PIPE) for command in commands]
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err.decode()
    finally:
        for proc in procs:
            proc.kill()
