"""The backend author's guide stays true: every hook documented, every hook called, the API in one module.

The hook reference is generated from ``tscore/hookspecs.py`` (``docs/reference/hooks.md``); what the built
page shows is checked by ``nox -s docs`` (``tests/site``). Here: the source it is generated from.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import tscore.plugin_api
from tscore import hookspecs

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "writing-a-backend.md").read_text(encoding="utf-8")
REFERENCE = (ROOT / "docs" / "reference" / "hooks.md").read_text(encoding="utf-8")
HOOKS = sorted(
    name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("ts_")
)


def test_the_hook_reference_is_generated_from_the_hookspecs_and_linked_from_the_guide() -> None:
    assert re.search(r"^::: tscore\.hookspecs$", REFERENCE, flags=re.MULTILINE)
    assert 'filters: ["^ts_"]' in REFERENCE
    assert "(reference/hooks.md)" in GUIDE


@pytest.mark.parametrize("name", HOOKS)
def test_every_hookspec_is_documented_for_plugin_authors(name: str) -> None:
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert len(doc.split()) >= 15, f"{name}'s hookspec docstring does not say what it takes and returns"
    assert "In :class:`~tscore.backend.Backend`:" in doc, (
        f"{name}'s docstring does not say which method answers it"
    )


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


def test_the_guide_and_the_conformance_kit_name_the_same_factories() -> None:
    """The guide lists each factory a kit subclass writes, in words and by name, and no other."""
    from tscore.testing import conformance

    required = {
        name
        for name, member in vars(conformance.BackendConformance).items()
        if callable(member) and "raise NotImplementedError" in inspect.getsource(member)
    }
    assert required == set(conformance.FACTORIES)
    kit = re.search(r"give it\s+`framework` and (\w+) factories \(([^)]*(?:\([^)]*\)[^)]*)*)\)", GUIDE)
    assert kit, "the guide no longer says which factories the kit needs"
    count = {"five": 5, "six": 6, "seven": 7}[kit.group(1)]
    named = set(re.findall(r"`(\w+)`", kit.group(2)))
    assert count == len(conformance.FACTORIES) and named == set(conformance.FACTORIES), named
    docstring = inspect.getdoc(conformance) or ""
    assert all(f"def {name}(" in docstring for name in conformance.FACTORIES)


def _kinds_block() -> str:
    from tscore.contract.kinds import NEUTRAL_KINDS

    rows = ["| kind | family | role | channels | what it computes |", "| --- | --- | --- | --- | --- |"]
    rows += [
        f"| `{k.name}` | `{k.family}` | {k.role} | {'yes' if k.channels else ''} | {k.what} |"
        for k in NEUTRAL_KINDS
    ]
    return "\n".join(rows)


def test_the_guide_lists_the_neutral_layer_kinds_generated_from_the_code() -> None:
    """The table between the ``kinds`` markers is ``tscore.contract.kinds``; a failure prints the new one."""
    found = re.search(r"<!-- kinds:start -->\n(.*?)\n<!-- kinds:end -->", GUIDE, flags=re.DOTALL)
    expected = _kinds_block()
    assert found, "the guide has no <!-- kinds:start --> ... <!-- kinds:end --> table"
    assert found.group(1) == expected, "the kinds table is stale; replace it with:\n" + expected


def test_the_guide_shows_which_way_a_transform_goes_with_a_worked_example() -> None:
    """Direction (neutral to yours), axis meaning (numpy's), a Dense [in, out] and an HWIO kernel."""
    from tscore import value_transforms as transforms

    for needed in ("neutral to yours", "`[in, out]`", "HWIO", "numpy.transpose"):
        assert needed in GUIDE, f"the guide does not say {needed}"
    for spec, before, after in (
        ("transpose(1, 0)", (8, 4), (4, 8)),
        ("transpose(2, 3, 1, 0)", (8, 3, 5, 5), (5, 5, 3, 8)),
    ):
        assert f'"{spec}"' in GUIDE

        assert transforms.apply(spec, np.zeros(before)).shape == after
