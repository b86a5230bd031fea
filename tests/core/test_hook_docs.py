"""The backend author's guide stays true: every hook documented, every hook called, the API in one module."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import tscore.plugin_api
from tscore import hookspecs

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
HOOKS = sorted(
    name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("ts_")
)
GUIDE = README[README.index("## Writing a backend") :].split("\n## ", 1)[0]


def test_the_guide_and_the_specs_name_the_same_hooks() -> None:
    headings = re.findall(r"^#### `(ts_\w+)`", GUIDE, flags=re.MULTILINE)
    assert sorted(headings) == HOOKS


@pytest.mark.parametrize("name", HOOKS)
def test_every_hookspec_is_documented_for_plugin_authors(name: str) -> None:
    assert re.search(rf"^#### `{name}`\n\S", GUIDE, flags=re.MULTILINE), f"README's guide has no {name}"
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert len(doc.split()) >= 15, f"{name}'s hookspec docstring does not say what it takes and returns"


def _hook_uses(path: Path) -> set[str]:
    """Names of the ``ts_`` attributes the code of ``path`` reads (``hook().ts_to_numpy(...)``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr.startswith("ts_")
    }


CALLED = {
    name
    for path in (ROOT / "tscore").rglob("*.py")
    if path.name not in ("hookspecs.py", "backend.py") and "testing" not in path.parts
    for name in _hook_uses(path)
}


@pytest.mark.parametrize("name", HOOKS)
def test_every_hookspec_has_a_caller_in_the_core(name: str) -> None:
    assert name in CALLED, f"nothing in tscore calls {name}: give it a caller or remove it"


def test_the_backend_base_answers_every_hook() -> None:
    from tscore.backend import Backend

    assert sorted(name for name in dir(Backend) if name.startswith("ts_")) == HOOKS


def test_the_public_plugin_api_exports_what_it_lists() -> None:
    for name in tscore.plugin_api.__all__:
        assert getattr(tscore.plugin_api, name) is not None
    assert {"Backend", "hookimpl", "TensorMeta", "LayerInfo", "HookHandles"} <= set(tscore.plugin_api.__all__)
