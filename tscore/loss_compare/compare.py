"""``loss_compare``: two training logs' loss curves, aligned by step, in a CSV and pictures a person compares.

TroubleShooter 1.0.18's call and folder (``./loss_compare/``): ``statistic.csv``
with its columns, one ``{log name}.csv`` of losses per log, and the pictures
of the two curves and of their difference, as SVG files that any browser
opens (TroubleShooter draws PNGs with matplotlib; tscore needs no plotting
library). ``loss_compare.csv`` adds both curves by step with their absolute
and relative differences, and the report returned holds it all as data.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
from typing import Any

from tscore.errors import TargetPathError
from tscore.loss_compare.logs import LossLog, describe, read_losses
from tscore.loss_compare.report import LossCompareReport
from tscore.npy_files import write_atomic
from tscore.svg_chart import Series, line_chart

log = logging.getLogger(__name__)

DEFAULT_TOLERANCE = 1e-3  # relative difference of two losses that counts as diverging


def loss_compare(
    left_file: Any,
    right_file: Any,
    title: str = "Loss Compare",
    *,
    output_path: str | os.PathLike[str] | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    print_level: int = 1,
) -> LossCompareReport:
    """Compare the losses of two training logs step by step; write the CSVs and pictures.

    :param left_file: ``{"path": log, "loss_tag": "lm loss:", "label": "torch"}`` as in
        TroubleShooter (or a path, with the tag ``"loss:"``); ``right_file`` likewise.
    :param output_path: the folder of the results (created if missing); default
        ``./loss_compare``, TroubleShooter's.
    :param tolerance: the relative difference beyond which a step counts as diverging.
    :param print_level: 0 prints nothing, 1 the summary line and the folder.
    :return: both curves by step, their differences, the first step that diverges.
    :raises LossLogError: naming a log that is missing or holds no loss under its tag.
    :raises TargetPathError: when the folder cannot be written.
    """
    if not tolerance >= 0:
        raise ValueError(f"loss_compare: tolerance must be >= 0, got {tolerance}")
    left = read_losses(*describe(left_file, "left_file"))
    right = read_losses(*describe(right_file, "right_file"))
    if left.label == right.label:
        left.label, right.label = f"{left.label} (left)", f"{right.label} (right)"
    report = compare_losses(left, right, title, tolerance)
    folder = os.fspath(output_path) if output_path is not None else os.path.join(os.getcwd(), "loss_compare")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise TargetPathError(f"loss_compare: cannot create the folder {folder!r}: {exc}") from exc
    report.files = _write_files(report, left, right, folder)
    log.info("loss compare: %s; results in %s", report.summary(), folder)
    if print_level:
        print(f"{report.summary()}\nLoss Comparison has completed, results saved in {folder}")
    return report


def compare_losses(left: LossLog, right: LossLog, title: str, tolerance: float) -> LossCompareReport:
    """Align two logs' losses (by step when both number their steps, else by order) and difference them."""
    by_step = left.by_step and right.by_step
    if left.by_step != right.by_step:
        log.warning("one log numbers its steps and the other does not: the losses are aligned by order")
    left_steps = left.steps if by_step else list(range(len(left.losses)))
    right_steps = right.steps if by_step else list(range(len(right.losses)))
    right_at = dict(zip(right_steps, right.losses, strict=True))
    steps, lefts, rights, diffs, rels = [], [], [], [], []
    for step, value in zip(left_steps, left.losses, strict=True):
        if step not in right_at:
            continue
        other = right_at[step]
        steps.append(step)
        lefts.append(value)
        rights.append(other)
        finite = math.isfinite(value) and math.isfinite(other)
        diffs.append(abs(value - other) if finite else None)
        rels.append(abs(value - other) / abs(value) if finite and value != 0 else None)
    shared = set(steps)
    return LossCompareReport(
        title=title,
        left_path=left.path,
        right_path=right.path,
        left_label=left.label,
        right_label=right.label,
        aligned_by="step" if by_step else "order",
        steps=steps,
        left=lefts,
        right=rights,
        abs_diff=diffs,
        rel_diff=rels,
        left_only=[s for s in left_steps if s not in shared],
        right_only=[s for s in right_steps if s not in shared],
        left_steps=left_steps,
        left_all=left.losses,
        right_steps=right_steps,
        right_all=right.losses,
        tolerance=tolerance,
    )


def _write_files(report: LossCompareReport, left: LossLog, right: LossLog, folder: str) -> list[str]:
    """Write TroubleShooter's files and tscore's curves CSV and pictures, each atomically; their paths."""
    x_label = "step" if report.aligned_by == "step" else "iteration"
    pictures = {
        "loss_compare.svg": line_chart(
            [
                Series(report.left_label, report.left_steps, report.left_all),
                Series(report.right_label, report.right_steps, report.right_all),
            ],
            title=report.title,
            x_label=x_label,
            y_label="loss",
        ),
        "error.svg": line_chart(
            [
                Series("absolute difference", report.steps, report.abs_diff),
                Series("relative difference", report.steps, report.rel_diff),
            ],
            title=f"{report.title}: difference ({report.left_label} vs {report.right_label})",
            x_label=x_label,
            y_label="difference (log scale)",
            log_y=True,
            hline=report.tolerance,
            hline_label=f"tolerance {report.tolerance:g}",
        ),
    }
    texts = dict(pictures)
    texts["loss_compare.csv"] = report.curves_csv()
    texts["statistic.csv"] = _table([report.statistic_row()])
    for one in (left, right):
        name = f"{os.path.basename(one.path)}.csv"
        texts[name] = _table([{"": i, "loss": v} for i, v in enumerate(one.losses)])
    return [_write_text(os.path.join(folder, name), text) for name, text in texts.items()]


def _write_text(path: str, text: str) -> str:
    data = text.encode("utf-8")
    return write_atomic(path, lambda stream: stream.write(data))


def _table(rows: list[dict[str, Any]]) -> str:
    """Render rows as CSV with a header (None as an empty cell, as pandas writes NaN)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(list(rows[0]))
    for row in rows:
        writer.writerow(["" if v is None else v for v in row.values()])
    return out.getvalue()
