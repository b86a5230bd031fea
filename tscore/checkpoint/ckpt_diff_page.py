"""A checkpoint comparison as a page: a row per parameter, its shapes and, when compared, its values."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tscore.compare.pair_page import (
    PAIR_COLUMNS,
    first_failing,
    pair_cells,
    pair_detail,
    pair_label,
    pair_metrics,
)
from tscore.compare.pairs import PairResult, format_shape
from tscore.html_report.page import Column, ReportPage

if TYPE_CHECKING:
    from tscore.checkpoint.ckpt_diff import CheckpointDiff


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
    cells = pair_cells(pairs)
    cells["shapes"] = shape_cells
    if not diff.compare_value:
        cells["status"] = ["passed" if not f else p.status.value for p, f in zip(pairs, failed, strict=True)]
    first = first_failing(failed)
    summary = diff.summary()
    first_label = pair_label(pairs[first]) if first is not None else ""
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
        details=[pair_detail(p) for p in pairs],
        detail_of=list(range(len(pairs))),
        first=first,
        first_label=first_label,
    )
