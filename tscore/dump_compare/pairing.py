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

Calls alike in every way but their values (three ``view`` calls of one shape
in one attention module, for q, k and v) pair by order only where their
values cannot tell them apart: where one run makes them in another order (k
and v before q), they pair by their outputs' statistics
(:func:`_paired_by_values`), so that q never pairs with k.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from tscore.dump_compare.api_names import AMBIGUOUS
from tscore.dump_compare.calls import Call, Item

_FORWARD = ("forward",)


@dataclass
class CallPair:
    """Two calls taken to be the same (either may be None: no partner)."""

    target: Call | None
    orig: Call | None
    # "name", "aligned" (by sequence), "kind" (same API, other shapes), "values", "composite" (one call
    # against the calls the other run makes for it), "unpaired"
    how: str
    parts: tuple[Call, ...] = ()  # a composite's several calls (the side ``parts_of``), see fill_composite
    parts_of: str = ""


# operations that pair as one kind: a linear layer is a matmul by its weight (MindSpore's ``nn.Dense``
# calls ``MatMul`` where torch calls ``linear``); the values then say whether they agree
KINDS_ALIKE = {"matmul": "linear"}


def _kind(call: Call, api_map: Mapping[str, str]) -> tuple[str, str, str]:
    """Say what a call is, whatever its number: its API, or for a module call its path, not its class.

    A module is known by where it sits: a torch ``Linear`` and its MindSpore twin ``Dense`` at
    ``classifier`` are one layer.
    """
    if call.name.prefix == "Module":
        return "Module", call.name.direction, call.module or ""
    if call.op is not None:  # two frameworks: what the call is, as its plugin names it
        return KINDS_ALIKE.get(call.op, call.op), call.name.direction, ""
    api = f"{call.name.prefix}.{call.name.api}"
    full = api_map.get(api, api)
    # whatever its namespace: ``Functional.addmm`` (mindtorch's) is ``Torch.addmm``, as spelled
    bare = full.rpartition(".")[2]
    return (full if bare in AMBIGUOUS else bare), call.name.direction, ""


# APIs whose plain arguments say which operation they are (the axes a transpose swaps, an index):
# ``k.transpose(-1, -2)`` is not ``out.transpose(1, 2)``. Other arguments (an ``eps``, a ``stride``)
# are settings, whose difference is a finding, not another call
STRUCTURAL_APIS = frozenset(
    {"transpose", "permute", "__getitem__", "view", "reshape", "split", "chunk", "unsqueeze", "squeeze"}
    | {"flatten", "expand", "repeat", "narrow", "select", "swapaxes", "movedim", "unbind"}
)


# the longest middle stretch (calls a side) aligned by structural arguments as well
STRUCTURAL_STRETCH = 1500


def _signature(call: Call, api_map: Mapping[str, str], structural: bool = True) -> Hashable:
    """Say what a call is and what it was given: its kind, its tensors' shapes, structural arguments.

    The arguments of :data:`STRUCTURAL_APIS` tell an eager attention's ``k.transpose(-1, -2)`` from
    the ``transpose(1, 2)`` after ``scaled_dot_product_attention``; calls whose arguments differ
    still pair by kind where nothing else pairs (:func:`_pair_kinds`). ``structural=False`` leaves
    them out (:func:`_align`, for long stretches).
    """
    structural = structural and call.name.api in STRUCTURAL_APIS
    if call.shapes is not None and not call.inputs:  # values read on demand, and let go
        shapes = call.shapes
    else:
        shapes = tuple(item.shape for item in call.inputs if item.is_tensor)
    return (*_kind(call, api_map), shapes, call.argument_key() if structural else ())


def _align(
    target: Sequence[Call], orig: Sequence[Call], api_map: Mapping[str, str], how_equal: str
) -> list[CallPair]:
    """Pair two sequences of calls by alignment over their signatures, then their kinds."""
    if [c.label for c in target] == [c.label for c in orig]:
        return [CallPair(a, b, "name") for a, b in zip(target, orig, strict=True)]
    mine = [_signature(c, api_map, False) for c in target]
    theirs = [_signature(c, api_map, False) for c in orig]
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
    if max(end_mine, end_theirs) - head <= STRUCTURAL_STRETCH:
        # a short middle aligns by structural arguments too; on a long one, arguments spelled
        # otherwise in every layer (``view(-1, n)`` against ``view(b, n)``) would leave the matcher
        # only one-call matches, and its time grows with the cube of the calls
        mine = [*mine[:head], *(_signature(c, api_map) for c in target[head:end_mine]), *mine[end_mine:]]
        theirs = [
            *theirs[:head],
            *(_signature(c, api_map) for c in orig[head:end_theirs]),
            *theirs[end_theirs:],
        ]
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


