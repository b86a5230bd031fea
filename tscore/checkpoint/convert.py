"""Converting a checkpoint from one framework's names and layouts to another's through a weight map.

The arrays are not copied: renamed entries keep their memory (a view of the
mapped source file), transforms are reshapes, and the writer streams each
array to the target file. Everything is checked before the first byte is
written, and the target file appears complete or not at all.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Mapping

import numpy as np
from pydantic import BaseModel, Field
from tabulate import tabulate

from tscore import value_transforms as transforms
from tscore.checkpoint.files import format_of, save_checkpoint
from tscore.checkpoint.weight_map import WeightMap, WeightMapError
from tscore.compare.report import boxed
from tscore.contract.checkpoints import CheckpointContents

log = logging.getLogger(__name__)

TITLE = "The list of conversion result"
LISTED = 20  # names shown in a key-mismatch error


class ConversionStatus(str, enum.Enum):
    """What happened to one source entry."""

    CONSISTENT = "consistent"  # same name, same value
    RENAMED = "renamed"
    VALUE_CONVERTED = "value_converted"
    RENAMED_VALUE_CONVERTED = "renamed_value_converted"
    DROPPED = "dropped"  # the target has no such parameter (the map says null)
    SKIPPED = "skipped"  # not a tensor (epoch, optimizer state), or not in the map with strict=False


class ConversionRow(BaseModel):
    """One source entry and what it became."""

    source_name: str
    target_name: str | None
    status: ConversionStatus
    source_shape: tuple[int, ...] | None = None
    target_shape: tuple[int, ...] | None = None
    dtype: str | None = None
    transform: str | None = None
    message: str = ""


class ConversionReport(BaseModel):
    """Every entry of a conversion, where the result was written, and the two frameworks."""

    source_file: str
    target_file: str | None
    format: str
    source: str = Field(description="framework the weights come from")
    target: str = Field(description="framework they were converted for")
    rows: list[ConversionRow]

    @property
    def counts(self) -> dict[str, int]:
        """Entries per status."""
        counts = {status.value: 0 for status in ConversionStatus}
        for row in self.rows:
            counts[row.status.value] += 1
        return counts

    def summary(self) -> str:
        """One line: how many entries were converted, renamed, dropped or skipped, and where they went."""
        counts = self.counts
        written = len(self.rows) - counts["dropped"] - counts["skipped"]
        parts = [f"{written} parameters {'written' if self.target_file else 'converted'}"]
        parts += [
            f"{n} {status.replace('_', ' ')}" for status, n in counts.items() if n and status != "consistent"
        ]
        where = f" to {self.target_file}" if self.target_file else ""
        return ", ".join(parts) + where

    def table(self) -> str:
        """TroubleShooter's conversion table, then notes for skipped entries and the summary."""
        source, target = _LABELS.get(self.source, self.source), _LABELS.get(self.target, self.target)
        headers = [
            f"Parameter name of {source}",
            f"Parameter name of {target}",
            "Conversion status",
            f"Parameter shape of {source}",
            f"Parameter shape of {target}",
        ]
        rows = [
            [
                row.source_name,
                row.target_name if row.target_name is not None else "-",
                _status_cell(row),
                row.source_shape if row.source_shape is not None else "-",
                row.target_shape if row.target_shape is not None else "-",
            ]
            for row in self.rows
        ]
        body = tabulate(rows, headers=headers, tablefmt="pretty")
        return "\n".join([boxed(TITLE, body), self.summary()])


_LABELS = {"torch": "torch", "mindspore": "MindSpore"}


def _status_cell(row: ConversionRow) -> str:
    """Spell the status as TroubleShooter does (``weight->gamma``, ``Name converted; Value converted``)."""
    if row.status is ConversionStatus.DROPPED:
        return "Dropped: no counterpart"
    if row.status is ConversionStatus.SKIPPED:
        return f"Skipped: {row.message}"
    if row.status is ConversionStatus.CONSISTENT:
        return "Consistent"
    parts = []
    if row.status in (ConversionStatus.RENAMED, ConversionStatus.RENAMED_VALUE_CONVERTED):
        assert row.target_name is not None
        source_head, _, source_tail = row.source_name.rpartition(".")
        target_head, _, target_tail = row.target_name.rpartition(".")
        parts.append(f"{source_tail}->{target_tail}" if source_head == target_head else "Name converted")
    if row.status in (ConversionStatus.VALUE_CONVERTED, ConversionStatus.RENAMED_VALUE_CONVERTED):
        parts.append(f"Value converted ({row.transform})")
    return "; ".join(parts)


def _listing(names: set[str]) -> str:
    shown = sorted(names)[:LISTED]
    more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return ", ".join(shown) + more


