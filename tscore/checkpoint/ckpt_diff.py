"""Comparing two checkpoints: which parameters both have, whether their shapes agree, and their values.

Parameters pair by name (after the weight map, for checkpoints of two
frameworks). The values go through the compare engine's metrics, one pair
at a time, so memory stays at one chunk whatever the checkpoint size.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, computed_field
from tabulate import tabulate
from tqdm import tqdm

from tscore.checkpoint.convert import ConversionStatus, convert_params
from tscore.checkpoint.weight_map import WeightMap
from tscore.compare.engine import compare_arrays
from tscore.compare.pairs import PairResult, format_shape
from tscore.compare.report import boxed, pair_table, print_report
from tscore.contract.checkpoints import CheckpointContents

if TYPE_CHECKING:
    from tscore.html_report.page import ReportPage

SHAPE_TITLE = "The list of comparison results for shapes"
VALUE_TITLE = "The list of comparison results for values"


class ShapeRow(BaseModel):
    """One parameter name on either side, and whether the shapes agree (None: only one side has it)."""

    orig_name: str | None
    target_name: str | None
    shape_equal: bool | None
    orig_shape: tuple[int, ...] | None = None
    target_shape: tuple[int, ...] | None = None
    orig_dtype: str | None = None
    target_dtype: str | None = None


class CheckpointDiff(BaseModel):
    """The comparison of two checkpoints: a shape row per name, a value row per shared name."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    orig_file: str
    target_file: str
    orig_label: str = Field(description="what the name columns call the orig side")
    target_label: str
    compare_value: bool
    rtol: float
    atol: float
    equal_nan: bool
    shape_rows: list[ShapeRow]
    value_rows: list[PairResult]
    skipped: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="per side ('orig', 'target'): entries left out and why"
    )
    dropped: list[str] = Field(default_factory=list, description="orig entries the weight map drops")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """True when both sides hold the same names and shapes and, if compared, values within tolerance."""
        return all(row.shape_equal for row in self.shape_rows) and all(row.passed for row in self.value_rows)

    def summary(self) -> str:
        """One line: names on each side, shape and value agreement."""
        both = sum(row.shape_equal is not None for row in self.shape_rows)
        only_orig = sum(row.target_name is None for row in self.shape_rows)
        only_target = sum(row.orig_name is None for row in self.shape_rows)
        unequal = sum(row.shape_equal is False for row in self.shape_rows)
        parts = [f"{both} parameters on both sides"]
        if only_orig or only_target:
            parts.append(f"{only_orig} only in {self.orig_label}, {only_target} only in {self.target_label}")
        parts.append(f"{unequal} with different shapes")
        if self.compare_value:
            failed = sum(not row.passed for row in self.value_rows)
            parts.append(f"{len(self.value_rows) - failed} of {len(self.value_rows)} within tolerance")
        if self.dropped:
            parts.append(f"{len(self.dropped)} dropped by the weight map")
        skipped = sum(len(v) for v in self.skipped.values())
        if skipped:
            parts.append(f"{skipped} non-tensor entries skipped")
        return "; ".join(parts)

    def shape_table(self, *, only_diff: bool = False) -> str:
        """TroubleShooter's shape table; ``only_diff`` keeps the rows whose shapes are not equal."""
        names = (f"Parameter name of {self.orig_label}", f"Parameter name of {self.target_label}")
        headers = [
            *names,
            "Whether shape are equal",
            f"Parameter shape of {self.orig_label}",
            f"Parameter shape of {self.target_label}",
        ]
        rows = [
            [
                row.orig_name,
                row.target_name,
                row.shape_equal,
                format_shape(row.orig_shape),
                format_shape(row.target_shape),
            ]
            for row in self.shape_rows
            if not (only_diff and row.shape_equal)
        ]
        return boxed(SHAPE_TITLE, tabulate(rows, headers=headers, tablefmt="pretty"))

    def value_table(self, *, only_diff: bool = False) -> str:
        """TroubleShooter's value table with the compare engine's columns and notes."""
        names = (f"Parameter name of {self.orig_label}", f"Parameter name of {self.target_label}")
        return pair_table(self.value_rows, title=VALUE_TITLE, name_headers=names, only_failed=only_diff)

    def table(self, *, only_diff: bool = False) -> str:
        """Both tables (the value table when values were compared), then the summary line.

        With ``only_diff``, a table with no row left is not shown.
        """
        parts = []
        if not only_diff or not all(row.shape_equal for row in self.shape_rows):
            parts.append(self.shape_table(only_diff=only_diff))
        if self.compare_value and (not only_diff or not all(row.passed for row in self.value_rows)):
            parts.append(self.value_table(only_diff=only_diff))
        parts.append(self.summary())
        return "\n".join(parts)

    def to_html(self, path: str | os.PathLike[str], metric: str | None = None) -> str:
        """Write this report as one self-contained HTML page (:mod:`tscore.html_report`); return the path.

        :param metric: the error metric charted first (``max_rel``, ``cosine_distance``, ``max_abs``).
        :raises TargetPathError: naming the path, when its folder is missing or not writable.
        """
        from tscore.html_report import write_html

        return write_html(self, path, metric)

    def to_page(self) -> ReportPage:
        """Return this report's page data, which :mod:`tscore.html_report` renders."""
        from tscore.checkpoint.ckpt_diff_page import checkpoint_page

        return checkpoint_page(self)

    def to_json(self, indent: int | None = 2) -> str:
        """Render the whole comparison as JSON."""
        return self.model_dump_json(indent=indent)


