"""Two loss curves aligned by step, their differences and statistics: the data ``loss_compare`` returns."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from pydantic import BaseModel, Field


def _stats(values: list[float]) -> tuple[float | None, float | None, float | None]:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None, None, None
    return max(finite), min(finite), sum(finite) / len(finite)


class LossCompareReport(BaseModel):
    """Two training logs' losses at the steps both logged, and what differs.

    ``steps``, ``left``, ``right``, ``abs_diff`` and ``rel_diff`` are parallel lists; the
    relative difference is ``|left - right| / |left|`` (None where the left loss is 0 or a
    side is not finite).
    """

    title: str
    left_path: str
    right_path: str
    left_label: str
    right_label: str
    aligned_by: str = Field(description="'step' (the logs' own step numbers) or 'order' (counted from 0)")
    steps: list[int]
    left: list[float]
    right: list[float]
    abs_diff: list[float | None]
    rel_diff: list[float | None]
    left_only: list[int] = Field(default_factory=list, description="steps only the left log has")
    right_only: list[int] = Field(default_factory=list, description="steps only the right log has")
    left_steps: list[int] = Field(default_factory=list, description="every step of the left log")
    left_all: list[float] = Field(default_factory=list, description="the left log's loss at each of them")
    right_steps: list[int] = Field(default_factory=list, description="every step of the right log")
    right_all: list[float] = Field(default_factory=list, description="the right log's loss at each of them")
    tolerance: float
    files: list[str] = Field(default_factory=list)

    @property
    def max_abs_error(self) -> float | None:
        """The largest absolute difference at a step both logged (None when none is finite)."""
        known = [v for v in self.abs_diff if v is not None]
        return max(known) if known else None

    @property
    def max_rel_error(self) -> float | None:
        """The largest relative difference at a step both logged."""
        known = [v for v in self.rel_diff if v is not None]
        return max(known) if known else None

    @property
    def first_divergence(self) -> int | None:
        """The first step whose relative difference exceeds the tolerance, or where one side is NaN/inf."""
        for step, left, right, rel in zip(self.steps, self.left, self.right, self.rel_diff, strict=True):
            if math.isfinite(left) != math.isfinite(right) or (rel is not None and rel > self.tolerance):
                return step
        return None

    @property
    def passed(self) -> bool:
        """True when no step diverges and both logs have the same steps."""
        return (
            bool(self.steps) and self.first_divergence is None and not self.left_only and not self.right_only
        )

    def summary(self) -> str:
        """One line: agreement, or the first step that diverges and the largest differences."""
        counts = f"{len(self.steps)} steps compared"
        if self.left_only or self.right_only:
            counts += (
                f" ({len(self.left_only)} only in {self.left_label}, "
                f"{len(self.right_only)} only in {self.right_label})"
            )
        if not self.steps:
            return f"no step in common: {counts}; check that both logs number their steps alike"
        first = self.first_divergence
        biggest = f"max abs error {_cell(self.max_abs_error)}, max relative error {_cell(self.max_rel_error)}"
        if first is None:
            return f"losses agree within {self.tolerance:g} relative: {counts}; {biggest}"
        return f"losses diverge from step {first}: {counts}; {biggest}"

    def statistic_row(self) -> dict[str, Any]:
        """TroubleShooter's ``statistic.csv`` row: each side's max, min and mean, the largest errors."""
        left, right = _stats(self.left_all), _stats(self.right_all)
        return {
            "LEFT_MAX": left[0],
            "LEFT_MIN": left[1],
            "LEFT_MEAN": left[2],
            "RIGHT_MAX": right[0],
            "RIGHT_MIN": right[1],
            "RIGHT_MEAN": right[2],
            "MAX_ABS_ERROR": self.max_abs_error,
            "MAX_REL_ERROR": self.max_rel_error,
        }

    def curves_csv(self) -> str:
        """Both curves by step with their differences, one CSV line per step either log holds."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["step", self.left_label, self.right_label, "abs_diff", "rel_diff"])
        left = dict(zip(self.left_steps, self.left_all, strict=True))
        right = dict(zip(self.right_steps, self.right_all, strict=True))
        both = dict(zip(self.steps, zip(self.abs_diff, self.rel_diff, strict=True), strict=True))
        rows = {}
        for step in {*left, *right}:
            diff, rel = both.get(step, (None, None))
            rows[step] = [step, _cell(left.get(step)), _cell(right.get(step)), _cell(diff), _cell(rel)]
        for step in sorted(rows):
            writer.writerow(rows[step])
        return out.getvalue()


def _cell(value: float | None) -> str:
    return "" if value is None else repr(float(value))