def check_keys(params: Mapping[str, object], weight_map: WeightMap, source_file: str) -> None:
    """Make sure the map names exactly the checkpoint's entries; entries it drops may be absent.

    A file converted through a map lacks the entries that map dropped, and the
    inverse map lists them as dropped too (``target_only``), so converting
    back needs them to be optional.

    :raises WeightMapError: listing the first twenty missing and unexpected names, and the counts.
    """
    missing = params.keys() - weight_map.name_map.keys()
    unexpected = {n for n, target in weight_map.name_map.items() if target is not None and n not in params}
    if not missing and not unexpected:
        return
    lines = [
        f"the weight map does not fit {source_file}: it must name every entry of the checkpoint "
        "(write it with get_weight_map from the same network)"
    ]
    if missing:
        lines.append(f"{len(missing)} checkpoint entries are not in the map: {_listing(missing)}")
    if unexpected:
        lines.append(f"{len(unexpected)} map entries are not in the checkpoint: {_listing(unexpected)}")
    raise WeightMapError("; ".join(lines))


def _status(renamed: bool, transformed: bool) -> ConversionStatus:
    if renamed and transformed:
        return ConversionStatus.RENAMED_VALUE_CONVERTED
    if renamed:
        return ConversionStatus.RENAMED
    return ConversionStatus.VALUE_CONVERTED if transformed else ConversionStatus.CONSISTENT


def convert_params(
    contents: CheckpointContents, weight_map: WeightMap, *, strict: bool = True
) -> tuple[dict[str, np.ndarray], list[ConversionRow]]:
    """Rename and transform every tensor of ``contents`` as ``weight_map`` says.

    :param strict: the map must name exactly the checkpoint's tensors; with
        ``False``, tensors the map does not name are skipped (and noted).
    :return: the target ``{name: array}`` in source order, and one row per source entry.
    :raises WeightMapError: for names that do not match (strict), two entries
        sent to one name, or a transform that does not fit its array.
    """
    if strict:
        check_keys(contents.params, weight_map, contents.path or "the given parameters")
    out: dict[str, np.ndarray] = {}
    rows: list[ConversionRow] = []
    for source_name, array in contents.params.items():
        dtype = contents.dtypes.get(source_name, array.dtype.name)
        target_name = weight_map.name_map.get(source_name)
        if target_name is None:  # not in the map (strict=False) or dropped by it
            mapped = source_name in weight_map.name_map
            rows.append(
                ConversionRow(
                    source_name=source_name,
                    target_name=None,
                    status=ConversionStatus.DROPPED if mapped else ConversionStatus.SKIPPED,
                    source_shape=array.shape,
                    dtype=dtype,
                    message="" if mapped else "not in the weight map",
                )
            )
            continue
        if target_name in out:
            raise WeightMapError(
                f"the weight map sends two entries to {target_name!r}, the second {source_name!r}"
            )
        spec = weight_map.value_map.get(source_name)
        try:
            converted = transforms.apply(spec, array) if spec else array
        except transforms.TransformError as exc:
            raise WeightMapError(f"{source_name}: {exc}") from None
        out[target_name] = converted
        rows.append(
            ConversionRow(
                source_name=source_name,
                target_name=target_name,
                status=_status(target_name != source_name, spec is not None),
                source_shape=array.shape,
                target_shape=converted.shape,
                dtype=dtype,
                transform=spec,
            )
        )
    for name, reason in contents.skipped.items():
        rows.append(
            ConversionRow(source_name=name, target_name=None, status=ConversionStatus.SKIPPED, message=reason)
        )
    return out, rows


def convert_checkpoint(
    contents: CheckpointContents,
    target_file: str | os.PathLike[str],
    weight_map: WeightMap,
    *,
    format: str | None = None,
    strict: bool = True,
) -> ConversionReport:
    """Convert ``contents`` through ``weight_map`` and write the result to ``target_file``.

    Nothing is written unless every entry converts.

    :param format: ``"ckpt"``, ``"safetensors"`` or ``"pth"``; by default from ``target_file``'s suffix.
    """
    params, rows = convert_params(contents, weight_map, strict=strict)
    if not params:
        raise WeightMapError(f"{contents.path}: no tensors to convert; nothing was written")
    name = os.fspath(target_file)
    save_checkpoint(params, name, format=format, framework=weight_map.target)
    log.info("converted %d entries of %s to %s", len(params), contents.path, name)
    return ConversionReport(
        source_file=contents.path,
        target_file=name,
        format=format_of(name, format),
        source=weight_map.source,
        target=weight_map.target,
        rows=rows,
    )
