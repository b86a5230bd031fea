"""Pairing the calls of two dumps so that one extra or missing call shifts nothing else.

When both runs made the same calls (the same names in the same order) calls
pair by name. Otherwise the forward calls are aligned as two sequences
(:class:`difflib.SequenceMatcher`) over what a call is, its kind (prefix and
API) and the shapes of its tensor inputs, not over its number: an extra
``relu`` in one run renames every later ``relu`` there, but leaves their kinds
and shapes in the same order, so the runs still pair call for call around it.
A stretch where the kinds agree and the shapes do not pairs call for call
(those are the differences to report); calls with no partner are rows too.
A backward call pairs with the backward of its forward call's partner; what
remains of the backward calls is aligned the same way.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from tscore.dump_compare.calls import Call, Item

_FORWARD = ("forward",)


@dataclass
class CallPair:
    """Two calls taken to be the same (either may be None: no partner)."""

    target: Call | None
    orig: Call | None
    how: str  # "name", "aligned" (by sequence), "kind" (same API, other shapes), "unpaired"


def _kind(call: Call, api_map: Mapping[str, str]) -> tuple[str, str, str]:
    """Say what a call is, whatever its number: its API, or for a module call its path, not its class.

    A module is known by where it sits: a torch ``Linear`` and its MindSpore twin ``Dense`` at
    ``classifier`` are one layer.
    """
    if call.name.prefix == "Module":
        return "Module", call.name.direction, call.module or ""
    if call.op is not None:  # two frameworks: what the call is, as its plugin names it
        return call.op, call.name.direction, ""
    api = f"{call.name.prefix}.{call.name.api}"
    return api_map.get(api, api), call.name.direction, ""


def _signature(call: Call, api_map: Mapping[str, str]) -> Hashable:
    if call.shapes is not None and not call.inputs:  # values read on demand, and let go
        shapes = call.shapes
    else:
        shapes = tuple(item.shape for item in call.inputs if item.is_tensor)
    return (*_kind(call, api_map), shapes)


def _align(
    target: Sequence[Call], orig: Sequence[Call], api_map: Mapping[str, str], how_equal: str
) -> list[CallPair]:
    """Pair two sequences of calls by alignment over their signatures, then their kinds."""
    if [c.label for c in target] == [c.label for c in orig]:
        return [CallPair(a, b, "name") for a, b in zip(target, orig, strict=True)]
    mine = [_signature(c, api_map) for c in target]
    theirs = [_signature(c, api_map) for c in orig]
    # the common head and tail pair at once: the matcher (quadratic at worst) sees only the middle
    head = 0
    while head < min(len(mine), len(theirs)) and mine[head] == theirs[head]:
        head += 1
    tail = 0
    while tail < min(len(mine), len(theirs)) - head and mine[-1 - tail] == theirs[-1 - tail]:
        tail += 1
    pairs: list[CallPair] = [
        CallPair(a, b, "name" if a.label == b.label else how_equal)
        for a, b in zip(target[:head], orig[:head], strict=True)
    ]
    end_mine, end_theirs = len(target) - tail, len(orig) - tail
    matcher = difflib.SequenceMatcher(None, mine[head:end_mine], theirs[head:end_theirs], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        i1, i2, j1, j2 = i1 + head, i2 + head, j1 + head, j2 + head
        if tag == "equal":
            pairs += [
                CallPair(a, b, "name" if a.label == b.label else how_equal)
                for a, b in zip(target[i1:i2], orig[j1:j2], strict=True)
            ]
            continue
        pairs += _pair_kinds(target[i1:i2], orig[j1:j2], api_map)
    pairs += [
        CallPair(a, b, "name" if a.label == b.label else how_equal)
        for a, b in zip(target[end_mine:], orig[end_theirs:], strict=True)
    ]
    return pairs


def _pair_kinds(target: Sequence[Call], orig: Sequence[Call], api_map: Mapping[str, str]) -> list[CallPair]:
    """Within a stretch whose signatures differ, pair calls of the same kind in order; the rest alone."""
    pairs: list[CallPair] = []
    matcher = difflib.SequenceMatcher(
        None, [_kind(c, api_map) for c in target], [_kind(c, api_map) for c in orig], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs += [CallPair(a, b, "kind") for a, b in zip(target[i1:i2], orig[j1:j2], strict=True)]
        else:
            pairs += [CallPair(a, None, "unpaired") for a in target[i1:i2]]
            pairs += [CallPair(None, b, "unpaired") for b in orig[j1:j2]]
    return pairs


def _call_id(call: Call) -> tuple[str, str, int]:
    return call.name.prefix, call.name.api, call.name.index


def pair_calls(
    target: Sequence[Call], orig: Sequence[Call], api_map: Mapping[str, str] | None = None
) -> list[CallPair]:
    """Pair the calls of two dumps; every call of either side is in exactly one pair.

    :param api_map: ``{"Prefix.api" of one side: "Prefix.api" of the other}`` for runs of two
        frameworks whose APIs are named differently; applied to both sides' names.
    :return: pairs in the target side's order (calls only the orig side has, where they fall).
    """
    mapping = dict(api_map or {})
    forward = _align(
        [c for c in target if c.name.direction in _FORWARD],
        [c for c in orig if c.name.direction in _FORWARD],
        mapping,
        "aligned",
    )
    partner = {
        _call_id(p.target): _call_id(p.orig) for p in forward if p.target is not None and p.orig is not None
    }
    orig_backward = {(_call_id(c), c.name.direction): c for c in orig if c.name.direction not in _FORWARD}
    backward: list[CallPair] = []
    left_target: list[Call] = []
    for call in (c for c in target if c.name.direction not in _FORWARD):
        other = partner.get(_call_id(call), _call_id(call) if call.name.direction != "backward" else None)
        found = orig_backward.pop((other, call.name.direction), None) if other is not None else None
        if found is None:
            left_target.append(call)
        else:
            backward.append(CallPair(call, found, "name" if found.label == call.label else "aligned"))
    if left_target or orig_backward:
        rest = sorted(orig_backward.values(), key=lambda c: c.order)
        backward = _in_order(backward) + _align(left_target, rest, mapping, "aligned")
    return _in_order(_in_order(forward) + _in_order(backward))


def _in_order(pairs: list[CallPair]) -> list[CallPair]:
    """Order pairs by the target call's position; a call only the orig run made stays after its neighbour.

    Pairs come in their sequence's order; an orig-only pair takes the position of the pair
    before it (plus a little), never its own index, which counts the other run's calls.
    """
    keyed = []
    last = -1.0
    for position, pair in enumerate(pairs):
        if pair.target is not None:
            last = float(pair.target.order)
            keyed.append((last, position, pair))
        else:
            keyed.append((last + 0.5, position, pair))
    return [pair for _, _, pair in sorted(keyed, key=lambda k: (k[0], k[1]))]


def pair_items(target: Call | None, orig: Call | None) -> list[tuple[Item | None, Item | None]]:
    """Pair the values of two paired calls by where they sat (input 0, output, kwarg ``bias`` ...)."""
    mine = list(target.items) if target is not None else []
    theirs = {item.slot: item for item in (orig.items if orig is not None else ())}
    pairs: list[tuple[Item | None, Item | None]] = []
    for item in mine:
        pairs.append((item, theirs.pop(item.slot, None)))
    pairs += [(None, item) for item in theirs.values()]
    return pairs
