"""Each report model as a :class:`~tscore.html_report.page.ReportPage`: rows, metrics, first divergence.

One function per kind of comparison: folders of saved tensors
(:func:`compare_page`), checkpoints (:func:`checkpoint_page`), the
difference finder (:func:`netdiff_page`) and two dumps (:func:`dump_page`).
They read the same pydantic models as the table, CSV and JSON, every row
included (``iter_pairs``, ``iter_rows``), in execution order.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tscore.compare.report import PairResult, PairStatus, format_number, format_shape
from tscore.html_report.histograms import pair_histograms
from tscore.html_report.page import Column, Metric, ReportPage

if TYPE_CHECKING:
    from tscore.checkpoint.ckpt_diff import CheckpointDiff
    from tscore.compare.report import CompareReport
    from tscore.dump_compare.report import DumpCompareReport
    from tscore.netdiff.report import NetDiffReport

DIFFERING = ("own", "weights", "inherited")  # the verdicts of calls that make a dump comparison fail
COSINE_REFERENCE = 0.01  # ptdbg's line: a cosine under 0.99 is a difference
HISTOGRAM_ROWS = 50  # failing rows that get a histogram of their differences, at most


def _distance(cosine: float | None) -> float | None:
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
            [_distance(p.cosine) for p in pairs],
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


def _pair_cells(pairs: Sequence[PairResult]) -> dict[str, list[Any]]:
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


def _pair_detail(pair: PairResult) -> str:
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


def _first_failing(failed: Iterable[bool]) -> int | None:
    return next((i for i, f in enumerate(failed) if f), None)


def _pair_label(pair: PairResult) -> str:
    if pair.orig_name == pair.target_name or not pair.target_name:
        return str(pair.orig_name)
    return f"{pair.orig_name} / {pair.target_name}"


def compare_page(report: CompareReport) -> ReportPage:
    """Return the page of a folder comparison (``compare_npy_dir``, ``compare_grads_dir`` ...).

    Failing pairs (the first :data:`HISTOGRAM_ROWS`) get a histogram of their differences, read
    from the two folders when the files are still there.
    """
    pairs = list(report.iter_pairs())
    failed = [not p.passed for p in pairs]
    first = _first_failing(failed)
    summary = report.summary()
    first_label = ""
    if first is not None:
        pair = pairs[first]
        first_label = _pair_label(pair)
        summary = (
            f"first pair out of tolerance: {first_label} ({pair.status.value}, max abs diff "
            f"{format_number(pair.max_abs_diff)}, max rel diff {format_number(pair.max_rel_diff)}): "
            f"look at what computes it in the target run. {summary}"
        )
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
        cells=_pair_cells(pairs),
        failed=failed,
        metrics=pair_metrics(pairs, report.rtol, report.atol),
        details=[_pair_detail(p) for p in pairs],
        detail_of=list(range(len(pairs))),
        first=first,
        first_label=first_label,
        histograms=pair_histograms(pairs, histogram_rows, *folders),
    )


def checkpoint_page(diff: CheckpointDiff) -> ReportPage:
    """Return the page of a checkpoint comparison (``compare_ms_ckpt``, ``compare_pth_and_ckpt``)."""
    values = {(p.orig_name, p.target_name): p for p in diff.value_rows}
    pairs: list[PairResult] = []
    shape_cells: list[str] = []
    failed: list[bool] = []
    for row in diff.shape_rows:
        value = values.get((row.orig_name, row.target_name))
        if value is None:
            status = (
                "shape_mismatch" if row.shape_equal is False else ("ok" if row.shape_equal else "missing")
            )
            value = PairResult.model_validate(
                {
                    "orig_name": row.orig_name,
                    "target_name": row.target_name,
                    "status": status,
                    "orig_shape": row.orig_shape,
                    "target_shape": row.target_shape,
                    "orig_dtype": row.orig_dtype,
                    "target_dtype": row.target_dtype,
                    "allclose": bool(row.shape_equal),
                }
            )
        pairs.append(value)
        shape_cells.append(f"{format_shape(row.orig_shape)} / {format_shape(row.target_shape)}")
        failed.append(not row.shape_equal or (diff.compare_value and not value.passed))
    cells = _pair_cells(pairs)
    cells["shapes"] = shape_cells
    if not diff.compare_value:
        cells["status"] = ["passed" if not f else p.status.value for p, f in zip(pairs, failed, strict=True)]
    first = _first_failing(failed)
    summary = diff.summary()
    first_label = _pair_label(pairs[first]) if first is not None else ""
    if first is not None:
        summary = f"first parameter that differs: {first_label} ({cells['status'][first]}). {summary}"
    columns = [*PAIR_COLUMNS[:3], Column("shapes", "shapes"), *PAIR_COLUMNS[3:]]
    columns[0] = Column("orig", f"{diff.orig_label} name")
    columns[1] = Column("target", f"{diff.target_label} name")
    return ReportPage(
        kind="checkpoint",
        title=f"Checkpoints {diff.orig_file} and {diff.target_file}",
        passed=diff.passed,
        summary=summary,
        facts=[
            (f"{diff.orig_label} checkpoint", diff.orig_file),
            (f"{diff.target_label} checkpoint", diff.target_file),
            ("values compared", str(diff.compare_value)),
            ("rtol", f"{diff.rtol:g}"),
            ("atol", f"{diff.atol:g}"),
            ("dropped by the weight map", ", ".join(diff.dropped) or "none"),
        ],
        columns=columns,
        cells=cells,
        failed=failed,
        metrics=pair_metrics(pairs, diff.rtol, diff.atol) if diff.compare_value else [],
        details=[_pair_detail(p) for p in pairs],
        detail_of=list(range(len(pairs))),
        first=first,
        first_label=first_label,
    )


def netdiff_page(report: NetDiffReport) -> ReportPage:
    """Return the page of ``NetDifferenceFinder.compare``: every located layer call, else the outputs."""
    from tscore.netdiff.report import LayerStatus

    labels = report.labels
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
    if report.layers:
        rows = report.layers
        outputs = [
            row.output or PairResult(orig_name=None, target_name=None, status=PairStatus.MISSING)
            for row in rows
        ]
        failed = [row.status not in (LayerStatus.OK, LayerStatus.CONTAINS) for row in rows]
        divergence = report.first_divergence
        first = None
        if divergence is not None:
            first = next(
                (
                    i
                    for i, row in enumerate(rows)
                    if (row.orig_path, row.target_path, row.call)
                    == (divergence.orig_path, divergence.target_path, divergence.call)
                ),
                None,
            )
        cells: dict[str, list[Any]] = {
            "layer": [row.label() for row in rows],
            "status": [row.status.value for row in rows],
            "cosine": [o.cosine for o in outputs],
            "max_abs": [o.max_abs_diff for o in outputs],
            "max_rel": [o.max_rel_diff for o in outputs],
            "own": [row.own_error if row.own is not None else None for row in rows],
            "inherited": [row.inherited_error for row in rows],
        }
        details = [
            "\n".join(
                filter(
                    None,
                    [
                        f"paired by: {row.paired_by}",
                        row.note,
                        *(f"setting differs: {s.text(labels)}" for s in row.settings),
                        _pair_detail(row.output) if row.output else "",
                    ],
                )
            )
            for row in rows
        ]
        columns = [
            Column("layer", f"layer ({labels[0]} / {labels[1]})"),
            Column("status", "status"),
            Column("cosine", "cosine", numeric=True),
            Column("max_abs", "max abs diff", numeric=True),
            Column("max_rel", "max rel diff", numeric=True),
            Column("own", "own error", numeric=True),
            Column("inherited", "inherited error", numeric=True),
        ]
        first_label = rows[first].label() if first is not None else ""
        facts.append(("layers compared in case", str(report.located_case)))
    else:
        outputs = report.outputs
        failed = [not p.passed for p in outputs]
        first = _first_failing(failed)
        first_label = _pair_label(outputs[first]) if first is not None else ""
        cells = _pair_cells(outputs)
        details = [_pair_detail(p) for p in outputs]
        columns = [
            Column("orig", f"{labels[0]} output"),
            Column("target", f"{labels[1]} output"),
            *PAIR_COLUMNS[2:],
        ]
    metrics = pair_metrics(outputs, report.rtol, report.atol)
    if report.layers:  # what each layer computes wrong by itself, given the same inputs
        own = [row.own_error if row.own is not None else None for row in report.layers]
        metrics.append(
            Metric(
                "own",
                "own error (target layer replayed on orig inputs)",
                own,
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
        columns=columns,
        cells=cells,
        failed=failed,
        metrics=metrics,
        details=details,
        detail_of=list(range(len(details))),
        first=first,
        first_label=first_label,
        notes=notes,
    )


def dump_page(report: DumpCompareReport) -> ReportPage:
    """Return the page of a dump comparison: a row per compared value, forward and backward charted apart.

    A row fails as the report does: its call differs (an error of its own, other weights, or
    inherited) and the row's own error is over the tolerance. A row's
    details are its call's verdict, reason and stack; the first divergence is the first failing
    output of the first call with an error of its own (else of the first call that differs), or
    its first failing input when the verdict is that the weights differ.
    """
    from tscore.dump_compare.rows import COSINE_MIN, MAX_ABS_MAX

    target_names: list[str | None] = []
    orig_names: list[str | None] = []
    keys = ("cosine", "max_abs", "max_rel", "error")
    numbers: dict[str, list[float | None]] = {key: [] for key in keys}
    accuracy: list[str] = []
    verdicts: list[str] = []
    groups: list[str] = []
    detail_of: list[int] = []
    details: list[str] = []
    first_call = report.first_error or report.first_failure
    first: int | None = None
    failed: list[bool] = []
    tolerance = report.tolerance
    for rows, calls in report.blocks():
        for call in calls:
            text = "\n".join(
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
            details.append(text)
            is_first = first_call is not None and (call.target_call, call.orig_call, call.direction) == (
                first_call.target_call,
                first_call.orig_call,
                first_call.direction,
            )
            differs = call.status in DIFFERING
            first_output = is_first and first is None
            for index in call.rows:
                row = rows[index]
                fails = differs and row.error is not None and row.error > tolerance
                # an own error shows in the outputs; other weights in the parameter that differs
                wanted = row.role == "output" or call.status == "weights"
                if first_output and first is None and fails and wanted:
                    first = len(accuracy)
                failed.append(fails)
                target_names.append(row.target_name)
                orig_names.append(row.orig_name)
                numbers["cosine"].append(row.cosine)
                numbers["max_abs"].append(row.max_abs_err)
                numbers["max_rel"].append(row.max_relative_err)
                numbers["error"].append(row.error)
                accuracy.append(row.accuracy)
                verdicts.append(call.status)
                groups.append("backward" if call.direction == "backward" else "forward")
                detail_of.append(len(details) - 1)
    same_names = target_names == orig_names
    columns = [Column("target", "name" if same_names else f"{report.target_label or 'NPU'} name")]
    cells: dict[str, list[Any]] = {"target": target_names}
    if not same_names:
        columns.append(Column("orig", f"{report.orig_label or 'Bench'} name"))
        cells["orig"] = orig_names
    columns += [
        Column("accuracy", "accuracy reached"),
        Column("verdict", "call verdict"),
        Column("cosine", "cosine", numeric=True),
        Column("max_abs", "max abs err", numeric=True),
        Column("max_rel", "max relative err", numeric=True),
        Column("error", "error", numeric=True),
    ]
    cells.update(accuracy=accuracy, verdict=verdicts, **numbers)
    metrics = [
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
            [_distance(c) for c in numbers["cosine"]],
            1.0 - COSINE_MIN,
            f"{1.0 - COSINE_MIN:g}: a cosine under {COSINE_MIN:g}, ptdbg's line",
        ),
        Metric(
            "max_abs", "max absolute error", numbers["max_abs"], MAX_ABS_MAX, f"{MAX_ABS_MAX:g}: ptdbg's line"
        ),
    ]
    first_label = ""
    notes = []
    if first is not None and first_call is not None:
        first_label = str(target_names[first] or orig_names[first])
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
        failed=failed,
        metrics=metrics,
        details=details,
        detail_of=detail_of,
        groups=groups,
        first=first,
        first_label=first_label,
        notes=notes,
    )