# calls alike that are re-paired by their values: at most this many in one group (their orders are tried)
LARGEST_GROUP = 6
# and only when the values say so clearly: the best order's distance under this share of the given one's
CLEARLY_BETTER = 0.5


Fingerprint = tuple[float, float, float, float]  # mean and norm of the first input, then of the first output


def _fingerprint(call: Call) -> Fingerprint | None:
    """Give the mean and norm of a call's first tensor input and output (None: no statistics)."""
    found: list[float] = []
    for items in (call.inputs, call.outputs):
        first = next((i for i in items if i.is_tensor and i.stats is not None), None)
        if first is None or first.stats is None or first.stats[2] is None or first.stats[3] is None:
            return None
        found += [float(first.stats[2]), float(first.stats[3])]
    return found[0], found[1], found[2], found[3]


def _apart(mean_a: float, norm_a: float, mean_b: float, norm_b: float) -> float:
    """Say how far two tensors' means and norms lie apart, relative to the larger norm."""
    return (abs(mean_a - mean_b) + abs(norm_a - norm_b)) / max(abs(norm_a), abs(norm_b), 1e-12)


def _distance(a: Fingerprint, b: Fingerprint) -> float:
    """Say how far two calls' input and output statistics lie apart, each relative to its norm."""
    return _apart(a[0], a[1], b[0], b[1]) + _apart(a[2], a[3], b[2], b[3])


def _paired_by_values(pairs: list[CallPair], api_map: Mapping[str, str]) -> list[CallPair]:
    """Re-pair calls alike (one module, one kind, the same shapes) that two frameworks make in other orders.

    Only between two frameworks (calls named by neutral operations: there two calls of one name are
    alike by chance), inside a known module. A group holds such calls of both runs, paired or left
    alone by the alignment (HF's ``x[..., :h]`` then ``x[..., h:]`` against a port's ``-x[..., h:]``
    first). Where a call's closest twin is not its partner, or calls are alone, every way of pairing
    the group is tried (up to :data:`LARGEST_GROUP` calls a side); the one whose inputs' and outputs'
    statistics lie closest is taken when, per pair, it is clearly closer than the pairs given, or
    pairs more calls no less closely. Pairs keep their places in the target's order.
    """
    groups: dict[Hashable, tuple[list[int], list[int]]] = {}
    for index, pair in enumerate(pairs):
        calls = [call for call in (pair.target, pair.orig) if call is not None]
        if any(call.op is None for call in calls) or not calls[0].module:
            continue  # one framework's run (where a name is the call) or no module to stay inside
        if pair.target is not None and pair.orig is not None:  # a pair joins its group whole
            key: Hashable = (
                pair.target.module,
                _signature(pair.target, api_map),
                _signature(pair.orig, api_map),
            )
            members = groups.setdefault(key, ([], []))
            members[0].append(index)
            members[1].append(index)
        else:
            signature = _signature(calls[0], api_map)
            key = (calls[0].module, signature, signature)
            groups.setdefault(key, ([], []))[0 if pair.target is not None else 1].append(index)
    result: list[list[CallPair]] = [[pair] for pair in pairs]  # what stands at each place
    for mine, theirs in groups.values():
        chosen = _closest_pairing(pairs, mine, theirs)
        if chosen is None:
            continue
        targets = [pairs[i].target for i in mine]
        origs = [pairs[j].orig for j in theirs]
        for i in {*mine, *theirs}:
            result[i] = []
        for k, target in enumerate(targets):
            j = chosen.get(k)
            result[mine[k]] = [
                CallPair(target, origs[j], "values") if j is not None else CallPair(target, None, "unpaired")
            ]
        taken = set(chosen.values())
        for j, orig in enumerate(origs):
            if j not in taken:  # alone now: where it stood
                result[theirs[j]].append(CallPair(None, orig, "unpaired"))
    return [pair for place in result for pair in place]


