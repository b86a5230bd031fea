"""Value comparisons as a page: what every report of pairs shows, and the page of a folder comparison.

:func:`compare_page` draws a :class:`~tscore.compare.report.CompareReport`;
the helpers before it (columns, cells, details, the three error metrics)
are shared with the checkpoint and difference finder pages.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tscore.compare.histograms import pair_histograms
from tscore.compare.pairs import PairResult, PairStatus, divergence_line, format_shape, pair_label
from tscore.html_report.page import Column, Metric, ReportPage

if TYPE_CHECKING:
    from tscore.compare.report import CompareReport

COSINE_REFERENCE = 0.01  # ptdbg's line: a cosine under 0.99 is a difference
HISTOGRAM_ROWS = 50  # failing rows that get a histogram of their differences, at most


def cosine_distance(cosine: float | None) -> float | None:
    """Return 1 - cosine, never below 0; a NaN cosine stays NaN (drawn as not finite, not as 0)."""
    if cosine is None or math.isnan(cosine):
        return cosine
    return max(0.0, 1.0 - cosine)


def pair_metrics(pairs: Sequence[PairResult], rtol: float, atol: float) -> list[Metric]:
    """Return the three error metrics of value comparisons, each with the line that helps read it.

    A pair passes when every element is within ``atol + rtol * |orig|``: neither the largest
    relative nor the largest absolute error alone decides it, so their lines are drawn at
    ``rtol`` and ``atol`` and named so, not as the line a pair fails above.
    """
    return [
        Metric(
            "max_rel",
            "max relative error",
            [p.max_rel_diff for p in pairs],
            rtol or None,
            f"rtol {rtol:g} (a pair fails where an element is off by more than atol + rtol * |orig|)",
        ),
        Metric(
            "cosine_distance",
            "cosine distance (1 - cosine)",
            [cosine_distance(p.cosine) for p in pairs],
            COSINE_REFERENCE,
            f"{COSINE_REFERENCE:g}: a cosine under {1 - COSINE_REFERENCE:g}, ptdbg's line",
        ),
        Metric(
            "max_abs",
            "max absolute error",
            [p.max_abs_diff for p in pairs],
            atol or None,
            f"atol {atol:g}",
        ),
    ]


PAIR_COLUMNS = [
    Column("orig", "orig name"),
    Column("target", "target name"),
    Column("status", "status"),
    Column("ratio", "ratio of allclose", numeric=True, percent=True),
    Column("cosine", "cosine", numeric=True),
    Column("max_abs", "max abs diff", numeric=True),
    Column("max_rel", "max rel diff", numeric=True),
    Column("mean_abs", "mean abs diff", numeric=True),
]


def pair_cells(pairs: Sequence[PairResult]) -> dict[str, list[Any]]:
    """Return the table's cells of value comparisons, one list per column of :data:`PAIR_COLUMNS`."""
    return {
        "orig": [p.orig_name for p in pairs],
        "target": [p.target_name for p in pairs],
        "status": ["passed" if p.passed else p.status.value for p in pairs],
        "ratio": [p.ratio_close for p in pairs],
        "cosine": [p.cosine for p in pairs],
        "max_abs": [p.max_abs_diff for p in pairs],
        "max_rel": [p.max_rel_diff for p in pairs],
        "mean_abs": [p.mean_abs_diff for p in pairs],
    }


def pair_detail(pair: PairResult) -> str:
    """Return what a row's details show of a value comparison: shapes, dtypes, counts, message."""
    lines = [
        f"shapes: {format_shape(pair.orig_shape)} / {format_shape(pair.target_shape)}",
        f"dtypes: {pair.orig_dtype} / {pair.target_dtype}",
    ]
    if pair.elements is not None:
        lines.append(f"elements: {pair.elements}")
    if pair.orig_nan or pair.orig_inf or pair.target_nan or pair.target_inf:
        lines.append(
            f"NaN / inf: orig {pair.orig_nan} / {pair.orig_inf}, target {pair.target_nan} / {pair.target_inf}"
        )
    if pair.message:
        lines.append(pair.message)
    return "\n".join(lines)


def first_failing(failed: Iterable[bool]) -> int | None:
    """Return the index of the first failing row, None when none fails."""
    return next((i for i, f in enumerate(failed) if f), None)


def compare_page(report: CompareReport) -> ReportPage:
    """Return the page of a folder comparison (``compare_npy_dir``, ``compare_grads_dir`` ...).

    Failing pairs (the first :data:`HISTOGRAM_ROWS`) get a histogram of their differences, read
    from the two folders when the files are still there.
    """
    pairs = list(report.iter_pairs())
    failed = [not p.passed for p in pairs]
    first = first_failing(not p.passed and p.status is not PairStatus.UNREADABLE for p in pairs)
    summary = report.summary()
    first_label = ""
    if first is not None:
        first_label = pair_label(pairs[first])
        summary = f"{divergence_line(pairs[first])}. {summary}"
    folders = (os.fspath(report.orig_dir), os.fspath(report.target_dir))
    histogram_rows = [i for i, f in enumerate(failed) if f][:HISTOGRAM_ROWS]
    return ReportPage(
        kind="compare_npy_dir",
        title=f"Comparison of {report.orig_dir} and {report.target_dir}",
        passed=report.passed,
        summary=summary,
        facts=[
            ("orig folder", report.orig_dir),
            ("target folder", report.target_dir),
            ("rtol", f"{report.rtol:g}"),
            ("atol", f"{report.atol:g}"),
            ("equal_nan", str(report.equal_nan)),
            ("paired by", report.match),
            ("kernel", report.kernel),
        ],
        columns=PAIR_COLUMNS,
        cells=pair_cells(pairs),
        failed=failed,
        metrics=pair_metrics(pairs, report.rtol, report.atol),
        details=[pair_detail(p) for p in pairs],
        detail_of=list(range(len(pairs))),
        first=first,
        first_label=first_label,
        histograms=pair_histograms(pairs, histogram_rows, *folders),
    )
