"""Finding the first layer that computes differently from its twin.

Both networks ran once with module hooks (:mod:`tscore.netdiff.recording`),
so every layer call's inputs and output are known on each side. For every
paired call, in the order the calls returned:

* the outputs are compared with the compare engine's metrics;
* when they disagree, the target layer is *replayed*: run again on the
  orig layer's recorded inputs. If it still disagrees with the orig
  output, the layer has an error of its own (``diverges``); if it now agrees,
  its error came in through its inputs (``inherits``);
* a layer holding a diverging layer ``contains`` it and is not replayed; a
  layer holding several whose own inputs agree and output disagrees, while
  none of its layers diverges, is replayed whole: the difference is in its
  own code between its layers, and the report says between which.

Only leaves and the one container that needs it are replayed, so the cost
stays near one more forward of the target network.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tscore.compare.engine import compare_arrays
from tscore.compare.pairs import PairResult
from tscore.contract.kinds import kind_family
from tscore.contract.layers import LayerInfo
from tscore.dtypes import neutral_dtype
from tscore.fill_values import both_filled
from tscore.layouts import reordered
from tscore.netdiff.call_layouts import AS_GIVEN, CallLayouts, LayoutBook
from tscore.netdiff.call_roles import RolePairs, opaque_outputs, pair_roles
from tscore.netdiff.pairing import LayerPair
from tscore.netdiff.recording import CallRecorder, LayerCall, exception_line, fresh_copy
from tscore.netdiff.report import Divergence, Labels, LayerRow, LayerStatus, SettingDiff
from tscore.plugins import hook
from tscore.structures import pair_leaves, replace_arrays

log = logging.getLogger(__name__)

Tolerances = tuple[float, float, bool]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-12)
    return bool(a == b)


def setting_diffs(pair: LayerPair) -> list[SettingDiff]:
    """List the settings both layers state that differ, for two layers of one family (any ranks).

    ``"same"`` padding against explicit pads is left to the values: it depends on the input size.
    """
    if kind_family(pair.orig.kind) != kind_family(pair.target.kind):
        return []
    orig_config, target_config = pair.orig.config, pair.target.config
    diffs = []
    for name, value in orig_config.items():
        if name not in target_config:
            continue
        other = target_config[name]
        if name == "padding" and "same" in (value, other) and value != other:
            continue
        if not _same(value, other):
            diffs.append(SettingDiff(name=name, orig=value, target=other))
    return diffs


def _worst(rows: list[PairResult]) -> PairResult | None:
    if not rows:
        return None
    failing = [row for row in rows if not row.passed]
    pool = failing or rows
    return max(pool, key=lambda row: -1.0 if row.max_abs_diff is None else row.max_abs_diff)


def _largest(rows: list[PairResult]) -> float | None:
    if any(row.max_abs_diff is None for row in rows):
        return None
    return max((row.max_abs_diff or 0.0 for row in rows), default=0.0)


def _compare_outputs(
    orig_out: Any, target_out: Any, tol: Tolerances, labels: Labels, layouts: CallLayouts = AS_GIVEN
) -> tuple[list[PairResult], list[str]]:
    """Compare output leaves paired by path (by order when the paths differ); note leaves on one side only.

    Each side's leaves are read in the neutral layout first (``layouts``).
    """
    rtol, atol, equal_nan = tol
    pairs, orig_only, target_only = pair_leaves(orig_out, target_out)
    notes = [f"{labels[0]} output {name} has no {labels[1]} counterpart" for name, _ in orig_only]
    notes += [f"{labels[1]} output {name} has no {labels[0]} counterpart" for name, _ in target_only]
    rows = [
        compare_arrays(
            layouts.read(x, 0), layouts.read(y, 1), rtol, atol, equal_nan, orig_name=a, target_name=b
        )
        for a, x, b, y in pairs
        if x.dtype.kind in "biufV" and y.dtype.kind in "biufV"
    ]
    return rows, notes


def _reordered_outputs(orig_out: Any, target_out: Any, layouts: CallLayouts) -> str:
    """Say which paired outputs hold the same axes in another order once read (``""`` when none do).

    Such outputs cannot be compared value by value: no declared layout says how to read them.
    """
    pairs, _, _ = pair_leaves(orig_out, target_out)
    for name, x, _, y in pairs:
        a, b = layouts.read(x, 0), layouts.read(y, 1)
        if reordered(a.shape, b.shape):
            return (
                f"cannot tell whether it differs: its output {name} is {a.shape} on one side, {b.shape} on "
                "the other, the same axes in another order, and no declared layout says how to read them"
            )
    return ""


def _input_error(
    roles: RolePairs, tol: Tolerances, layouts: CallLayouts = AS_GIVEN
) -> tuple[bool, float | None]:
    """Whether a layer's inputs agree within tolerance, and their largest |difference|.

    Only these two numbers are reported for inputs, so they are computed
    directly instead of through the full metrics of the compare engine.
    Only the tensors ``roles`` paired are compared; ``(False, None)`` when none
    of one call's lines up with one of the other's, or a pair's sizes differ.
    """
    left, right = roles.arrays()
    if not left and (roles.orig or roles.target):
        return False, None
    rtol, atol, equal_nan = tol
    agree, largest = True, 0.0
    for raw_x, raw_y in zip(left, right, strict=True):
        x, y = layouts.read(raw_x, 0), layouts.read(raw_y, 1)
        if x.size != y.size:
            return False, None
        if x.dtype.kind not in "biufV" or y.dtype.kind not in "biufV":
            continue
        a = np.asarray(x, dtype=np.float64).reshape(-1)
        b = np.asarray(y, dtype=np.float64).reshape(-1)
        agree = agree and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))
        # a mask's fills on both sides (-3.4028235e38 against -3.40282e38) are the same mask, not 3.45e32
        finite = (
            np.isfinite(a)
            & np.isfinite(b)
            & ~both_filled(a, b, neutral_dtype(str(x.dtype)), neutral_dtype(str(y.dtype)))
        )
        if finite.any():
            largest = max(largest, float(np.max(np.abs(a[finite] - b[finite]))))
    return agree, largest


class ReplayError(Exception):
    """The target layer cannot be run on the orig layer's inputs."""


