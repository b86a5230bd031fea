"""Arrows point one way: a plugin imports only tscore.plugin_api; the core, no plugin and no framework."""

from __future__ import annotations

import ast
import subprocess
import sys
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


# ---------------------------------------------------------------- the layers inside the core

# Bottom to top; a module may import its own layer and those below, never above, and no import closes
# a circle. Every module of the core must be named here (a prefix names a package and all its modules),
# so a new module is placed on purpose.
CONTRACT = ("tscore.contract", "tscore.hookspecs", "tscore.errors")
HELPERS = (
    "tscore.array_stats",
    "tscore.backend",
    "tscore.dtypes",
    "tscore.fill_values",
    "tscore.folder_writers",
    "tscore.json_files",
    "tscore.json_lines",
    "tscore.json_members",
    "tscore.layouts",
    "tscore.models",
    "tscore.module_hooks",
    "tscore.naming",
    "tscore.native_kernel",
    "tscore.npy_files",
    "tscore.numpy_plugin",
    "tscore.plugin_api",
    "tscore.plugins",
    "tscore.run_settings",
    "tscore.safe_pickle",
    "tscore.seeding",
    "tscore.structures",
    "tscore.svg_chart",
    "tscore.tensors",
    "tscore.terminal",
    "tscore.torch_style_api",
    "tscore.torch_style_layers",
    "tscore.value_transforms",
    "tscore.version",
)
FEATURES = (
    "tscore.checkpoint",
    "tscore.compare",
    "tscore.dump",
    "tscore.dump_compare",
    "tscore.dump_format",
    "tscore.html_report",
    "tscore.loss_compare",
    "tscore.netdiff",
    "tscore.precision_tracker",
    "tscore.printed_tensors",
    "tscore.saving",
)
API = (
    "tscore",
    "tscore.__main__",
    "tscore.cli",
    "tscore.migrator",
    "tscore.msprobe",
    "tscore.ptdbg",
    "tscore.testing",
    "tscore.widget",
)
LAYERS = {"contract": CONTRACT, "helpers": HELPERS, "features": FEATURES, "API and CLI": API}
RANK = {name: rank for rank, name in enumerate(LAYERS)}
# what the contract may import besides itself: pytest's hookspec.py imports pluggy and the standard library
CONTRACT_THIRD_PARTY = {"pluggy", "numpy", "pydantic"}


def core_modules() -> dict[str, Path]:
    """Every module of the core by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted((ROOT / "tscore").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def layer_of(module: str) -> str:
    """The layer a module belongs to: the longest name in :data:`LAYERS` that holds it.

    A name holds itself and, as a package, its modules; ``"tscore"`` names the package's own module alone.
    """
    best, length = "", -1
    for layer, names in LAYERS.items():
        for name in names:
            if (module == name or (name != "tscore" and module.startswith(name + "."))) and len(
                name
            ) > length:
                best, length = layer, len(name)
    return best


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING"):
            skip |= {id(n) for statement in node.body for n in ast.walk(statement)}  # else: runs
    return skip


def core_imports(module: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """The core modules ``module`` imports at run time, inside functions too: ``{target: line}``.

    ``from tscore.x import y`` counts as importing ``tscore.x.y`` when that is a module, else
    ``tscore.x``; blocks under ``if TYPE_CHECKING:`` do not count (they never run).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = (
                    package.split(".")[: len(parts) - node.level + 1] if (parts := package.split(".")) else []
                )
                base = ".".join([*parts, base] if base else parts)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("tscore") and target != module:
                found.setdefault(target, node.lineno)
    return found


def core_graph() -> dict[str, dict[str, int]]:
    """The import graph of the core: ``{module: {imported module: line}}``.

    Importing ``tscore.a.b`` also runs the package ``tscore.a``'s ``__init__``: that counts as
    importing ``tscore.a`` (the root package ``tscore`` aside: every module runs it, and it is the
    API layer's; a module's own packages aside: they are running already).
    """
    known = core_modules()
    graph = {module: core_imports(module, path, known) for module, path in known.items()}
    for module, targets in graph.items():
        for target, line in list(targets.items()):
            parts = target.split(".")
            for end in range(2, len(parts)):
                package = ".".join(parts[:end])
                if package in known and package != module and not module.startswith(package + "."):
                    targets.setdefault(package, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in graph:
                    continue
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_every_module_of_the_core_has_a_layer() -> None:
    unplaced = [module for module in core_modules() if not layer_of(module)]
    assert not unplaced, f"place these modules in a layer of this test (LAYERS): {unplaced}"


def test_the_core_has_no_import_cycle_counting_imports_inside_functions() -> None:
    found = cycles(core_graph())
    assert not found, "\n".join(f"cycle of {len(c)} modules: {', '.join(c)}" for c in found)


def test_imports_inside_the_core_point_down_the_layers_never_up() -> None:
    upward = []
    for module, targets in core_graph().items():
        for target, line in targets.items():
            if RANK[layer_of(target)] > RANK[layer_of(module)]:
                upward.append(f"{module}:{line} ({layer_of(module)}) imports {target} ({layer_of(target)})")
    assert not upward, "\n".join(upward)


def test_the_contract_imports_only_itself_pluggy_numpy_pydantic_and_the_standard_library() -> None:
    wrong = []
    for module, path in core_modules().items():
        if layer_of(module) != "contract":
            continue
        for line, imported in imported_modules(path):
            top = imported.split(".")[0]
            if top == "tscore":
                if (
                    layer_of(imported.rpartition(".")[0] or imported) != "contract"
                    and layer_of(imported) != "contract"
                ):
                    wrong.append(f"{module}:{line} imports {imported}")
            elif top not in CONTRACT_THIRD_PARTY and top not in sys.stdlib_module_names:
                wrong.append(f"{module}:{line} imports {imported}")
    assert not wrong, "\n".join(wrong)


def test_the_plugin_api_loads_no_feature_in_a_fresh_interpreter() -> None:
    code = (
        "import sys, tscore.plugin_api; print('\\n'.join(m for m in sys.modules if m.startswith('tscore')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    assert "tscore.plugin_api" in loaded
    features = [
        module for module in loaded if layer_of(module) in ("features", "API and CLI") and module != "tscore"
    ]
    assert not features, f"import tscore.plugin_api loads {features}"


def test_the_layer_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    source = tmp_path / "late.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from tscore.cli import main\n"
        "def f():\n    from tscore.saving import save\n",
        encoding="utf-8",
    )
    known = {"tscore.cli": source, "tscore.saving": source, "tscore.late": source}
    assert core_imports("tscore.late", source, known) == {"tscore.saving": 5}
    source.write_text("from typing import TYPE_CHECKING\nif not TYPE_CHECKING:\n    import tscore.cli\n")
    assert core_imports("tscore.late", source, known) == {"tscore.cli": 3}  # that block runs
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


def test_importing_a_module_counts_as_importing_its_packages() -> None:
    """``from tscore.dump_format.files import X`` runs ``tscore/dump_format/__init__.py`` too."""
    graph = core_graph()
    assert "tscore.dump_format" in graph["tscore.dump_compare.sources"]
    assert "tscore" not in graph["tscore.dump_compare.sources"]  # the root package runs for every module
