"""Line charts as small self-contained SVG files: opened by any browser, embedded as they are in an HTML page.

A report draws what a person would rather look at than read (two loss
curves, an error along the execution order) with :func:`line_chart`: no
plotting library, no font or network needed, a few kilobytes for thousands
of points. Values that are not finite (NaN, inf) break the line and are
marked on the axis, because where a curve stops is what a person looks for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 720, 360
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 40, 50  # margins around the plot area
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


@dataclass(frozen=True)
class Series:
    """One line: its label, and its y value at each x (None or a non-finite float: no point there)."""

    label: str
    x: Sequence[float]
    y: Sequence[float | None]


@dataclass(frozen=True)
class Mark:
    """A vertical line at ``x`` with its label: where something happens (the first divergence)."""

    x: float
    label: str
    css_class: str = "mark"
    color: str = "#d62728"
    tooltip: str = ""  # shown on hover: the whole label, when the drawn one is cut


def _finite(values: Sequence[float | None], log: bool) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v) and (not log or v > 0)]


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values from ``low`` to ``high`` for axis labels."""
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def _label(value: float) -> str:
    return f"{value:.4g}"


def line_chart(
    series: Sequence[Series],
    *,
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    log_y: bool = False,
    hline: float | None = None,
    hline_label: str = "",
    marks: Sequence[Mark] = (),
    x_range: tuple[float, float] | None = None,
) -> str:
    """Draw the series as one SVG line chart; return the SVG text.

    :param log_y: a log-scale y axis (values <= 0 are left out, as they cannot be drawn).
    :param hline: a horizontal reference line (a tolerance), labelled ``hline_label``.
    :param marks: vertical lines at given x values (the first divergence), each labelled.
    :param x_range: the x axis' ends, when they are not the series' smallest and largest x; the
        SVG element carries them as ``data-x-low`` and ``data-x-high``, with the plot area's left
        edge and width as ``data-plot-left`` and ``data-plot-width``, so that a page maps a click
        to an x value.
    """
    if hline is not None and not (math.isfinite(hline) and (not log_y or hline > 0)):
        hline = None  # a line that cannot be drawn on this axis
    xs = [float(x) for s in series for x in s.x]
    ys = [v for s in series for v in _finite(s.y, log_y)]
    if hline is not None:
        ys.append(hline)
    x_low, x_high = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_range is not None:
        x_low, x_high = float(x_range[0]), float(x_range[1])
    y_low, y_high = (min(ys), max(ys)) if ys else ((1.0, 10.0) if log_y else (0.0, 1.0))
    if log_y:
        y_low, y_high = math.log10(y_low), math.log10(y_high)
    if x_high == x_low:
        x_low, x_high = x_low - 1, x_high + 1
    if y_high == y_low:
        y_low, y_high = y_low - 1, y_high + 1
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def px(x: float) -> float:
        return _LEFT + (x - x_low) / (x_high - x_low) * plot_w

    def py(y: float) -> float:
        value = math.log10(y) if log_y else y
        return _TOP + (y_high - value) / (y_high - y_low) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12" '
        f'data-x-low="{x_low:.15g}" data-x-high="{x_high:.15g}" '
        f'data-plot-left="{_LEFT}" data-plot-width="{plot_w}">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>',
    ]
    for tick in _ticks(x_low, x_high):
        x = px(tick)
        out.append(
            f'<line x1="{x:.1f}" y1="{_TOP + plot_h}" x2="{x:.1f}" y2="{_TOP + plot_h + 5}" stroke="#888"/>'
        )
        out.append(f'<text x="{x:.1f}" y="{_TOP + plot_h + 18}" text-anchor="middle">{_label(tick)}</text>')
    decades = list(range(math.ceil(y_low), math.floor(y_high) + 1))
    for tick in decades if log_y and len(decades) >= 2 else _ticks(y_low, y_high):
        y = _TOP + (y_high - tick) / (y_high - y_low) * plot_h
        shown = 10**tick if log_y else tick
        out.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + plot_w}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(shown)}</text>')
    if hline is not None:
        y = py(hline)
        out.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + plot_w}" y2="{y:.1f}" stroke="#555" '
            'stroke-dasharray="6 4"/>'
        )
        if hline_label:
            out.append(
                f'<text x="{_LEFT + plot_w - 4}" y="{y - 4:.1f}" text-anchor="end">'
                f"{escape(hline_label)}</text>"
            )
    for mark in marks:
        x = px(mark.x)
        right = x > _LEFT + plot_w * 0.7  # a label near the right edge goes to the line's left
        out.append(
            f'<g class="{escape(mark.css_class)}"><title>{escape(mark.tooltip or mark.label)}</title>'
            f'<line x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" '
            f'y2="{_TOP + plot_h}" stroke="{mark.color}" stroke-width="2"/>'
            f'<text x="{x - 4 if right else x + 4:.1f}" y="{_TOP - 4}" fill="{mark.color}" '
            f'text-anchor="{"end" if right else "start"}">{escape(mark.label)}</text></g>'
        )
    for index, line in enumerate(series):
        color = PALETTE[index % len(PALETTE)]
        out += _polylines(line, px, py, log_y, color, _TOP + plot_h)
        ly = _TOP + 14 + 16 * index
        out.append(
            f'<line x1="{_LEFT + 10}" y1="{ly - 4}" x2="{_LEFT + 30}" y2="{ly - 4}" stroke="{color}" '
            'stroke-width="2"/>'
        )
        out.append(f'<text x="{_LEFT + 36}" y="{ly}">{escape(line.label)}</text>')
    hidden = sum(1 for s in series for v in s.y if log_y and v is not None and math.isfinite(v) and v <= 0)
    if hidden:  # a log scale cannot show zeros: say how many there are rather than draw nothing
        out.append(
            f'<text x="{_LEFT + plot_w - 4}" y="{_TOP + plot_h - 6}" text-anchor="end" fill="#555">'
            f"{hidden} values of 0 or less not drawn (log scale)</text>"
        )
    out.append(
        f'<text x="{_LEFT + plot_w / 2}" y="{HEIGHT - 10}" text-anchor="middle">{escape(x_label)}</text>'
    )
    out.append(
        f'<text x="16" y="{_TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {_TOP + plot_h / 2})">{escape(y_label)}</text>'
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _polylines(
    line: Series,
    px: Callable[[float], float],
    py: Callable[[float], float],
    log_y: bool,
    color: str,
    axis_y: float,
) -> list[str]:
    """Draw one series: a polyline per finite run, a cross on the x axis where a value is not finite."""
    runs: list[list[str]] = [[]]
    marks: list[str] = []
    for x, y in zip(line.x, line.y, strict=True):
        if y is None or not math.isfinite(y) or (log_y and y <= 0):
            if runs[-1]:
                runs.append([])
            if y is not None and not (log_y and math.isfinite(y)):  # NaN or inf: the curve broke here
                at = px(float(x))
                marks.append(
                    f'<text x="{at:.1f}" y="{axis_y - 3:.1f}" text-anchor="middle" fill="{color}">'
                    f"\u00d7</text>"
                )
            continue
        runs[-1].append(f"{px(float(x)):.1f},{py(y):.1f}")
    out = []
    for run in runs:
        if len(run) == 1:
            cx, cy = run[0].split(",")
            out.append(f'<circle cx="{cx}" cy="{cy}" r="2" fill="{color}"/>')
        elif run:
            out.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{" ".join(run)}"/>'
            )
    return out + marks