def _closest_pairing(pairs: Sequence[CallPair], mine: list[int], theirs: list[int]) -> dict[int, int] | None:
    """Say how a group's target calls (``pairs[mine]``) pair with its orig calls by their statistics.

    :return: ``{target k: orig j}``, or None when the pairs given stand.
    """
    if not mine or not theirs or max(len(mine), len(theirs)) > LARGEST_GROUP:
        return None
    given = {k: theirs.index(i) for k, i in enumerate(mine) if i in theirs}  # pairs of this group
    alone = len(given) < len(mine) or len(given) < len(theirs)
    if len(mine) + len(theirs) < 3 and not given and alone:
        return None  # one call a side, set apart by the alignment: nothing to choose between
    targets = [_fingerprint(pairs[i].target) for i in mine]  # type: ignore[arg-type]
    origs = [_fingerprint(pairs[j].orig) for j in theirs]  # type: ignore[arg-type]
    distances = [[_distance(t, o) if t and o else math.inf for o in origs] for t in targets]
    if any(math.isinf(d) for row in distances for d in row):
        return None  # a call without statistics: order stays
    if not alone and all(row[given[k]] <= min(row) for k, row in enumerate(distances)):
        return None  # every call is closest to its own partner: the usual case, settled at once
    if len(mine) <= len(theirs):
        ways = [dict(enumerate(order)) for order in itertools.permutations(range(len(theirs)), len(mine))]
    else:
        ways = [
            {k: j for j, k in enumerate(order)}
            for order in itertools.permutations(range(len(mine)), len(theirs))
        ]

    def mean(way: Mapping[int, int]) -> float:
        return sum(distances[k][j] for k, j in way.items()) / max(len(way), 1)

    best = min(ways, key=mean)
    if not given:
        return best if alone else None
    if mean(best) < CLEARLY_BETTER * mean(given) and not math.isclose(mean(best), mean(given)):
        return best
    if len(best) > len(given) and mean(best) <= mean(given):
        return best  # as close, and fewer calls left alone
    return None


# calls that only move, copy or drop their input (in eval mode): never one side of a composite
PASSING_ON = frozenset(
    {"dropout", "contiguous", "cast", "to", "float", "type", "reshape", "view", "flatten", "transpose"}
    | {"permute", "clone", "detach", "expand", "squeeze", "unsqueeze", "getitem", "identity"}
)
# a composite's calls, at most (HF's gelu_new makes 8, an eager attention against sdpa 6)
LONGEST_COMPOSITE = 16


def _composites(pairs: list[CallPair]) -> list[CallPair]:
    """Pair one call of a run with the several calls the other run makes for it, in one module.

    HF's ``NewGELUActivation`` computes ``0.5 * x * (1 + tanh(...))`` in eight calls where a port
    calls ``gelu`` once; an eager attention makes ``matmul``, ``softmax``, ``matmul`` where another
    run calls ``scaled_dot_product_attention``. Where, between two paired calls, one run's calls
    alone in a module are one call and the other run's are several, the one is compared with the
    several as one: the first tensor its first call takes, what its last call returns. The several
    stay rows of their own (unpaired, just before), and their backward calls pair with nothing.
    """
    out: list[CallPair] = []
    gap: list[CallPair] = []
    for pair in [*pairs, None]:
        if pair is not None and (pair.target is None or pair.orig is None):
            gap.append(pair)
            continue
        out += _fold_gap(gap) if gap else []
        gap = []
        if pair is not None:
            out.append(pair)
    return out


