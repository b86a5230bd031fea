"""The difference finder's report as a page: every located layer call, else the networks' outputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tscore.compare.pair_page import (
    PAIR_COLUMNS,
    first_failing,
    pair_cells,
    pair_detail,
    pair_label,
    pair_metrics,
)
from tscore.compare.pairs import PairResult, PairStatus
from tscore.html_report.page import Column, Metric, ReportPage

if TYPE_CHECKING:
    from tscore.netdiff.report import LayerRow, NetDiffReport

LAYER_COLUMNS = [
    Column("status", "status"),
    Column("cosine", "cosine", numeric=True),
    Column("max_abs", "max abs diff", numeric=True),
    Column("max_rel", "max rel diff", numeric=True),
    Column("own", "own error", numeric=True),
    Column("inherited", "inherited error", numeric=True),
]


@dataclass
class _Rows:
    """The table of the page: one row per layer call, or per network output."""

    outputs: list[PairResult]  # what each row's numbers are taken from
    failed: list[bool]
    cells: dict[str, list[Any]]
    columns: list[Column]
    details: list[str]
    first: int | None
    first_label: str


def _layer_details(row: LayerRow, labels: tuple[str, str]) -> str:
    """Return a layer row's details: how it was paired, its note, settings that differ, its output."""
    lines = [
        f"paired by: {row.paired_by}",
        row.note,
        *(f"setting differs: {s.text(labels)}" for s in row.settings),
        pair_detail(row.output) if row.output else "",
    ]
    return "\n".join(filter(None, lines))


def _layer_rows(report: NetDiffReport) -> _Rows:
    """Return a row per located layer call; the first divergence is the report's own."""
    rows, labels = report.layers, report.labels
    missing = PairResult(orig_name=None, target_name=None, status=PairStatus.MISSING)
    outputs = [row.output or missing for row in rows]
    divergence = report.first_divergence
    first = None
    if divergence is not None:
        where = (divergence.orig_path, divergence.target_path, divergence.call)
        first = next((i for i, r in enumerate(rows) if (r.orig_path, r.target_path, r.call) == where), None)
    cells: dict[str, list[Any]] = {
        "layer": [row.label() for row in rows],
        "status": [row.status.value for row in rows],
        "cosine": [o.cosine for o in outputs],
        "max_abs": [o.max_abs_diff for o in outputs],
        "max_rel": [o.max_rel_diff for o in outputs],
        "own": [row.own_error if row.own is not None else None for row in rows],
        "inherited": [row.inherited_error for row in rows],
    }
    return _Rows(
        outputs=outputs,
        failed=[row.differs for row in rows],
        cells=cells,
        columns=[Column("layer", f"layer ({labels[0]} / {labels[1]})"), *LAYER_COLUMNS],
        details=[_layer_details(row, labels) for row in rows],
        first=first,
        first_label=rows[first].label() if first is not None else "",
    )


def _output_rows(report: NetDiffReport) -> _Rows:
    """Return a row per network output (no layer was located); the first that fails comes first."""
    outputs, labels = report.outputs, report.labels
    failed = [not p.passed for p in outputs]
    first = first_failing(failed)
    return _Rows(
        outputs=list(outputs),
        failed=failed,
        cells=pair_cells(outputs),
        columns=[
            Column("orig", f"{labels[0]} output"),
            Column("target", f"{labels[1]} output"),
            *PAIR_COLUMNS[2:],
        ],
        details=[pair_detail(p) for p in outputs],
        first=first,
        first_label=pair_label(outputs[first]) if first is not None else "",
    )


def netdiff_page(report: NetDiffReport) -> ReportPage:
    """Return the page of ``NetDifferenceFinder.compare``: every located layer call, else the outputs."""
    notes = [] if report.weights is None else [report.weights.verdict()]
    notes += [f"case {c.case} ({c.inputs}): {c.failure.line()}" for c in report.cases if c.failure]
    notes += [f"setting: {d.line()}" for d in report.run_settings_differ]
    facts = [
        ("orig network", report.orig_label),
        ("target network", report.target_label),
        ("rtol", f"{report.rtol:g}"),
        ("atol", f"{report.atol:g}"),
        ("cases", str(len(report.cases))),
    ]
    table = _layer_rows(report) if report.layers else _output_rows(report)
    metrics = pair_metrics(table.outputs, report.rtol, report.atol)
    if report.layers:  # what each layer computes wrong by itself, given the same inputs
        facts.append(("layers compared in case", str(report.located_case)))
        metrics.append(
            Metric(
                "own",
                "own error (target layer replayed on orig inputs)",
                table.cells["own"],
                report.atol or None,
                f"atol {report.atol:g}",
            )
        )
    return ReportPage(
        kind="netdiff",
        title=f"{report.orig_label} and {report.target_label}: where the networks part",
        passed=report.passed,
        summary=report.verdict(),
        facts=facts,
        columns=table.columns,
        cells=table.cells,
        failed=table.failed,
        metrics=metrics,
        details=table.details,
        detail_of=list(range(len(table.details))),
        first=table.first,
        first_label=table.first_label,
        notes=notes,
    )