def diff_checkpoints(
    orig: CheckpointContents,
    target: CheckpointContents,
    *,
    orig_names: dict[str, str] | None = None,
    labels: tuple[str, str] = ("original ckpt", "target ckpt"),
    compare_value: bool = True,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    equal_nan: bool = False,
    progress: bool = False,
    dropped: list[str] | None = None,
) -> CheckpointDiff:
    """Pair ``orig`` and ``target`` entries by name and compare shapes and, if asked, values.

    :param orig_names: display names for orig entries (``{name in orig: name shown}``),
        such as the torch names of a converted checkpoint.
    :param labels: what to call each side in the table headers.
    :param progress: show a progress bar over the bytes compared (on a terminal only).
    """
    shown = orig_names or {}
    shape_rows: list[ShapeRow] = []
    value_rows: list[PairResult] = []
    shared = [name for name in orig.params if name in target.params]
    total = sum(orig.params[n].nbytes + target.params[n].nbytes for n in shared) if compare_value else 0
    with tqdm(
        total=total, unit="B", unit_scale=True, desc="compare", disable=None if progress else True
    ) as bar:
        for name, array in orig.params.items():
            display = shown.get(name, name)
            other = target.params.get(name)
            orig_dtype = orig.dtypes.get(name, array.dtype.name)
            if other is None:
                shape_rows.append(
                    ShapeRow(
                        orig_name=display,
                        target_name=None,
                        shape_equal=None,
                        orig_shape=array.shape,
                        orig_dtype=orig_dtype,
                    )
                )
                continue
            target_dtype = target.dtypes.get(name, other.dtype.name)
            shape_rows.append(
                ShapeRow(
                    orig_name=display,
                    target_name=name,
                    shape_equal=array.shape == other.shape,
                    orig_shape=array.shape,
                    target_shape=other.shape,
                    orig_dtype=orig_dtype,
                    target_dtype=target_dtype,
                )
            )
            if compare_value:
                row = compare_arrays(array, other, rtol, atol, equal_nan, orig_name=display, target_name=name)
                value_rows.append(
                    row.model_copy(update={"orig_dtype": orig_dtype, "target_dtype": target_dtype})
                )
                bar.update(array.nbytes + other.nbytes)
    for name, other in target.params.items():
        if name not in orig.params:
            shape_rows.append(
                ShapeRow(
                    orig_name=None,
                    target_name=name,
                    shape_equal=None,
                    target_shape=other.shape,
                    target_dtype=target.dtypes.get(name, other.dtype.name),
                )
            )
    return CheckpointDiff(
        orig_file=orig.path,
        target_file=target.path,
        orig_label=labels[0],
        target_label=labels[1],
        compare_value=compare_value,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        shape_rows=shape_rows,
        value_rows=value_rows,
        skipped={side: dict(c.skipped) for side, c in (("orig", orig), ("target", target)) if c.skipped},
        dropped=list(dropped or []),
    )


def through_map(
    contents: CheckpointContents, weight_map: WeightMap, *, strict: bool = True
) -> tuple[CheckpointContents, dict[str, str], list[str]]:
    """Rename and reshape ``contents`` as the map says, for pairing with the target framework's checkpoint.

    :param strict: the map must name exactly the entries of ``contents``; with
        ``False``, entries it does not name keep their own name.
    :return: the converted contents, ``{target name: source name}`` to show the
        source names in the tables, and the source entries the map drops.
    """
    if not strict:
        unnamed = {n: n for n in contents.params if n not in weight_map.name_map}
        weight_map = replace(weight_map, name_map={**weight_map.name_map, **unnamed})
    params, rows = convert_params(contents, weight_map)
    named = [(row.target_name, row) for row in rows if row.target_name is not None]
    converted = CheckpointContents(
        path=contents.path,
        format=contents.format,
        params=params,
        dtypes={target: row.dtype for target, row in named if row.dtype},
        skipped=contents.skipped,
    )
    names = {target: row.source_name for target, row in named}
    dropped = [row.source_name for row in rows if row.status is ConversionStatus.DROPPED]
    return converted, names, dropped


def diff_through_map(
    orig_side: CheckpointContents,
    target_side: CheckpointContents,
    weight_map: WeightMap,
    *,
    strict: bool = True,
    labels: tuple[str, str] | None = None,
    ignore_target: tuple[str, ...] | list[str] = (),
    **options: Any,
) -> CheckpointDiff:
    """Compare two states of any two frameworks: rename the orig side through the map, show its names.

    :param labels: what the tables call each side; the map's frameworks by default.
    :param ignore_target: target entries the orig side has no counterpart for (the map's
        ``target_only``); they are listed as skipped instead of as one-sided rows.
    :param options: ``compare_value``, ``rtol``, ``atol``, ``equal_nan``, ``progress``, as
        :func:`diff_checkpoints` takes them.
    """
    converted, names, dropped = through_map(orig_side, weight_map, strict=strict)
    if ignore_target:
        ignored = set(ignore_target)
        target_side = replace(
            target_side,
            params={n: a for n, a in target_side.params.items() if n not in ignored},
            skipped={
                **target_side.skipped,
                **{n: f"no {weight_map.source} counterpart; keeps its own value" for n in ignore_target},
            },
        )
    shown = labels or (weight_map.source, weight_map.target)
    return diff_checkpoints(
        converted, target_side, orig_names=names, labels=shown, dropped=dropped, **options
    )


def print_diff(diff: CheckpointDiff, print_level: int) -> None:
    """Print as TroubleShooter's ``print_level`` asks: 0 nothing, 1 everything, 2 only differences."""
    if print_level:
        print_report(diff.table(only_diff=print_level == 2))
