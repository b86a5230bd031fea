"""Every Python block of the manual runs (torch and MindSpore together); see :mod:`tests.docs_examples`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.docs_examples import DEFAULT_SESSION, PAGES, ROOT, page_id, run_page, sessions_of

OTHER_SESSIONS = {"paddle": "tests/paddle", "msadapter": "tests/msadapter", "gpu": "tests/gpu"}


@pytest.mark.parametrize("page", [p for p in PAGES if DEFAULT_SESSION in sessions_of(p)], ids=page_id)
def test_every_python_block_of_the_page_runs(page: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_page(page, DEFAULT_SESSION)
    assert result.ran, f"{page_id(page)}: no block ran"


def test_the_manual_shows_python_and_each_block_runs_somewhere() -> None:
    """Each session a block is sent to runs the manual's blocks in a test of its own."""
    blocks = sum(page.read_text(encoding="utf-8").count("```python") for page in PAGES)
    assert blocks >= 15, blocks
    for page in PAGES:
        for session in sessions_of(page) - {DEFAULT_SESSION}:
            assert session in OTHER_SESSIONS, f"{page_id(page)} sends a block to nox -s {session}"
            tests = ROOT / OTHER_SESSIONS[session]
            callers = [
                path
                for path in tests.glob("test_*.py")
                if any(
                    isinstance(node, ast.Constant) and node.value == session
                    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                )
                and "run_page" in path.read_text(encoding="utf-8")
            ]
            assert callers, f"nothing in {OTHER_SESSIONS[session]} runs the blocks sent to nox -s {session}"