def replay(
    target_layer: object,
    orig_call: LayerCall,
    target_call: LayerCall,
    labels: Labels,
    layouts: CallLayouts = AS_GIVEN,
    roles: RolePairs | None = None,
) -> object:
    """Run the target layer on the orig call's inputs in its layout, cast to its call's dtypes and shapes.

    The inputs are moved into the target's layout (``layouts``); one of another shape that holds as
    many values is reshaped only when no layout moves its axes (a ``[N, 1, C]`` against ``[N, C]``).
    """
    roles = roles or pair_roles(orig_call, target_call)
    structure = fresh_copy(
        (target_call.args, target_call.kwargs)
    )  # a replay never changes what the run holds
    arrays = [array for _, array in roles.target]  # what only the target passes stays its own
    if roles.target and not roles.pairs:
        raise ReplayError(f"no tensor {labels[0]} passes lines up with one {labels[1]} passes")
    for i, j in roles.pairs:
        source, like = roles.orig[i][1], roles.target[j][1]
        role = roles.target[j][0]
        source = layouts.into_target(source)
        if source.size != like.size or reordered(source.shape, like.shape):
            raise ReplayError(
                f"input {role} has shape {source.shape} in {labels[0]}, {like.shape} in {labels[1]}"
            )
        arrays[j] = np.asarray(source.reshape(like.shape).astype(like.dtype, copy=False), order="C")
    args, kwargs = replace_arrays(structure, arrays)
    try:
        return hook().ts_run_forward(model=target_layer, args=args, kwargs=kwargs, train=False)
    except Exception as exc:
        raise ReplayError(exception_line(exc)) from exc


@dataclass
class Location:
    """The rows of every paired call, the first divergence, and layers that found no twin."""

    rows: list[LayerRow] = field(default_factory=list)
    first: Divergence | None = None
    note: str = ""
    unpaired: dict[str, list[str]] = field(default_factory=dict)


def _where(call: LayerCall, rows_by_start: dict[int, tuple[LayerRow, bool]], calls: list[LayerCall]) -> str:
    """For a container whose own code diverges: between which of its layers the difference appears."""
    previous = None
    for start in call.children:
        entry = rows_by_start.get(start)
        if entry is None:
            continue
        _, inputs_agree = entry
        if not inputs_agree:
            name = calls[start].path or "(root)"
            return f"before {name}" + (f", after {previous}" if previous else "")
        previous = calls[start].path or "(root)"
    return f"after its last layer {previous}" if previous else "with no layer of its own called"


