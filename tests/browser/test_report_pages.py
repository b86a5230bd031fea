"""Each kind of HTML report opened in a real headless Chromium: what a person sees, filters and clicks.

Every page is opened from its file (``file://``) and must make no request but for itself, raise no
script error, and show its verdict; a screenshot of each is written beside it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file

import tscore as ts
from tests.core.test_html_report import planted
from tscore.cli import main
from tscore.dump_compare import compare_dumps
from tscore.dump_compare.report_page import DIFFERING
from tscore.html_report.page import Column, Metric, ReportPage, write_page
from tscore.netdiff.report import LayerStatus

MSPROBE = Path(__file__).resolve().parents[1] / "data" / "msprobe_26.2"
# a file name that would run script and fetch an image if a page ever wrote it as HTML
EVIL = "<img src=x onerror=document.body.dataset.pwned=1>"


def marker_visible(opened) -> bool:
    return opened.page.locator(".chart:not([hidden]) .first-divergence").is_visible()


def test_a_folder_comparison_names_marks_and_filters_the_first_divergence(tmp_path, open_report) -> None:
    a, b = planted(tmp_path, rows=12, first_bad=7, name=EVIL)
    report = ts.migrator.compare_npy_dir(a, b, print_level=0)
    opened = open_report(report.to_html(tmp_path / "folders.html"))
    page = opened.page
    assert opened.errors == [] and page.evaluate("document.body.dataset.pwned") is None
    verdict = page.inner_text("#verdict")
    assert verdict.startswith("FAILED") and f"7_{EVIL}7.npy" in verdict  # the name, as text
    assert marker_visible(opened)
    assert f"first divergence: 7_{EVIL}7" in page.text_content(".chart:not([hidden]) .first-divergence")
    assert opened.column(opened.header_index("orig name"))[0] == f"0_{EVIL}0.npy"

    page.check("#only-failed")
    assert opened.shown() == report.counts["failed"] == 5
    assert opened.column(0)[0].startswith("7") and [int(n.split()[0]) for n in opened.column(0)] == list(
        range(7, 12)
    )
    assert set(opened.column(opened.header_index("status"))) == {"mismatch"}
    page.uncheck("#only-failed")
    assert opened.shown() == 12

    # the largest difference first, by a click on its column
    page.click("#head th:text-is('max abs diff')")  # a numeric column sorts largest first
    assert page.locator("#head th.desc").inner_text() == "max abs diff"
    assert opened.column(0)[0] == "11"

    # the button goes back to execution order and opens the first divergence with its histogram
    page.click("#show-first")
    assert page.inner_text("#body tr.selected td:first-child").startswith("7")
    assert f"7_{EVIL}7.npy" in page.inner_text("#detail-title")
    assert page.locator("#histogram svg rect").count() == 40

    # a filter typed just before the button does not hide the row the button showed
    page.fill("#filter", "no such name")
    page.click("#show-first")
    page.wait_for_timeout(400)
    assert opened.shown() == 12 and page.inner_text("#body tr.selected td:first-child").startswith("7")

    # another metric: its own chart, the marker on it too
    page.select_option("#metric", "cosine_distance")
    assert page.locator(".chart[data-metric='max_rel']").is_hidden() and marker_visible(opened)


# For every text cell of the table's page: the character before each line break in it.
LINE_BREAKS = """cells => cells.map(td => {
  const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT), chars = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      chars.push([node.data[i], Math.round(range.getBoundingClientRect().top)]);
    }
  }
  return chars.slice(1).flatMap((c, k) => (c[1] > chars[k][1] ? [chars[k][0]] : []));
})"""


def test_names_wrap_after_a_separator_and_a_status_word_stays_whole_at_1280_px(tmp_path, open_report) -> None:
    name = "encoder.layers.{i}.self_attention.query_key_value.weight_backward_of_the_fused_kernel"
    a, b = planted(tmp_path, rows=6, first_bad=2, name=name.format(i="") + "_")
    opened = open_report(ts.migrator.compare_npy_dir(a, b, print_level=0).to_html(tmp_path / "wrap.html"))
    breaks = opened.page.eval_on_selector_all("#body td:not(.num)", LINE_BREAKS)
    assert opened.page.viewport_size["width"] == 1280
    assert any(breaks), "no name wrapped: the test would prove nothing"
    assert {char for cell in breaks for char in cell} <= set("_./ ")
    status = opened.header_index("status")
    assert opened.column(status)[2] == "mismatch"
    whole = opened.page.eval_on_selector_all(f"#body td:nth-child({status + 1})", LINE_BREAKS)
    assert whole == [[]] * 6
    # a name copied from the page is the file's name: the break points add no character
    assert opened.column(opened.header_index("orig name"))[0] == f"0_{name.format(i='')}_0.npy"


def test_a_click_on_the_chart_opens_the_row_there(tmp_path, open_report) -> None:
    a, b = planted(tmp_path, rows=12, first_bad=7)
    opened = open_report(ts.migrator.compare_npy_dir(a, b, print_level=0).to_html(tmp_path / "click.html"))
    box = opened.page.locator(".chart:not([hidden]) .first-divergence line").bounding_box()
    opened.page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    assert opened.page.inner_text("#body tr.selected td:first-child").startswith("7")


def test_a_long_table_is_paged(tmp_path, open_report) -> None:
    a, b = planted(tmp_path, rows=250, first_bad=240)
    opened = open_report(ts.migrator.compare_npy_dir(a, b, print_level=0).to_html(tmp_path / "long.html"))
    assert len(opened.column(0)) == 100 and "page 1 of 3" in opened.page.inner_text("#pageno")
    opened.page.click("#next")
    assert opened.column(0)[0] == "100"
    opened.page.fill("#filter", "layer24")  # layer24, layer240 ... layer249
    opened.page.wait_for_selector("body[data-shown='11']")
    assert opened.column(opened.header_index("orig name"))[0] == "24_layer24.npy"


def test_a_checkpoint_comparison_lists_missing_and_differing_parameters(
    tmp_path, open_report, capsys
) -> None:
    rng = np.random.default_rng(0)
    weights = {name: rng.standard_normal((4, 3)).astype(np.float32) for name in ("fc1.w", "fc2.w", "fc3.w")}
    changed = dict(weights, **{"fc2.w": weights["fc2.w"] + 0.5})
    changed["extra.b"] = changed.pop("fc3.w")
    save_file(weights, str(tmp_path / "a.safetensors"))
    save_file(changed, str(tmp_path / "b.safetensors"))
    html = tmp_path / "ckpt.html"
    arguments = [str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors"), "-q", "--html", str(html)]
    assert main(["ckpt-diff", *arguments]) == 1
    assert f"HTML report: {html}" in capsys.readouterr().out
    opened = open_report(html)
    assert opened.errors == [] and opened.page.inner_text("#verdict").startswith("FAILED")
    opened.page.check("#only-failed")
    assert opened.shown() == 3  # fc2.w differs, fc3.w and extra.b have no partner
    names = {n for i in (1, 2) for n in opened.column(i)}
    assert names == {"fc2.w", "fc3.w", "extra.b", "-"}


class Net(torch.nn.Module):
    """Linear, LeakyReLU, Linear: two copies with other slopes compute differently at the activation."""

    def __init__(self, slope: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.act, self.fc2 = torch.nn.Linear(6, 8), torch.nn.LeakyReLU(slope), torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def test_the_difference_finder_marks_the_layer_with_its_own_error(tmp_path, open_report) -> None:
    finder = ts.migrator.NetDifferenceFinder(Net(0.01), Net(0.3), print_level=0, auto_conv_ckpt=0)
    report = finder.compare(auto_inputs=(((4, 6), np.float32),), locate=True)
    assert report.first_divergence is not None and report.first_divergence.orig_path == "act"
    opened = open_report(report.to_html(tmp_path / "netdiff.html"))
    page = opened.page
    assert opened.errors == [] and "first divergence: act" in page.inner_text("#verdict")
    assert marker_visible(opened)
    page.check("#only-failed")
    failing = [r for r in report.layers if r.status not in (LayerStatus.OK, LayerStatus.CONTAINS)]
    assert opened.shown() == len(failing) and set(opened.column(2)) <= {"diverges", "inherits", "unknown"}
    page.click("#show-first")
    assert page.inner_text("#detail-title").startswith("row") and "act" in page.inner_text("#detail-title")


def test_a_dump_comparison_charts_forward_and_backward_apart(tmp_path, open_report) -> None:
    report = compare_dumps(MSPROBE / "tensor/perturbed/step0/rank0", MSPROBE / "tensor/base/step0/rank0")
    opened = open_report(report.to_html(tmp_path / "dump.html"))
    page = opened.page
    assert opened.errors == [] and page.inner_text("#verdict").startswith("FAILED")
    legend = page.text_content(".chart:not([hidden]) svg")
    assert "forward" in legend and "backward" in legend and marker_visible(opened)
    page.click("#show-first")
    assert "Functional.conv2d.1.forward.input.1" in page.inner_text("#detail-title")  # the weight
    assert "stack" in page.inner_text("#detail-text")
    page.check("#only-failed")
    # a row fails as the report does: its call differs and the row's error is over the tolerance
    failing = sum(
        call.status in DIFFERING and rows[i].error is not None and rows[i].error > report.tolerance
        for rows, calls in report.blocks()
        for call in calls
        for i in call.rows
    )
    assert opened.shown() == failing > 0 and page.evaluate("document.body.dataset.failing") == str(failing)
    assert set(opened.column(opened.header_index("call verdict"))) <= set(DIFFERING)


def test_a_click_on_a_spike_among_200000_rows_opens_that_row(tmp_path, open_report) -> None:
    rows, spike = 200_000, 123_457
    values = [1e-6] * rows
    values[spike] = 10.0
    page = ReportPage(
        kind="test",
        title="many rows",
        passed=False,
        summary="one spike",
        facts=[],
        columns=[Column("name", "name"), Column("error", "error", numeric=True)],
        cells={"name": [f"op{i}" for i in range(rows)], "error": values},
        failed=[i == spike for i in range(rows)],
        metrics=[Metric("error", "error", values, 1e-3)],
    )
    opened = open_report(write_page(page, tmp_path / "many.html"))
    svg = opened.page.locator(".chart:not([hidden]) svg")
    data = svg.evaluate(
        "s => ({low: +s.dataset.xLow, high: +s.dataset.xHigh, left: +s.dataset.plotLeft,"
        " width: +s.dataset.plotWidth, view: s.viewBox.baseVal.width})"
    )
    assert data["high"] == rows - 1
    box = svg.bounding_box()
    scale = box["width"] / data["view"]
    # two pixels beside the spike: 400 rows away from it at this width, but the point drawn is the spike
    x = data["left"] + (spike - data["low"]) / (data["high"] - data["low"]) * data["width"] + 2
    opened.page.mouse.click(box["x"] + x * scale, box["y"] + box["height"] / 2)
    assert opened.page.inner_text("#body tr.selected td:first-child") == str(spike)


# the manual's picture of a report; rewritten only when asked (TSCORE_UPDATE_SCREENSHOT=1 nox -s browser),
# so that a run on another machine, whose fonts draw it a little otherwise, leaves the tree as it was
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "assets" / "report.png"


def _saved_activations(folder: Path, slope: float) -> Path:
    """Every layer's output of a small network whose LeakyReLU has ``slope``, saved as a port would."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.LeakyReLU(slope),
        torch.nn.Conv2d(8, 8, 3, padding=1),
        torch.nn.LeakyReLU(slope),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 10),
    ).eval()
    x = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    ts.reset_save_id()
    ts.save(str(folder / "input"), x)
    names = ["conv1", "bn1", "act1", "conv2", "act2", "pool", "flatten", "logits"]
    with torch.no_grad():
        for name, layer in zip(names, net, strict=True):
            x = layer(x)
            ts.save(str(folder / name), x)
    return folder


def test_the_manual_shows_a_screenshot_of_a_real_comparison_page(tmp_path, open_report, monkeypatch) -> None:
    """The site's picture of a report is this page: a port whose LeakyReLU slope is 0.2, not 0.01."""
    monkeypatch.chdir(tmp_path)  # the page's title names the two folders as given: torch_run and port
    torch_run = _saved_activations(Path("torch_run"), 0.01)
    port = _saved_activations(Path("port"), 0.2)
    report = ts.migrator.compare_npy_dir(torch_run, port, print_level=0)
    assert report.first_divergence is not None and report.first_divergence.orig_name == "3_act1.npy"
    opened = open_report(report.to_html(tmp_path / "port.html"))
    opened.page.click("#show-first")
    assert "3_act1.npy" in opened.page.inner_text("#detail-title")
    opened.page.wait_for_selector("#histogram svg rect")
    shot = SCREENSHOT if os.environ.get("TSCORE_UPDATE_SCREENSHOT") == "1" else tmp_path / "report.png"
    opened.page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "the manual has no picture of a report"
