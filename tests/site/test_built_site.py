"""The documentation site as built (``nox -s docs``): every page, the hook reference, the API, the pictures.

``mkdocs build --strict`` has already failed on a broken link or reference, or a page left out of
the navigation; these tests read what it wrote (``$TSCORE_SITE_DIR``, else ``site/``) for what strict
mode cannot see: a hook or a public function the reference leaves out, a list that Markdown merged
into a paragraph, a picture that is not there.
"""

from __future__ import annotations

import inspect
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

import tscore
import tscore.dump
import tscore.migrator
import tscore.msprobe.pytorch
import tscore.ptdbg
import tscore.widget
from tscore import hookspecs

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("TSCORE_SITE_DIR", ROOT / "site"))
DOCS = ROOT / "docs"
HOOKS = sorted(
    name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("ts_")
)


def page(path: str) -> str:
    """The HTML of one built page (``reference/hooks`` is ``reference/hooks/index.html``)."""
    built = SITE / path / "index.html"
    if not built.exists():
        pytest.fail(f"{built} was not built: run `nox -s docs` (mkdocs build --strict) first")
    return built.read_text(encoding="utf-8")


class _Sections(HTMLParser):
    """The text under each heading whose id is a dotted Python name."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, list[str]] = {}
        self.current: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        ident = dict(attrs).get("id")
        if re.fullmatch(r"h[1-6]", tag) and ident and ident.startswith("tscore."):
            self.current = ident
            self.sections[ident] = []

    def handle_data(self, data: str) -> None:
        if self.current:
            self.sections[self.current].append(data)


def sections(html: str) -> dict[str, str]:
    """``{"tscore.hookspecs.ts_to_numpy": its text, ...}`` for one page."""
    parser = _Sections()
    parser.feed(html)
    return {ident: " ".join("".join(parts).split()) for ident, parts in parser.sections.items()}


def test_the_hook_reference_documents_every_hookspec_and_no_other() -> None:
    found = sections(page("reference/hooks"))
    hooks = sorted(ident.rsplit(".", 1)[1] for ident in found if ident.startswith("tscore.hookspecs.ts_"))
    assert hooks == HOOKS


@pytest.mark.parametrize("name", HOOKS)
def test_each_hook_says_what_it_takes_returns_and_which_backend_method_answers(name: str) -> None:
    text = sections(page("reference/hooks"))[f"tscore.hookspecs.{name}"]
    summary = " ".join((inspect.getdoc(getattr(hookspecs, name)) or "").split("\n\n")[0].split())
    assert summary and summary.split("``")[0] in text, f"{name}'s summary is not in the reference"
    assert "In Backend:" in text, f"{name}'s section does not say which Backend method answers it"
    assert len(text.split()) >= 25, text


@pytest.mark.parametrize(
    ("module", "prefixes"),
    [
        (tscore.migrator, ("tscore.migrator",)),
        # ts.dump.compare_dumps is dump_compare's; ts.dump.compare is ptdbg's (dump_compare.compare: a module)
        (tscore.dump, ("tscore.dump", "tscore.dump_compare", "tscore.ptdbg")),
        (tscore.ptdbg, ("tscore.ptdbg",)),
        (tscore.widget, ("tscore.widget",)),
        (tscore.msprobe.pytorch, ("tscore.msprobe.pytorch",)),
        (tscore, ("tscore",)),
    ],
    ids=["migrator", "dump", "ptdbg", "widget", "msprobe.pytorch", "tscore"],
)
def test_the_api_reference_has_every_public_name(module: object, prefixes: tuple[str, ...]) -> None:
    found = sections(page("reference/api"))
    names = [
        name
        for name in module.__all__  # type: ignore[attr-defined]
        if not inspect.ismodule(getattr(module, name)) and name != "__version__"  # submodules have sections
    ]
    missing = [name for name in names if not any(f"{prefix}.{name}" in found for prefix in prefixes)]
    assert not missing, f"the API reference leaves out {missing} of {prefixes[0]}"


def _primary_navigation(html: str) -> str:
    """The site's navigation on one page (the left column), without the page's own links."""
    start = html.index('<nav class="md-nav md-nav--primary"')
    depth, at = 0, start
    for match in re.finditer(r"<(/?)nav\b", html[start:]):
        depth += -1 if match.group(1) else 1
        if depth == 0:
            at = start + match.end()
            break
    return html[start:at]


def test_every_page_is_built_and_in_the_navigation() -> None:
    navigation = _primary_navigation(page(""))
    for source in sorted(DOCS.rglob("*.md")):
        relative = source.relative_to(DOCS).with_suffix("")
        path = "" if relative.name == "index" else relative.as_posix()
        assert (SITE / path / "index.html").exists(), f"{source} was not built"
        href = "." if not path else f"{path}/"
        assert f'href="{href}"' in navigation, f"{source} is not in the navigation"


def test_no_list_was_merged_into_a_paragraph() -> None:
    """Markdown needs four spaces to nest and a blank line after an item's second paragraph."""
    merged = []
    for built in sorted(SITE.rglob("index.html")):
        html = built.read_text(encoding="utf-8")
        article = html[html.find("<article") : html.find("</article>")]
        for paragraph in re.findall(r"<p>(.*?)</p>", article, flags=re.DOTALL):
            text = re.sub(r"<code>.*?</code>", "", paragraph, flags=re.DOTALL)
            if re.search(r"(^|\n)\s*[*-] ", text) or "&lt;!--" in text:
                merged.append(f"{built.relative_to(SITE)}: {text[:80]!r}")
    assert not merged, "\n".join(merged)


def test_the_pictures_are_there_a_report_page_and_the_core_s_layers() -> None:
    screenshot = SITE / "assets" / "report.png"
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    layers = (SITE / "assets" / "layers.svg").read_text(encoding="utf-8")
    for layer in ("API and CLI", "features", "helpers", "contract"):
        assert f">{layer}<" in layers
    assert "assets/report.png" in page("") and "assets/layers.svg" in page("architecture")


def test_no_page_loads_anything_from_another_host() -> None:
    """The site reads offline, as tscore's reports do: no web fonts, scripts or images fetched."""
    fetched = set()
    for built in sorted(SITE.rglob("*.html")):
        html = built.read_text(encoding="utf-8")
        for tag in re.findall(r"<(?:script|img|link|iframe|source)\b[^>]*>", html):
            if re.search(r"""(?:src|href)=["']?(?:https?:)?//""", tag):
                fetched.add(f"{built.relative_to(SITE)}: {tag[:100]}")
    assert not fetched, "\n".join(sorted(fetched))