@dataclass
class _Compared:
    """A paired call whose outputs were compared, waiting for its verdict."""

    call: LayerCall
    target_call: LayerCall
    pair: LayerPair
    row: LayerRow
    outputs_agree: bool
    inputs_agree: bool
    has_paired_children: bool
    unpaired_inside: list[str] = field(default_factory=list)  # layers inside it that found no twin
    uncompared_inside: list[str] = field(default_factory=list)  # layers inside it whose layouts are unknown
    layouts: CallLayouts = AS_GIVEN
    roles: RolePairs | None = None
    replayed: object = None
    replay_error: str = ""


def _first_few(names: Sequence[str], most: int) -> str:
    """Join the first ``most`` names with commas, ``...`` when there are more."""
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def _unlocalised(entry: _Compared) -> str:
    """Why a container's difference cannot be placed in its own code: layers inside it found no twin."""
    missing = entry.unpaired_inside
    if not missing:
        return ""
    return (
        f"{len(missing)} layer(s) inside it found no twin ({_first_few(missing, 5)}), so the difference "
        "may be in one of them; pass weight_map= (get_weight_map with custom_name_func=) or give the "
        "layers the same names, so that they pair"
    )


def _unpaired_inside(calls: Sequence[LayerCall], paired: set[str]) -> dict[int, list[str]]:
    """For each orig call, the paths of the layers called inside it that found no twin (outermost first)."""
    inside: dict[int, list[str]] = {}
    for call in calls:
        if call.path not in paired:
            _mark_ancestors(call, calls, inside)
    return inside


def _replay_into(entry: _Compared, target_objects: dict[str, object], labels: Labels) -> None:
    try:
        target = target_objects[entry.pair.target.path]
        entry.replayed = replay(target, entry.call, entry.target_call, labels, entry.layouts, entry.roles)
    except ReplayError as exc:
        entry.replay_error = str(exc)


def _mark_ancestors(call: LayerCall, calls: Sequence[LayerCall], inside: dict[int, list[str]]) -> None:
    """Note ``call``'s path in the list of every call that holds it."""
    parent = call.parent
    while parent is not None:
        found = inside.setdefault(parent, [])
        if call.path not in found:
            found.append(call.path)
        parent = calls[parent].parent


@dataclass
class _Context:
    """What comparing one paired call needs besides the call."""

    orig_run: CallRecorder
    by_orig: dict[str, LayerPair]
    target_calls: dict[tuple[str, int], LayerCall]
    tol: Tolerances
    labels: Labels
    layouts: LayoutBook | None
    unpaired_inside: dict[int, list[str]]
    uncompared_inside: dict[int, list[str]] = field(default_factory=dict)


