"""The manual's Python blocks marked ``runs in nox -s gpu`` run here, on CUDA (:mod:`tests.docs_examples`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_examples import PAGES, page_id, run_page, sessions_of

SESSION = "gpu"


@pytest.mark.parametrize("page", [p for p in PAGES if SESSION in sessions_of(p)], ids=page_id)
def test_the_blocks_the_manual_sends_here_run(page: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_page(page, SESSION).ran
