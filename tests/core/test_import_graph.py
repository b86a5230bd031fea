"""Arrows point one way: a plugin imports only tscore.plugin_api; the core, no plugin and no framework."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").exists())
FRAMEWORKS = ("torch", "mindspore", "paddle", "torch_npu", "mindtorch", "msadapter", "mindnlp", "jax")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports, at any depth (lazy imports inside functions included)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def test_every_plugin_directory_is_checked() -> None:
    assert {p.name for p in PLUGINS} >= {"ts_torch", "ts_mindspore", "ts_paddle"}


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_a_plugin_imports_only_the_public_plugin_api_of_tscore_and_no_other_plugin(plugin: Path) -> None:
    wrong = []
    for source in sorted(plugin.rglob("*.py")):
        for line, module in imported_modules(source):
            top = module.split(".")[0]
            if top == "tscore" and not module.startswith("tscore.plugin_api"):
                wrong.append(f"{source.relative_to(ROOT)}:{line} imports {module}")
            if top.startswith("ts_") and top != plugin.name:
                wrong.append(f"{source.relative_to(ROOT)}:{line} imports another plugin, {module}")
    assert not wrong, "\n".join(wrong)


def test_the_core_imports_no_framework_and_no_plugin() -> None:
    wrong = []
    for source in sorted((ROOT / "tscore").rglob("*.py")):
        for line, module in imported_modules(source):
            top = module.split(".")[0]
            if top in FRAMEWORKS or top.startswith("ts_"):
                wrong.append(f"{source.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)
