"""Fixtures shared by every test folder."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tscore

# the GPU tests run only where `nox -s gpu` asks for them, on a machine with CUDA (see tests/gpu)
collect_ignore = [] if os.environ.get("TSCORE_GPU") == "1" else ["gpu"]


@pytest.fixture(autouse=True)
def fresh_ids() -> Iterator[None]:
    """Each test starts the save id counter at 0, as a new process would."""
    tscore.reset_save_id()
    yield
    tscore.reset_save_id()


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
