"""MkDocs hook: draw the layers of the core from the table the import test enforces.

The picture on the architecture page is made at each build from ``LAYERS`` and the import graph of
``tests/core/test_import_graph.py``, so it cannot drift from what that test checks.
"""

from __future__ import annotations

import importlib.util
import textwrap
from html import escape
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "assets" / "layers.svg"
WIDTH, PAD, LINE, CHARS = 860, 16, 18, 88
COLOURS = {
    "API and CLI": "#e8eaf6",
    "features": "#e3f2fd",
    "helpers": "#e0f2f1",
    "contract": "#fff8e1",
}


def _import_test() -> ModuleType:
    path = ROOT / "tests" / "core" / "test_import_graph.py"
    spec = importlib.util.spec_from_file_location("_tscore_layers", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _short(name: str) -> str:
    return name.removeprefix("tscore.") if name != "tscore" else "tscore"


def layers_svg() -> str:
    """Draw the SVG: one band per layer, top to bottom, with how many imports cross into the layers below."""
    test = _import_test()
    graph = test.core_graph()
    names = list(test.LAYERS)[::-1]  # top first
    down = {layer: 0 for layer in names}
    for module, targets in graph.items():
        source = test.layer_of(module)
        down[source] += sum(1 for target in targets if test.layer_of(target) != source)
    parts, y = [], PAD
    for i, layer in enumerate(names):
        text = textwrap.wrap(", ".join(_short(m) for m in test.LAYERS[layer]), CHARS)
        height = PAD + LINE * (len(text) + 1) + PAD // 2
        parts.append(
            f'<rect x="{PAD}" y="{y}" width="{WIDTH - 2 * PAD}" height="{height}" rx="8" '
            f'fill="{COLOURS.get(layer, "#eeeeee")}" stroke="#455a64"/>'
            f'<text x="{2 * PAD}" y="{y + PAD + 6}" font-weight="bold">{escape(layer)}</text>'
        )
        for j, row in enumerate(text):
            parts.append(f'<text x="{2 * PAD}" y="{y + PAD + 6 + LINE * (j + 1)}">{escape(row)}</text>')
        y += height
        if i < len(names) - 1:
            mid = WIDTH // 2
            parts.append(
                f'<line x1="{mid}" y1="{y + 2}" x2="{mid}" y2="{y + 34}" stroke="#455a64" stroke-width="2" '
                f'marker-end="url(#arrow)"/>'
                f'<text x="{mid + 12}" y="{y + 24}" fill="#455a64">imports only downwards '
                f"({down[layer]} from {escape(layer)})</text>"
            )
            y += 40
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y + PAD}" '
        f'viewBox="0 0 {WIDTH} {y + PAD}" font-family="sans-serif" font-size="13">'
        '<defs><marker id="arrow" markerWidth="10" markerHeight="10" refX="10" refY="5" orient="auto">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#455a64"/></marker></defs>'
        "<title>The layers of the tscore core</title>"
    )
    return head + "".join(parts) + "</svg>\n"


def on_pre_build(config: Any, **kwargs: Any) -> None:
    """Write ``docs/assets/layers.svg`` when it differs from what the import test's table gives."""
    svg = layers_svg()
    if not OUT.exists() or OUT.read_text(encoding="utf-8") != svg:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(svg, encoding="utf-8")
