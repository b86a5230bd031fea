"""The chart of a report: one error metric of every row along the execution order, log scale.

A report of 200,000 rows would make an SVG of megabytes that a browser draws
slowly, so the rows are cut into at most :data:`MAX_POINTS` runs of
consecutive rows and each run is drawn as its worst row: a spike is never
averaged away, and the point sits at that row, so a click on it finds it.
Rows of each group (forward and backward calls) are drawn as their own line.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tscore.svg_chart import Mark, Series, line_chart

if TYPE_CHECKING:
    from tscore.html_report.page import Metric, ReportPage

MAX_POINTS = 1_000  # points per line at most
LABEL_CHARS = 60  # the first divergence's label is cut to this many characters


def _values(metric: Metric, failed: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    """Return the values as float64 (non-finite: +inf, the worst) and which rows are drawn.

    A failing row without the value (a missing file, shapes that differ) is drawn as not finite,
    so that no failure is left off the chart.
    """
    present = np.fromiter(
        (v is not None or f for v, f in zip(metric.values, failed, strict=True)),
        dtype=bool,
        count=len(metric.values),
    )
    values = np.fromiter(
        (math.inf if v is None or not math.isfinite(v) else v for v in metric.values),
        dtype=np.float64,
        count=len(metric.values),
    )
    return values, present


def floor_of(values: np.ndarray, tolerance: float | None) -> float:
    """Return where a log scale draws errors of 0: a decade under the smallest positive value."""
    positive = values[np.isfinite(values) & (values > 0)]
    candidates = [float(positive.min())] if positive.size else []
    if tolerance is not None and tolerance > 0:
        candidates.append(tolerance)
    smallest = min(candidates) if candidates else 1e-7
    return float(10.0 ** (math.floor(math.log10(smallest)) - 1))


def worst_per_run(rows: np.ndarray, values: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Cut ``rows`` (ascending) into runs of ``width`` rows; return each run's worst row and its value."""
    if rows.size == 0:
        return rows, values[rows]
    run = rows // width
    picked = values[rows]
    order = np.lexsort((-picked, run))  # within each run, the largest value first
    starts = np.concatenate(([0], np.nonzero(np.diff(run[order]))[0] + 1))
    worst = order[starts]
    return rows[worst], picked[worst]


def metric_chart(page: ReportPage, metric: Metric) -> tuple[str, list[tuple[int, float]]]:
    """Draw ``metric`` of every row of ``page`` as an SVG line chart, the first divergence marked.

    Return the SVG and the points it draws as ``(row, value)``, by row (not finite: inf).
    """
    values, present = _values(metric, page.failed)
    floor = floor_of(values, metric.tolerance)
    values = np.where(values > 0, values, floor)
    total = page.rows
    width = max(1, math.ceil(total / MAX_POINTS))
    groups = page.groups or [""] * total
    names = list(dict.fromkeys(groups))
    labels = np.array(groups, dtype=object)
    series = []
    drawn: list[tuple[int, float]] = []
    for name in names:
        rows = np.nonzero(present & (labels == name))[0]
        xs, ys = worst_per_run(rows, values, width)
        # a non-finite value (NaN, inf: stored as inf) breaks the line; svg_chart marks it on the axis
        series.append(Series(name or metric.title, [int(x) for x in xs], [float(v) for v in ys]))
        drawn.extend(zip((int(x) for x in xs), (float(v) for v in ys), strict=True))
    marks = []
    if page.first is not None:
        whole = f"first divergence: {page.first_label}"
        label = whole if len(whole) <= LABEL_CHARS else whole[: LABEL_CHARS - 1] + "\u2026"
        marks.append(Mark(page.first, label, css_class="first-divergence", tooltip=whole))
    title = f"{metric.title} of every row in execution order"
    if width > 1:
        title += f" (worst of each {width} rows)"
    line_label = ""
    if metric.tolerance is not None:
        line_label = metric.tolerance_label or f"tolerance {metric.tolerance:g}"
    svg = line_chart(
        series,
        title=title,
        x_label=f"row (0 to {total - 1}); errors of 0 drawn at {floor:.0e}; \u00d7: NaN, inf or none",
        y_label=metric.title,
        log_y=True,
        hline=metric.tolerance,
        hline_label=line_label,
        marks=marks,
        x_range=(0, max(total - 1, 1)),
    )
    return svg, sorted(drawn)
