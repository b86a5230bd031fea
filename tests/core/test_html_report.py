"""The HTML report's file without a browser: self-contained, escaped, every row inside, clear errors.

What a person sees and clicks is checked in a real Chromium by ``tests/browser`` (``nox -s browser``).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tscore as ts
from tscore.cli import main
from tscore.compare.report import CompareReport
from tscore.errors import TargetPathError
from tscore.html_report import Metric, page_of, render
from tscore.html_report.chart import MAX_POINTS, metric_chart, worst_per_run
from tscore.html_report.page import Column, ReportPage

EVIL = "<img src=x onerror=alert(1)>"


def planted(folder: Path, rows: int = 12, first_bad: int = 7, name: str = "layer") -> tuple[Path, Path]:
    """Two folders of saved tensors that agree up to row ``first_bad`` and differ from there on."""
    rng = np.random.default_rng(0)
    a, b = folder / "a", folder / "b"
    a.mkdir()
    b.mkdir()
    for i in range(rows):
        x = rng.standard_normal((16, 8)).astype(np.float32)
        y = x + (0.01 * (i - first_bad + 1) if i >= first_bad else 0)
        np.save(a / f"{i}_{name}{i}.npy", x)
        np.save(b / f"{i}_{name}{i}.npy", y.astype(np.float32))
    return a, b


def payload(html: str) -> dict:
    """Decode the rows the page carries, as its script does."""
    text = re.search(r'<script type="application/octet-stream" id="payload">([^<]*)</script>', html)
    assert text is not None
    return json.loads(gzip.decompress(base64.b64decode(text.group(1))))


def test_the_page_holds_every_row_and_fetches_nothing(tmp_path) -> None:
    a, b = planted(tmp_path)
    report = ts.migrator.compare_npy_dir(a, b)
    path = report.to_html(tmp_path / "report.html")
    html = Path(path).read_text(encoding="utf-8")
    data = payload(html)
    pairs = list(report.iter_pairs())
    assert data["cells"]["orig"] == [p.orig_name for p in pairs]
    assert data["failed"] == [0] * 7 + [1] * 5 and data["first"] == 7
    assert [p.max_abs_diff for p in pairs] == pytest.approx(
        [0.0 if v == 0 else v for v in data["cells"]["max_abs"]], rel=1e-6
    )
    # no address to fetch: the only URL is the SVG namespace, and the policy forbids any load
    assert set(re.findall(r"https?://[^\"' )]+", html)) == {"http://www.w3.org/2000/svg"}
    assert "default-src 'none'" in html
    assert "first divergence: 7_layer7.npy" in html and "FAILED" in html
    # the failing rows' differences, read again from the two folders, are in the page as histograms
    assert set(data["hist"]) == {"7", "8", "9", "10", "11"}
    assert sum(data["hist"]["7"]["counts"]) == 16 * 8


def test_names_with_markup_are_text_in_the_page(tmp_path) -> None:
    a, b = planted(tmp_path, rows=3, first_bad=1, name=EVIL)
    html = render(page_of(ts.migrator.compare_npy_dir(a, b)))
    assert EVIL not in html  # escaped in the summary and the chart, packed in the rows
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert payload(html)["cells"]["orig"][0] == f"0_{EVIL}0.npy"


def test_a_report_with_no_rows_is_a_page_that_says_so(tmp_path) -> None:
    a, b = planted(tmp_path, rows=1)
    report = ts.migrator.compare_npy_dir(a, b).model_copy(update={"pairs": [], "total": 0})
    html = Path(report.to_html(tmp_path / "empty.html")).read_text(encoding="utf-8")
    assert "No row to chart" in html and payload(html)["failed"] == []


def test_bad_paths_and_metrics_are_clear_errors(tmp_path) -> None:
    a, b = planted(tmp_path, rows=2, first_bad=5)
    report = ts.migrator.compare_npy_dir(a, b)
    missing = tmp_path / "no_such_folder" / "r.html"
    with pytest.raises(TargetPathError, match="no_such_folder"):
        report.to_html(missing)
    with pytest.raises(ValueError, match="max_rel, cosine_distance, max_abs"):
        report.to_html(tmp_path / "r.html", metric="loss")
    with pytest.raises(TypeError, match="cannot draw a dict"):
        page_of({})


def test_the_chart_of_200000_rows_keeps_each_spike_in_1000_points() -> None:
    values = np.full(200_000, 1e-6)
    values[123_456] = 1e3
    values[5] = np.inf
    rows, worst = worst_per_run(np.arange(values.size), values, 200)
    assert rows.size == 1_000 and 123_456 in rows and worst.max() == np.inf
    assert worst[rows.tolist().index(123_456)] == 1e3
    page = ReportPage(
        kind="test",
        title="t",
        passed=False,
        summary="",
        facts=[],
        columns=[Column("v", "v", numeric=True)],
        cells={"v": values.tolist()},
        failed=[False] * values.size,
        metrics=[],
        groups=["forward"] * 100_000 + ["backward"] * 100_000,
        first=123_456,
        first_label="x",
    )
    svg = metric_chart(page, Metric("e", "error", values.tolist(), 1e-3))
    lines = re.findall(r'<polyline[^>]*points="([^"]*)"', svg)
    assert sum(len(points.split()) for points in lines) <= 2 * MAX_POINTS
    assert ">forward<" in svg and ">backward<" in svg and 'class="first-divergence"' in svg


def test_the_compare_command_writes_the_page_and_names_it(tmp_path, capsys) -> None:
    a, b = planted(tmp_path)
    out = tmp_path / "page.html"
    assert main(["compare", str(a), str(b), "-q", "--html", str(out), "--html-metric", "max_abs"]) == 1
    assert f"HTML report: {out}" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    assert re.search(r'<option value="max_abs" selected>', html)
    # a page that cannot be written fails before the comparison, naming the option
    assert main(["compare", str(a), str(b), "-q", "--html", str(tmp_path / "nope" / "p.html")]) == 2
    assert "--html" in capsys.readouterr().err


def test_a_report_read_back_from_json_draws_the_same_rows(tmp_path) -> None:
    a, b = planted(tmp_path)
    report = ts.migrator.compare_npy_dir(a, b)
    again = CompareReport.model_validate_json(report.to_json())
    assert payload(render(page_of(again)))["cells"] == payload(render(page_of(report)))["cells"]


def test_importing_tscore_does_not_import_the_template_engine() -> None:
    probe = "import sys, tscore, tscore.cli; print('jinja2' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
        == "False"
    )