def _compare_call(call: LayerCall, pair: LayerPair, context: _Context) -> tuple[LayerRow, _Compared | None]:
    """Compare one paired call: its row, and the entry to judge (None when there is nothing to judge)."""
    labels = context.labels
    base: dict[str, Any] = {
        "orig_path": call.path,
        "target_path": pair.target.path,
        "orig_type": call.type_name,
        "target_type": pair.target.type_name,
        "call": call.index,
        "paired_by": pair.paired_by,
        "settings": setting_diffs(pair),
    }
    target_call = context.target_calls.get((pair.target.path, call.index))
    if target_call is None or target_call.end is None:
        note = f"the {labels[1]} layer made no such call"
        return LayerRow(status=LayerStatus.NOT_CALLED, note=note, **base), None
    roles = pair_roles(call, target_call)
    layouts = AS_GIVEN
    if context.layouts is not None:
        layouts = context.layouts.of((pair.orig.path, pair.target.path), call, target_call, roles)
    if layouts.unknown:
        _mark_ancestors(call, context.orig_run.calls, context.uncompared_inside)
        return LayerRow(status=LayerStatus.UNKNOWN, note=layouts.unknown, **base), None
    out_rows, notes = _compare_outputs(call.output, target_call.output, context.tol, labels, layouts)
    kinds = pair.orig.kind, pair.target.kind
    if kinds[0] and kinds[1] and kinds[0] != kinds[1]:
        notes.insert(0, f"paired with a layer of another kind ({kinds[0]} / {kinds[1]}), by {pair.paired_by}")
    notes += [layouts.note()] if layouts.note() else []
    notes += [roles.one_sided(labels)] if roles.one_sided(labels) else []
    unread = opaque_outputs(call.output) + opaque_outputs(target_call.output)
    notes += [f"not compared: {', '.join(sorted(set(unread))[:4])}"] if unread else []
    inputs_agree, inherited = _input_error(roles, context.tol, layouts)
    if inherited is None:
        notes.append("the layers' inputs do not line up (no tensor of one lines up with one of the other)")
    outputs_agree = all(r.passed for r in out_rows)
    unreadable = _reordered_outputs(call.output, target_call.output, layouts)
    if unreadable or (not outputs_agree and layouts.loses_order(call, target_call)):
        _mark_ancestors(call, context.orig_run.calls, context.uncompared_inside)
        notes.append(unreadable or LOST_ORDER)
        return LayerRow(
            status=LayerStatus.UNKNOWN, inherited_error=inherited, note="; ".join(notes), **base
        ), None
    row = LayerRow(
        status=LayerStatus.OK,
        output=_worst(out_rows),
        inherited_error=inherited,
        note="; ".join(notes),
        **base,
    )
    calls, by_orig = context.orig_run.calls, context.by_orig
    entry = _Compared(
        call,
        target_call,
        pair,
        row,
        outputs_agree=outputs_agree,
        inputs_agree=inputs_agree,
        has_paired_children=any(by_orig.get(calls[child].path) for child in call.children),
        unpaired_inside=context.unpaired_inside.get(call.start, []),
        uncompared_inside=context.uncompared_inside.get(call.start, []),
        layouts=layouts,
        roles=roles,
    )
    return row, entry


LOST_ORDER = (
    "cannot tell whether it differs: it merges axes that the two sides order differently (a channels-last "
    "tensor flattened against a channels-first one), so its outputs hold the same values in other places"
)


def locate(
    orig_run: CallRecorder,
    target_run: CallRecorder,
    pairs: Sequence[LayerPair],
    target_layers: Sequence[LayerInfo],
    tol: Tolerances,
    labels: Labels = ("orig", "target"),
    layouts: LayoutBook | None = None,
) -> Location:
    """Compare every paired layer call and name the first that diverges.

    The leaves whose outputs disagree are replayed first, all of them, and
    their outputs read afterwards, so an asynchronous framework waits once.
    Each call is read in the layouts ``layouts`` finds for it (as given without it).
    """
    by_orig = {pair.orig.path: pair for pair in pairs}
    target_objects = {layer.path: layer.layer for layer in target_layers}
    location = Location()
    paired_target = {pair.target.path for pair in pairs}
    location.unpaired = {
        "orig": sorted({c.path for c in orig_run.calls if c.path not in by_orig}),
        "target": sorted({c.path for c in target_run.calls if c.path not in paired_target}),
    }
    context = _Context(
        orig_run=orig_run,
        by_orig=by_orig,
        target_calls={(call.path, call.index): call for call in target_run.calls},
        tol=tol,
        labels=labels,
        layouts=layouts,
        unpaired_inside=_unpaired_inside(orig_run.calls, set(by_orig)),
    )
    entries: list[_Compared] = []
    for call in sorted((c for c in orig_run.calls if c.end is not None), key=lambda c: c.end or 0):
        pair = by_orig.get(call.path)
        if pair is None:
            continue
        row, entry = _compare_call(call, pair, context)
        location.rows.append(row)
        if entry is None:
            continue
        entries.append(entry)
        if not entry.outputs_agree and not entry.has_paired_children:
            _replay_into(entry, target_objects, labels)
    _judge(entries, orig_run.calls, target_objects, tol, location, labels)
    unknown = [r for r in location.rows if r.status is LayerStatus.UNKNOWN]
    if location.first is None and unknown:
        location.note = (
            f"cannot tell which layer differs: {len(unknown)} layer call(s) could not be compared (the "
            f"first: {unknown[0].label()}: {unknown[0].note}); see the layers marked unknown"
        )
    elif location.first is None and any(r.status is not LayerStatus.OK for r in location.rows):
        location.note = "no paired layer diverges on its own; see the layers marked unknown or not_called"
    return location


