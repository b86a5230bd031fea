"""The HTML report's file without a browser: self-contained, escaped, every row inside, clear errors.

What a person sees and clicks is checked in a real Chromium by ``tests/browser`` (``nox -s browser``).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tscore as ts
from tscore.cli import main
from tscore.compare.pair_page import pair_metrics
from tscore.compare.pairs import PairResult, PairStatus
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
    svg, drawn = metric_chart(page, Metric("e", "error", values.tolist(), 1e-3))
    lines = re.findall(r'<polyline[^>]*points="([^"]*)"', svg)
    assert sum(len(points.split()) for points in lines) <= 2 * MAX_POINTS
    # the page is told which rows the chart draws, so that a click goes to the spike
    assert (123_456, 1e3) in drawn and len(drawn) <= 2 * MAX_POINTS and drawn == sorted(drawn)
    assert 'data-x-high="199999"' in svg
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


def _page_of_values(values: list[float | None], failed: list[bool]) -> ReportPage:
    return ReportPage(
        kind="test",
        title="t",
        passed=not any(failed),
        summary="",
        facts=[],
        columns=[Column("v", "v", numeric=True)],
        cells={"v": values},
        failed=failed,
        metrics=[],
    )


def test_failing_rows_without_a_finite_value_are_drawn_not_left_out() -> None:
    values = [1e-6, None, float("nan"), 1e-6, None]
    page = _page_of_values(values, [False, True, True, False, False])
    svg, drawn = metric_chart(page, Metric("e", "error", values, 1e-3))
    # the failing rows 1 (no value) and 2 (NaN) are marked as not finite; row 4 passes with no value
    assert [row for row, _ in drawn] == [0, 1, 2, 3] and drawn[1][1] == drawn[2][1] == math.inf
    assert svg.count("\u00d7</text>") == 2
    # a NaN cosine is a NaN distance, not a distance of 0
    nan_pair = PairResult(orig_name="a", target_name="a", status=PairStatus.MISMATCH, cosine=float("nan"))
    distance = next(m for m in pair_metrics([nan_pair], 1e-4, 1e-4) if m.key == "cosine_distance")
    assert math.isnan(distance.values[0])


def test_the_allclose_ratio_sorts_as_a_number_and_keeps_its_digits(tmp_path) -> None:
    a, b = planted(tmp_path, rows=3, first_bad=1)
    data = payload(render(page_of(ts.migrator.compare_npy_dir(a, b))))
    ratio = next(c for c in data["columns"] if c["key"] == "ratio")
    assert ratio["numeric"] and ratio["percent"]
    assert data["cells"]["ratio"][0] == 1.0 and all(isinstance(v, float) for v in data["cells"]["ratio"])


def test_a_partial_report_read_from_json_is_refused_not_drawn_in_part(tmp_path) -> None:
    a, b = planted(tmp_path, rows=4, first_bad=2)
    data = ts.migrator.compare_npy_dir(a, b).model_dump()
    data.update(pairs=data["pairs"][2:], pairs_complete=False)  # as a report of >20,000 pairs keeps
    partial = CompareReport.model_validate(data)
    with pytest.raises(ValueError, match=r"keeps 2 of its 4 pairs.*read from JSON"):
        partial.to_html(tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_a_dump_page_fails_the_rows_that_fail_the_report_not_ptdbgs_accuracy() -> None:
    from tscore.dump_compare.report import DumpCompareReport
    from tscore.dump_compare.rows import Row
    from tscore.dump_compare.verdicts import CallVerdict

    rows = [
        # an ok call whose input ptdbg's cosine rule calls "No": its outputs agree, the call passes
        Row(
            "Functional.a.0.forward.input.0",
            "Functional.a.0.forward.input.0",
            "input",
            "0",
            cosine=0.5,
            max_abs_err=1.0,
            basis="tensor",
            error=0.0,
            accuracy="No",
        ),
        Row(
            "Functional.a.0.forward.output.0",
            "Functional.a.0.forward.output.0",
            "output",
            "0",
            cosine=1.0,
            max_abs_err=0.0,
            basis="tensor",
            error=0.0,
            accuracy="Yes",
        ),
        # a call with an error of its own that ptdbg's rule lets through (cosine 0.999, small max abs)
        Row(
            "Functional.b.0.forward.input.0",
            "Functional.b.0.forward.input.0",
            "input",
            "0",
            cosine=1.0,
            max_abs_err=0.0,
            basis="tensor",
            error=0.0,
            accuracy="Yes",
        ),
        Row(
            "Functional.b.0.forward.output.0",
            "Functional.b.0.forward.output.0",
            "output",
            "0",
            cosine=0.999,
            max_abs_err=1e-4,
            basis="tensor",
            error=0.04,
            accuracy="Yes",
        ),
    ]
    calls = [
        CallVerdict("Functional.a.0.forward", "Functional.a.0.forward", "forward", "name", "ok", rows=[0, 1]),
        CallVerdict(
            "Functional.b.0.forward",
            "Functional.b.0.forward",
            "forward",
            "name",
            "own",
            input_error=0.0,
            output_error=0.04,
            rows=[2, 3],
        ),
    ]
    report = DumpCompareReport(
        target_path="npu",
        orig_path="bench",
        target_format="tscore",
        orig_format="tscore",
        basis="tensor",
        tolerance=0.01,
        rows=rows,
        calls=calls,
        first_error=calls[1],
    )
    page = page_of(report)
    assert not report.passed and page.failed == [False, False, False, True] and page.first == 3
    assert page.first_label == "Functional.b.0.forward.output.0"
    error_line = next(m for m in page.metrics if m.key == "error")
    assert error_line.tolerance == 0.01 and "tolerance 0.01" in error_line.tolerance_label
    assert next(m for m in page.metrics if m.key == "max_rel").tolerance is None  # no line it is judged by


def test_a_network_comparison_without_layers_marks_its_first_failing_output() -> None:
    from tscore.netdiff.report import NetDiffReport

    ok = PairResult(orig_name="out0", target_name="out0", status=PairStatus.OK, allclose=True)
    bad = PairResult(orig_name="out1", target_name="out1", status=PairStatus.MISMATCH, max_abs_diff=0.5)
    report = NetDiffReport(
        rtol=1e-4, atol=1e-4, equal_nan=False, orig_label="torch", target_label="mindspore", outputs=[ok, bad]
    )
    page = page_of(report)
    assert page.first == 1 and page.first_label == "out1"
    assert 'id="show-first"' in render(page)


def test_ckpt_diff_refuses_a_metric_to_chart_without_values_before_it_reads(tmp_path, capsys) -> None:
    missing = tmp_path / "not_read.safetensors"  # never opened: the options are refused first
    args = ["ckpt-diff", str(missing), str(missing), "--no-values", "--html", str(tmp_path / "p.html")]
    assert main([*args, "--html-metric", "max_abs"]) == 2
    err = capsys.readouterr().err
    assert "--html-metric" in err and "--no-values" in err and "not_read" not in err
