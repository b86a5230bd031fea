"""The SVG line chart: valid SVG whatever the values, lines broken and marked where a value is not finite."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from tscore.svg_chart import Mark, Series, line_chart

SVG = "{http://www.w3.org/2000/svg}"


def _parse(text: str) -> ET.Element:
    return ET.fromstring(text)  # raises on anything that is not well-formed XML


def test_a_non_finite_value_breaks_the_line_and_is_marked():
    root = _parse(line_chart([Series("a", [0, 1, 2, 3, 4], [1.0, 2.0, math.nan, 3.0, 4.0])], title="t <&>"))
    lines = [p.get("points").split() for p in root.iter(f"{SVG}polyline")]
    assert [len(points) for points in lines] == [2, 2]
    assert [t.text for t in root.iter(f"{SVG}text")].count("\u00d7") == 1
    assert "t <&>" in [t.text for t in root.iter(f"{SVG}text")]  # escaped in the file, read back as given


def test_a_log_scale_leaves_out_what_it_cannot_draw_without_marking_it():
    root = _parse(line_chart([Series("d", [0, 1, 2, 3], [0.0, 1e-4, 1e-2, 1.0])], log_y=True, hline=1e-3))
    (line,) = root.iter(f"{SVG}polyline")
    assert len(line.get("points").split()) == 3
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "\u00d7" not in labels and {"0.0001", "0.01", "1"} <= set(labels)


def test_empty_constant_and_single_point_series_still_draw():
    for series in ([], [Series("c", [5], [2.0])], [Series("k", [0, 1, 2], [3.0, 3.0, 3.0])]):
        root = _parse(line_chart(series))
        assert root.tag == f"{SVG}svg"
    single = _parse(line_chart([Series("c", [5], [2.0])]))
    assert len(list(single.iter(f"{SVG}circle"))) == 1


def test_a_mark_is_a_labelled_vertical_line_at_its_x_on_the_given_axis():
    svg = line_chart(
        [Series("e", [0, 10], [1.0, 2.0])], marks=[Mark(5, "first <div>", css_class="first")], x_range=(0, 20)
    )
    root = _parse(svg)
    (group,) = [g for g in root.iter(f"{SVG}g") if g.get("class") == "first"]
    line = group.find(f"{SVG}line")
    low, high = float(root.get("data-x-low")), float(root.get("data-x-high"))
    left, width = float(root.get("data-plot-left")), float(root.get("data-plot-width"))
    assert (low, high) == (0, 20)
    assert float(line.get("x1")) == float(line.get("x2")) == pytest.approx(left + width / 4, abs=0.05)
    assert group.find(f"{SVG}text").text == "first <div>"
