"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
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