def _fold_gap(gap: list[CallPair]) -> list[CallPair]:
    """Fold the calls alone in one stretch of pairs, module by module (:func:`_composites`)."""
    modules: dict[str, tuple[list[Call], list[Call]]] = {}
    for pair in gap:
        call = pair.target or pair.orig
        assert call is not None
        if call.module and call.name.prefix != "Module":
            modules.setdefault(call.module, ([], []))[0 if pair.target is not None else 1].append(call)
    folded: list[CallPair] = []
    singles: set[int] = set()
    for mine, theirs in modules.values():
        counts = sorted((len(mine), len(theirs)))
        if counts[0] != 1 or not 2 <= counts[1] <= LONGEST_COMPOSITE:
            continue
        single, chain = (mine[0], theirs) if len(mine) == 1 else (theirs[0], mine)
        if (single.op or single.name.api).strip("_").lower() in PASSING_ON:
            continue  # a call that only moves or copies its input stands for no computation
        end = chain[-1]
        whole = Call(name=end.name, order=end.order, module=end.module, stack=end.stack, op=single.op)
        whole.label = f"{chain[0].label}..{end.label} ({len(chain)} calls)"
        singles.add(id(single))
        pair = (
            CallPair(single, whole, "composite") if chain is theirs else CallPair(whole, single, "composite")
        )
        pair.parts, pair.parts_of = tuple(chain), ("orig" if chain is theirs else "target")
        folded.append(pair)
    # the several stay rows of their own, before the pair that compares them as one
    return [p for p in gap if id(p.target or p.orig) not in singles] + folded


def fill_composite(pair: CallPair) -> CallPair:
    """Give a composite pair's several calls (their values loaded) the values they are compared by.

    Those are the tensor among the several's inputs alike in shape and closest in statistics to the
    single call's first (an eager attention's first call takes k; sdpa's first tensor is q), and the
    last one's output. When these cannot hold the same numbers as the single call's, the single
    call is alone (``unpaired``).
    """
    if pair.how != "composite" or not pair.parts:
        return pair
    whole, single = (pair.target, pair.orig) if pair.parts_of == "target" else (pair.orig, pair.target)
    assert whole is not None and single is not None
    given = next((i for i in single.inputs if i.is_tensor and i.shape is not None), None)
    made = [o for o in single.outputs if o.is_tensor and o.shape is not None]
    last = [o for o in pair.parts[-1].outputs if o.is_tensor and o.shape is not None]
    alike = [
        i
        for c in pair.parts
        for i in c.inputs
        if given is not None and i.is_tensor and i.shape is not None and _may_agree(given, i)
    ]
    if given is None or len(made) != 1 or len(last) != 1 or not _may_agree(made[0], last[0]) or not alike:
        return (
            CallPair(single, None, "unpaired")
            if single is pair.target
            else CallPair(None, single, "unpaired")
        )
    first = min(alike, key=lambda i: _item_distance(given, i))
    whole.inputs = [dataclasses.replace(first, path=given.path)]
    whole.outputs = [dataclasses.replace(last[0], path=made[0].path)]
    return pair


