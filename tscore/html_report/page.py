"""One comparison as a page: what every kind of report gives the HTML renderer, and the renderer.

Each report turns its model into a :class:`ReportPage` (its ``to_page()``, in
a module beside it: :mod:`tscore.compare.pair_page`,
:mod:`tscore.dump_compare.report_page` ...): a summary line, the settings, the rows as columns in
execution order, which rows fail, each row's details (stack, settings,
message), the error metrics a person can chart, the first divergence and,
where the tensors were kept, histograms of the differences. :func:`render`
makes one self-contained HTML file of it: styles, script, charts and data
inline, nothing fetched (a Content-Security-Policy forbids it), names shown
as text whatever they contain.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from tscore.html_report.chart import metric_chart
from tscore.npy_files import write_atomic
from tscore.version import __version__

PAGE_ROWS = 100  # rows in one page of the table


@dataclass(frozen=True)
class Column:
    """One column of the table: its key in :attr:`ReportPage.cells`, its title, how it sorts."""

    key: str
    title: str
    numeric: bool = False
    percent: bool = False  # a share in 0..1, shown as a percentage (sorts as a number)


@dataclass
class Metric:
    """An error metric of every row, drawn along the execution order on a log scale."""

    key: str  # "max_rel", "cosine_distance", "max_abs", "error"
    title: str  # "max relative error"
    values: list[float | None]  # one per row; None: the row has no such value
    tolerance: float | None = None  # drawn as a dashed line
    tolerance_label: str = ""  # what the line means; default "tolerance T"


@dataclass
class Histogram:
    """How the element-wise differences (target - orig) of one row spread: bin edges and counts."""

    edges: list[float]
    counts: list[int]
    elements: int

    def as_data(self) -> dict[str, Any]:
        """Return the histogram as the page's script reads it."""
        return {"edges": [_number(e) for e in self.edges], "counts": self.counts, "n": self.elements}


@dataclass
class ReportPage:
    """Everything one HTML report shows, whatever kind of comparison it comes from."""

    kind: str  # "compare_npy_dir", "checkpoint", "netdiff", "dump_compare"
    title: str
    passed: bool
    summary: str  # the one line to act on
    facts: list[tuple[str, str]]  # settings and inputs: ("rtol", "0.0001"), ("orig", "run_a/")
    columns: list[Column]
    cells: dict[str, list[Any]]  # column key -> one value per row
    failed: list[bool]
    metrics: list[Metric]
    details: list[str] = field(default_factory=list)  # texts shown when a row is clicked
    detail_of: list[int] | None = None  # per row: its index in details, -1 for none
    groups: list[str] | None = None  # per row, charted apart: "forward", "backward"
    first: int | None = None  # the row of the first divergence
    first_label: str = ""
    histograms: dict[int, Histogram] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # lines below the summary

    @property
    def rows(self) -> int:
        """Return how many rows the table has."""
        return len(self.failed)


def _number(value: Any, digits: int = 7) -> Any:
    """Return a JSON-safe cell: floats to ``digits`` significant digits, NaN and infinities as text."""
    if isinstance(value, float):
        if math.isfinite(value):
            return float(f"{value:.{digits}g}")
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _payload(page: ReportPage, points: dict[str, list[tuple[int, float]]]) -> str:
    """Pack the table's data as gzip-compressed JSON in base64: a tenth of the size, decoded in the page.

    ``points`` holds, per metric, the points each chart draws (row, value): a click on a chart
    goes to the highest drawn point near it, the spike a person aimed at, not to a row the chart
    only summarises.
    """
    data = {
        "columns": [
            {"key": c.key, "title": c.title, "numeric": c.numeric, "percent": c.percent} for c in page.columns
        ],
        "cells": {
            # a share keeps every digit: 99.9999996% must not read as 100%
            c.key: [_number(v, 17 if c.percent else 7) for v in page.cells[c.key]]
            if c.numeric
            else page.cells[c.key]
            for c in page.columns
        },
        "failed": [1 if f else 0 for f in page.failed],
        "details": page.details,
        "detailOf": page.detail_of,
        "groups": page.groups,
        "first": page.first,
        "hist": {str(row): h.as_data() for row, h in page.histograms.items()},
        "points": {
            key: {"rows": [r for r, _ in drawn], "values": [_number(v) for _, v in drawn]}
            for key, drawn in points.items()
        },
        "pageRows": PAGE_ROWS,
    }
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    packed = gzip.compress(text.encode("utf-8", "backslashreplace"), compresslevel=6, mtime=0)
    return base64.b64encode(packed).decode("ascii")


def _asset(name: str) -> str:
    return resources.files("tscore.html_report").joinpath("assets", name).read_text(encoding="utf-8")


def render(page: ReportPage, metric: str | None = None) -> str:
    """Render ``page`` as one self-contained HTML document.

    :param metric: the key of the metric charted first (the page switches between all of them);
        default: the page's first metric.
    :raises ValueError: naming the metrics there are, when ``metric`` is not one of them.
    """
    import jinja2  # only when a page is written: importing tscore does not import it

    keys = [m.key for m in page.metrics]
    if metric is not None and metric not in keys:
        raise ValueError(f"metric {metric!r} is not one of this report's: {', '.join(keys) or 'none'}")
    shown = metric or (keys[0] if keys else None)
    charts = []
    points: dict[str, list[tuple[int, float]]] = {}
    for m in page.metrics:
        svg, points[m.key] = metric_chart(page, m) if page.rows else ("", [])
        charts.append({"key": m.key, "title": m.title, "svg": svg, "shown": m.key == shown})
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("tscore.html_report", "assets"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return environment.get_template("report.html.j2").render(
        page=page,
        charts=charts,
        payload=_payload(page, points),
        style=_asset("report.css"),
        script=_asset("report.js"),
        failing=sum(page.failed),
        version=__version__,
    )


def write_page(page: ReportPage, path: str | os.PathLike[str], metric: str | None = None) -> str:
    """Render ``page`` and write it to ``path`` atomically; return the path.

    :raises TargetPathError: naming the path, when its folder is missing or not writable.
    """
    target = os.fspath(path)
    html = render(page, metric).encode("utf-8", "backslashreplace")
    return write_atomic(target, lambda stream: stream.write(html))
