"""A dump comparison as a page: a row per compared value, forward and backward charted apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tscore.compare.pair_page import cosine_distance
from tscore.compare.pairs import format_number
from tscore.dump_compare.rows import COSINE_MIN, MAX_ABS_MAX
from tscore.html_report.page import Column, Metric, ReportPage

if TYPE_CHECKING:
    from tscore.dump_compare.report import DumpCompareReport
    from tscore.dump_compare.rows import Row
    from tscore.dump_compare.verdicts import CallVerdict

DIFFERING = ("own", "weights", "inherited")  # the verdicts of calls that make a dump comparison fail
NUMBER_KEYS = ("cosine", "max_abs", "max_rel", "error")


@dataclass
class _Table:
    """The page's rows, a column at a time, as the report's blocks are read."""

    target_names: list[str | None] = field(default_factory=list)
    orig_names: list[str | None] = field(default_factory=list)
    numbers: dict[str, list[float | None]] = field(default_factory=lambda: {k: [] for k in NUMBER_KEYS})
    accuracy: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    failed: list[bool] = field(default_factory=list)
    detail_of: list[int] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    first: int | None = None

    def add_row(self, row: Row, call: CallVerdict, fails: bool) -> None:
        """Add one compared value of ``call`` (whose details were added last)."""
        self.failed.append(fails)
        self.target_names.append(row.target_name)
        self.orig_names.append(row.orig_name)
        self.numbers["cosine"].append(row.cosine)
        self.numbers["max_abs"].append(row.max_abs_err)
        self.numbers["max_rel"].append(row.max_relative_err)
        self.numbers["error"].append(row.error)
        self.accuracy.append(row.accuracy)
        self.verdicts.append(call.status)
        self.groups.append("backward" if call.direction == "backward" else "forward")
        self.detail_of.append(len(self.details) - 1)


def _call_details(call: CallVerdict) -> str:
    """Return what a row's details show of its call: names, verdict, errors, module, place, stack."""
    return "\n".join(
        filter(
            None,
            [
                f"call: {call.target_call or '-'} / {call.orig_call or '-'} ({call.direction})",
                f"verdict: {call.status}" + (f": {call.reason}" if call.reason else ""),
                f"input error {format_number(call.input_error)}, "
                f"output error {format_number(call.output_error)} ({call.basis})",
                f"module: {call.module}" if call.module else "",
                f"at {call.where}" if call.where else "",
                "stack:\n" + "\n".join(call.stack) if call.stack else "",
            ],
        )
    )


def _same_call(call: CallVerdict, other: CallVerdict | None) -> bool:
    if other is None:
        return False
    return (call.target_call, call.orig_call, call.direction) == (
        other.target_call,
        other.orig_call,
        other.direction,
    )


def _table(report: DumpCompareReport) -> _Table:
    """Read every block of the report into the page's rows; find the row of the first divergence.

    A row fails when its call differs and its own error is over the tolerance. The first divergence
    is the first failing output of the first call that differs (its first failing input when the
    verdict is that the weights differ: other weights show in the parameter that differs).
    """
    table = _Table()
    first_call = report.first_error or report.first_failure
    for rows, calls in report.blocks():
        for call in calls:
            table.details.append(_call_details(call))
            looking = _same_call(call, first_call) and table.first is None
            differs = call.status in DIFFERING
            for index in call.rows:
                row = rows[index]
                fails = differs and row.error is not None and row.error > report.tolerance
                wanted = row.role == "output" or call.status == "weights"
                if looking and table.first is None and fails and wanted:
                    table.first = len(table.accuracy)
                table.add_row(row, call, fails)
    return table


def _metrics(numbers: dict[str, list[float | None]], tolerance: float) -> list[Metric]:
    """Return the four charts of a dump comparison, each with the line it is read against."""
    return [
        Metric(
            "error",
            "error (relative L2, or from statistics)",
            numbers["error"],
            tolerance,
            f"tolerance {tolerance:g}: a row of a differing call fails above it",
        ),
        Metric("max_rel", "max relative error", numbers["max_rel"]),
        Metric(
            "cosine_distance",
            "cosine distance (1 - cosine)",
            [cosine_distance(c) for c in numbers["cosine"]],
            1.0 - COSINE_MIN,
            f"{1.0 - COSINE_MIN:g}: a cosine under {COSINE_MIN:g}, ptdbg's line",
        ),
        Metric(
            "max_abs", "max absolute error", numbers["max_abs"], MAX_ABS_MAX, f"{MAX_ABS_MAX:g}: ptdbg's line"
        ),
    ]


def dump_page(report: DumpCompareReport) -> ReportPage:
    """Return the page of a dump comparison: a row per compared value, forward and backward charted apart.

    A row's details are its call's verdict, reason and stack (see :func:`_table` for which rows
    fail and which is the first divergence).
    """
    table = _table(report)
    same_names = table.target_names == table.orig_names
    columns = [Column("target", "name" if same_names else f"{report.target_label or 'NPU'} name")]
    cells: dict[str, list[Any]] = {"target": table.target_names}
    if not same_names:
        columns.append(Column("orig", f"{report.orig_label or 'Bench'} name"))
        cells["orig"] = table.orig_names
    columns += [
        Column("accuracy", "accuracy reached"),
        Column("verdict", "call verdict"),
        Column("cosine", "cosine", numeric=True),
        Column("max_abs", "max abs err", numeric=True),
        Column("max_rel", "max relative err", numeric=True),
        Column("error", "error", numeric=True),
    ]
    cells.update(accuracy=table.accuracy, verdict=table.verdicts, **table.numbers)
    first, first_call = table.first, report.first_error or report.first_failure
    first_label = ""
    notes = []
    if first is not None and first_call is not None:
        first_label = str(table.target_names[first] or table.orig_names[first])
        notes.append(
            f"first divergence: {first_call.label}: inputs' error {format_number(first_call.input_error)}, "
            f"outputs' error {format_number(first_call.output_error)} ({first_call.status})"
        )
    notes += [f"setting: {d.line()}" for d in report.settings_differences]
    return ReportPage(
        kind="dump_compare",
        title=f"Dumps {report.target_path} and {report.orig_path}",
        passed=report.passed,
        summary=report.summary(),
        facts=[
            (f"{report.target_label or 'NPU'} dump ({report.target_format})", report.target_path),
            (f"{report.orig_label or 'Bench'} dump ({report.orig_format})", report.orig_path),
            ("compared by", report.basis),
            ("tolerance", f"{report.tolerance:g}"),
            ("rows", str(report.total_rows)),
            ("calls", str(report.total_calls)),
        ],
        columns=columns,
        cells=cells,
        failed=table.failed,
        metrics=_metrics(table.numbers, report.tolerance),
        details=table.details,
        detail_of=table.detail_of,
        groups=table.groups,
        first=first,
        first_label=first_label,
        notes=notes,
    )