def _judge(
    entries: list[_Compared],
    calls: list[LayerCall],
    target_objects: dict[str, object],
    tol: Tolerances,
    location: Location,
    labels: Labels,
) -> None:
    """Give every compared call its status, in the order the calls returned."""
    done = {entry.call.start: (entry.row, entry.inputs_agree) for entry in entries}
    diverging_inside: set[int] = set()
    unknown_inside: dict[int, list[str]] = {}  # calls holding one that turned out unknown on replay
    for entry in entries:
        row, call = entry.row, entry.call
        if entry.outputs_agree:
            continue
        if call.start in diverging_inside:
            row.status = LayerStatus.CONTAINS
            continue
        if entry.has_paired_children and not entry.inputs_agree:
            row.status = LayerStatus.INHERITS
            row.note = "; ".join(filter(None, [row.note, "not replayed: its inputs differ already"]))
            continue
        uncompared = entry.uncompared_inside + unknown_inside.get(call.start, [])
        if entry.has_paired_children and uncompared:
            row.status = LayerStatus.UNKNOWN
            _mark_ancestors(call, calls, unknown_inside)
            names = _first_few(uncompared, 5)
            note = (
                f"cannot tell whether it differs on its own: layers inside it could not be compared ({names})"
            )
            row.note = "; ".join(filter(None, [row.note, note]))
            continue
        if entry.has_paired_children:  # a container whose layers all agree on their own: replay it whole
            _replay_into(entry, target_objects, labels)
        if entry.replay_error:
            row.status = LayerStatus.DIVERGES if entry.inputs_agree else LayerStatus.UNKNOWN
            row.note = "; ".join(filter(None, [row.note, f"not replayed: {entry.replay_error}"]))
            if entry.inputs_agree:
                row.own_error = row.output.max_abs_diff if row.output else None
        else:
            unreadable = _reordered_outputs(call.output, entry.replayed, entry.layouts)
            if unreadable:
                row.status = LayerStatus.UNKNOWN
                row.note = "; ".join(filter(None, [row.note, f"replayed, but {unreadable}"]))
                _mark_ancestors(call, calls, unknown_inside)
                continue
            own_rows, _ = _compare_outputs(call.output, entry.replayed, tol, labels, entry.layouts)
            row.own = _worst(own_rows)
            row.own_error = _largest(own_rows)
            own_fails = not own_rows or not all(r.passed for r in own_rows)
            row.status = LayerStatus.DIVERGES if own_fails else LayerStatus.INHERITS
        if row.status is LayerStatus.DIVERGES:
            parent = call.parent
            while parent is not None:
                diverging_inside.add(parent)
                parent = calls[parent].parent
            unlocalised = _unlocalised(entry) if entry.has_paired_children else ""
            if unlocalised:  # never "its own code" while a layer inside it is not compared
                row.note = "; ".join(filter(None, [row.note, unlocalised]))
            if location.first is None:
                location.first = _divergence(row, call, done, calls, entry.has_paired_children)
                earlier = _unknown_before(row, location.rows)
                if unlocalised or earlier:
                    location.first.where = location.first.where if not unlocalised else ""
                    location.first.unlocalised = "; ".join(filter(None, [unlocalised, earlier]))


def _unknown_before(row: LayerRow, rows: list[LayerRow]) -> str:
    """Say which layer calls that returned before ``row``'s could not be compared (``""`` when none)."""
    position = next(index for index, other in enumerate(rows) if other is row)
    unknown = [other.label() for other in rows[:position] if other.status is LayerStatus.UNKNOWN]
    if not unknown:
        return ""
    return (
        f"{len(unknown)} earlier layer call(s) could not be compared ({_first_few(unknown, 3)}), so the "
        "first difference may be among them"
    )


def _divergence(
    row: LayerRow,
    call: LayerCall,
    done: dict[int, tuple[LayerRow, bool]],
    calls: list[LayerCall],
    container: bool,
) -> Divergence:
    shown = row.own or row.output
    shapes = ""
    if shown is not None and shown.orig_shape != shown.target_shape:
        shapes = f"{shown.orig_shape} vs {shown.target_shape}"
    shared = set(Divergence.model_fields) & set(LayerRow.model_fields)
    return Divergence(
        **row.model_dump(include=shared - {"settings"}),
        settings=row.settings,
        where=_where(call, done, calls) if container else "",
        shapes=shapes,
    )
