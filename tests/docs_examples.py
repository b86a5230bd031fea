"""Run the Python blocks of the manual (``docs/**/*.md``, the README) page by page, so it cannot drift.

The blocks are collected by Sybil (a maintained collector of examples in documentation): every
``python`` block of a page runs in order in one namespace, in a fresh working folder, beside the
invisible ones (``<!-- invisible-code-block: python ... -->``) that set up what a block assumes and
check what its comments claim. A block that needs what another test session installs is marked
``<!-- skip: next "runs in nox -s paddle" -->`` and runs there; one that needs hardware this machine
cannot have is marked ``<!-- skip: next "needs an Ascend NPU" -->`` and never runs (a GPU block runs in
``nox -s gpu``, on a machine lent one).
Any other mark is an error: a block is never skipped for a missing install.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sybil import Document, Example, Sybil
from sybil.evaluators.skip import Skipper
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
DEFAULT_SESSION = "both"  # torch and MindSpore together: what most pages show
ELSEWHERE = re.compile(r"^runs in nox -s (\w+)$")
HARDWARE = ("needs an Ascend NPU",)
SYBIL = Sybil(parsers=[PythonCodeBlockParser(), SkipParser()])


@dataclass
class PageRun:
    """What running one page's blocks in one session did."""

    ran: list[int] = field(default_factory=list)  # the lines of the blocks run here
    elsewhere: dict[int, str] = field(default_factory=dict)  # line: the session that runs it
    hardware: dict[int, str] = field(default_factory=dict)  # line: the hardware it needs


def page_id(page: Path) -> str:
    """The page's path in the repository, as a test id."""
    return page.relative_to(ROOT).as_posix()


def where_it_runs(reason: str | None) -> tuple[str | None, str | None]:
    """``(session, None)`` for a block a session runs, ``(None, hardware)`` for one never run here."""
    if reason is None:
        return DEFAULT_SESSION, None
    text = ast.literal_eval(reason.strip())
    if not isinstance(text, str):
        raise ValueError(f"a skip mark's reason must be a string, not {reason}")
    if match := ELSEWHERE.match(text):
        return match[1], None
    if text in HARDWARE:
        return None, text
    raise ValueError(f"a block may be marked only 'runs in nox -s SESSION' or one of {HARDWARE}: {text!r}")


def _blocks(page: Path, document: Document) -> Iterator[tuple[Example, str | None, str | None]]:
    """Yield each code block of ``document`` with where it runs: ``(block, session, None)`` or
    ``(block, None, hardware)``.
    """
    mark: str | None = None
    for example in document:
        if isinstance(example.region.evaluator, Skipper):
            action, mark = example.parsed
            if action != "next":
                raise ValueError(f"{page_id(page)}:{example.line}: only 'skip: next' marks are used")
            continue
        yield (example, *where_it_runs(mark))
        mark = None


def sessions_of(page: Path) -> set[str]:
    """The sessions that run some block of ``page``."""
    return {session for _, session, _ in _blocks(page, SYBIL.parse(page)) if session}


def run_page(page: Path, session: str) -> PageRun:
    """Run the blocks of ``page`` that ``session`` runs, in order, in the current folder."""
    document = SYBIL.parse(page)
    document.namespace["ROOT"] = ROOT
    result = PageRun()
    for example, runs_in, hardware in _blocks(page, document):
        if hardware:
            result.hardware[example.line] = hardware
        elif runs_in != session:
            result.elsewhere[example.line] = str(runs_in)
        else:
            example.region.evaluator(example)
            result.ran.append(example.line)
    return result


def blocks_test(session: str) -> Callable[..., None]:
    """The test a session's module binds to run, page by page, the blocks the manual gives that session.

    ``test_the_manual_s_blocks_run = blocks_test("paddle")`` in ``tests/paddle``; a test of
    ``nox -s both`` checks that every session a block names has such a line.
    """

    @pytest.mark.parametrize("page", [p for p in PAGES if session in sessions_of(p)], ids=page_id)
    def test(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        assert run_page(page, session).ran, f"{page_id(page)}: no block ran in nox -s {session}"

    test.__doc__ = f"The manual's Python blocks that ``nox -s {session}`` runs run, page by page."
    return test
