"""Every Python block of the manual runs (torch and MindSpore together); see :mod:`tests.docs_examples`."""

from __future__ import annotations

from tests.docs_examples import DEFAULT_SESSION, PAGES, ROOT, blocks_test, page_id, sessions_of

OTHER_SESSIONS = {"paddle": "tests/paddle", "msadapter": "tests/msadapter", "gpu": "tests/gpu"}

test_the_manual_s_blocks_run = blocks_test(DEFAULT_SESSION)


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
                if f'blocks_test("{session}")' in path.read_text(encoding="utf-8")
            ]
            assert callers, f"nothing in {OTHER_SESSIONS[session]} runs the blocks sent to nox -s {session}"