def _item_distance(a: Item, b: Item) -> float:
    """Say how far two tensors' means and norms lie apart (:func:`_apart`; inf: unknown)."""
    if a.stats is None or b.stats is None or None in (a.stats[2], a.stats[3], b.stats[2], b.stats[3]):
        return math.inf
    return _apart(*(float(x) for x in (a.stats[2], a.stats[3], b.stats[2], b.stats[3])))  # type: ignore[arg-type]


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
    forward = _composites(
        _paired_by_values(
            _align(
                [c for c in target if c.name.direction in _FORWARD],
                [c for c in orig if c.name.direction in _FORWARD],
                mapping,
                "aligned",
            ),
            mapping,
        )
    )
    partner = {
        _call_id(p.target): _call_id(p.orig)
        for p in forward
        if p.target is not None and p.orig is not None and p.how != "composite"
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
    """Pair the values of two paired calls by where they sat (input 0, output, kwarg ``bias`` ...).

    Calls of two frameworks (named by neutral operations) have gradients their own way: one lists a
    gradient for every input, ``None`` where there is none (a mask's), the other only for inputs that
    take one, or a fused ``addmm`` for the ``matmul`` of a port. There a slot pairs only values that
    can hold the same numbers (tensors whose shapes agree, leading axes merged or not), and what is
    left pairs by shape in order.
    """
    mine = list(target.items) if target is not None else []
    mine_all = list(mine)
    theirs = {item.slot: item for item in (orig.items if orig is not None else ())}
    neutral = target is not None and orig is not None and target.op is not None and orig.op is not None
    doubtful = neutral and _doubtful_gradients(target, orig)
    pairs: list[tuple[Item | None, Item | None]] = []
    through: list[Item] = []  # gradients a call only passed on: compared with nothing
    if neutral:
        assert target is not None and orig is not None
        through = [v for v in mine if v.slot in _passed_through(target)]
        mine = [v for v in mine if v.slot not in _passed_through(target)]
        for slot in _passed_through(orig):
            through.append(theirs.pop(slot))
    for value in mine:
        found = theirs.get(value.slot)
        if found is not None and doubtful and value.role == "output":
            found = None  # which gradient is which cannot be told: none is compared
        if found is not None and (not neutral or _may_agree(value, found)):
            del theirs[value.slot]
            pairs.append((value, found))
        else:
            pairs.append((value, None))
    if neutral:
        for index, (alone, partner) in enumerate(pairs):
            if doubtful and alone is not None and alone.role == "output":
                continue
            if partner is None and alone is not None and alone.is_tensor and alone.shape is not None:
                match = next(
                    (slot for slot, o in theirs.items() if o.role == alone.role and _may_agree(alone, o)),
                    None,
                )
                if match is not None:
                    pairs[index] = (alone, theirs.pop(match))
        for index, (alone, partner) in enumerate(
            pairs
        ):  # what is left at one slot still pairs: shapes differ
            if partner is None and alone is not None and alone.slot in theirs:
                # a tensor never pairs with a plain value: a gradient one run lists as None is not a twin
                if alone.is_tensor == theirs[alone.slot].is_tensor and not (
                    doubtful and alone.role == "output"
                ):
                    pairs[index] = (alone, theirs.pop(alone.slot))
    pairs += [(None, item) for item in theirs.values()]
    pairs += [(item, None) if any(item is m for m in mine_all) else (None, item) for item in through]
    return pairs


# operations whose gradient for an input is never the gradient they receive (it is multiplied by a weight)
_TRANSFORMING = frozenset({"linear", "matmul", "conv1d", "conv2d", "conv3d", "bmm", "addmm", "baddbmm"})


def _passed_through(call: Call) -> set[tuple[str, str]]:
    """Name the gradients a matrix product's backward call records that are only the one it received.

    torch's ``linear`` of a 3-d input ends in a view: its backward call records the gradient reaching
    that view, reshaped (the same numbers as its input), not the gradient for the linear's input.
    Such a value is not the twin of the other framework's input gradient.
    """
    if call.name.direction == "forward" or (call.op or "").removesuffix(" (folded)") not in _TRANSFORMING:
        return set()
    received = [(i.stats, _size(i)) for i in call.inputs if i.is_tensor and i.stats is not None]
    return {
        o.slot
        for o in call.outputs
        if o.is_tensor and o.stats is not None and (o.stats, _size(o)) in received
    }


def _size(item: Item) -> int | None:
    return math.prod(item.shape) if item.shape is not None else None


def _doubtful_gradients(target: Call | None, orig: Call | None) -> bool:
    """Say whether two backward calls' gradients cannot be told apart by shape.

    A composite operation's backward may record the gradient that reaches its last inner step
    (torch's 4-d ``matmul`` ends in a view: one gradient) where the other framework records one per
    input (MindSpore: two, of the same shape): with as many of one shape on a side, and counts that
    differ, nothing says which is which.
    """
    if target is None or orig is None or target.name.direction == "forward":
        return False
    shapes = [
        [o.shape for o in call.outputs if o.is_tensor and o.shape is not None] for call in (target, orig)
    ]
    if len(shapes[0]) == len(shapes[1]):
        return False
    return any(len(side) != len(set(side)) for side in shapes)


def _may_agree(a: Item, b: Item) -> bool:
    """Say whether two values could hold the same numbers: plain values, or tensors of alike shapes."""
    if not a.is_tensor or not b.is_tensor:
        return a.is_tensor == b.is_tensor
    if a.shape is None or b.shape is None:
        return a.shape is None and b.shape is None
    if a.shape == b.shape:
        return True
    return (
        bool(a.shape)
        and bool(b.shape)
        and a.shape[-1] == b.shape[-1]
        and math.prod(a.shape) == math.prod(b.shape)
    )
