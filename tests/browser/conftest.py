"""A real headless Chromium (Debian's, driven by Playwright) that opens report pages as a person would."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

# Chromium's own connections (updates, sync, the safe-browsing list) are off: the machine has no
# network, and the test counts every request a page makes.
FLAGS = [
    "--no-sandbox",  # root in CI
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Start Chromium once for the session."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    assert executable, "Chromium is not installed: `nox -s browser` installs Debian's chromium package"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=FLAGS)
        yield launched
        launched.close()


@dataclass
class Opened:
    """A report open in the browser, with every request it made and every error its script raised."""

    page: Page
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def shown(self) -> int:
        """Return how many rows the table's filters leave."""
        return int(self.page.evaluate("document.body.dataset.shown"))

    def column(self, index: int) -> list[str]:
        """Return the texts of one column of the table's visible page (0: the row number)."""
        return self.page.eval_on_selector_all(
            "#body tr", f"rows => rows.map(r => r.children[{index}].textContent)"
        )

    def header_index(self, title: str) -> int:
        """Return the position of the column titled ``title``."""
        titles = self.page.eval_on_selector_all("#head th", "cells => cells.map(c => c.textContent)")
        return titles.index(title)


@pytest.fixture()
def open_report(browser: Browser, tmp_path: Path) -> Iterator[Any]:
    """Open a report file; wait until its rows are drawn; keep a screenshot of it beside it."""
    contexts = []

    def opener(path: str | Path) -> Opened:
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page)
        page.on("request", lambda request: opened.requests.append(request.url))
        page.on("pageerror", lambda error: opened.errors.append(str(error)))
        page.on("console", lambda message: message.type == "error" and opened.errors.append(message.text))
        url = Path(path).resolve().as_uri()
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        shot = Path(path).with_suffix(".png")
        page.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000  # a real picture of the page, not a blank one
        assert opened.requests == [url], "the page fetched something beside itself"
        return opened

    yield opener
    for context in contexts:
        context.close()
