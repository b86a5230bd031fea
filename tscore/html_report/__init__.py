"""Reports a person looks at: one self-contained HTML page for every kind of comparison.

``report.to_html(path)`` on a :class:`~tscore.compare.report.CompareReport`,
:class:`~tscore.checkpoint.ckpt_diff.CheckpointDiff`,
:class:`~tscore.netdiff.report.NetDiffReport` or
:class:`~tscore.dump_compare.report.DumpCompareReport`, and ``--html FILE``
on each ``tscore`` command, write the page: the verdict, a chart of an error
metric along the execution order with the tolerance and the first divergence,
and every row in a table that sorts, filters to failing rows and shows a
row's details. Nothing is fetched when it opens.

Each report builds its own page data (its ``to_page()`` returns a
:class:`ReportPage`, in a module beside the report); this package only renders
it, and imports no feature.
"""

from __future__ import annotations

import os
from typing import Any

from tscore.html_report.page import Column, Histogram, Metric, ReportPage, render, write_page

__all__ = ["Column", "Histogram", "Metric", "ReportPage", "page_of", "render", "write_html", "write_page"]


def page_of(report: Any) -> ReportPage:
    """Return the page of any report that builds one (its ``to_page()``): all of tscore's comparison reports.

    :raises TypeError: naming the type, for an object that has no page.
    """
    to_page = getattr(report, "to_page", None)
    if to_page is None:
        raise TypeError(
            f"cannot draw a {type(report).__name__} as an HTML report: pass the report a compare function "
            "returned (CompareReport, CheckpointDiff, NetDiffReport, DumpCompareReport), or an object whose "
            "to_page() returns a ReportPage"
        )
    page = to_page()
    if not isinstance(page, ReportPage):
        made = type(page).__name__
        raise TypeError(f"{type(report).__name__}.to_page() returned a {made}, not a ReportPage")
    return page


def write_html(report: Any, path: str | os.PathLike[str], metric: str | None = None) -> str:
    """Write ``report`` as one self-contained HTML page at ``path`` (atomically); return the path.

    :param metric: the error metric charted first: ``max_rel``, ``cosine_distance``, ``max_abs``
        (and ``error`` for dumps); the page switches between them.
    :raises TargetPathError: naming the path, when its folder is missing or not writable.
    :raises ValueError: for a metric the report does not have.
    """
    return write_page(page_of(report), path, metric)
