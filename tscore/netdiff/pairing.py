"""Pairing each layer of one network with its twin in the other (any two backends).

1. Layers that own parameters pair through the weight map: the target
   names of an orig layer's parameters lead to the target layer that holds
   them (the one at the same path, or named like the orig layer, or else the
   deepest layer holding them all). When the map was aligned by structure
   (names that differ), the pair says so: ``structure`` or ``ambiguous``.
2. A container pairs with the target container whose paired weight-owning
   layers are exactly the twins of those inside it (``features`` with
   ``layers`` when every convolution inside one has its twin inside the
   other); ``ambiguous`` when one of those pairs was.
3. Layers at the same path pair (the usual case: a migration keeps the
   attribute names).
4. The rest pair by order within their already paired parents, matching
   kinds of one family first (``relu`` with ``relu``, ``batchnorm2d`` with
   ``batchnorm``), then leftovers one for one when as many remain on each
   side. The order is the order of the calls when the networks ran
   (:func:`in_call_order`), so a framework that lists a layer's attributes
   in another order (sorted, or re-sorted after an update) pairs the same.
5. Leaves still free where the two trees nest differently (a ``ReLU6``
   inside a ``ConvBNReLU`` block on one side, in a flat ``SequentialCell`` on
   the other) pair the same way between the leaves already paired.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from tscore.checkpoint.layer_alignment import AMBIGUOUS, STRUCTURE, longest_increasing
from tscore.checkpoint.weight_map import WeightMap
from tscore.contract.kinds import kind_family, kind_role
from tscore.contract.layers import LayerInfo


@dataclass(frozen=True)
class LayerPair:
    """An orig layer, its target twin, and what paired them.

    ``paired_by`` is ``weights`` (through the weight map), ``structure`` or
    ``ambiguous`` (through a map aligned by structure), ``contents`` (a
    container holding the twins of its layers), ``path``, ``order`` or ``root``.

    Pairs are found by :func:`pair_layers`.
    """

    orig: LayerInfo
    target: LayerInfo
    paired_by: str


def _owners(name: str) -> list[str]:
    """List the paths that could hold parameter ``name``, shallowest first (``""``, ``a``, ``a.b``)."""
    parts = name.split(".")[:-1]
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def _holds(twin: str, layer: LayerInfo, weight_map: WeightMap) -> bool:
    """Say whether the map sends every kept entry of ``layer`` into the layer ``twin``.

    A map edited by hand after its alignment was saved is followed, not the stale alignment.
    """
    names = [weight_map.name_map.get(p) for p in layer.params]
    return any(names) and all(n is None or not twin or n.startswith(twin + ".") for n in names)


def _through_weights(layer: LayerInfo, weight_map: WeightMap, target_paths: set[str]) -> str | None:
    targets = [weight_map.name_map.get(p) for p in layer.params]
    names = [t for t in targets if t]
    if not names:
        return None
    common = [p for p in _owners(names[0]) if p in target_paths and all(n.startswith(p) for n in names)]
    common = [p for p in common if all(p == "" or n.startswith(p + ".") for n in names)]
    if not common:
        return None
    if layer.path in common:
        return layer.path
    last = layer.path.rpartition(".")[2]
    same_name = [p for p in common if p.rpartition(".")[2] == last]
    return same_name[-1] if same_name else common[-1]


CONTAINER_KINDS = {"sequential", "modulelist", "moduledict"}


def _alike(a: LayerInfo, b: LayerInfo) -> bool:
    """Say whether two layers are of one family (``batchnorm2d`` and ``batchnorm``), whatever their ranks."""
    return bool(a.kind) and kind_family(a.kind) == kind_family(b.kind)


def _is_container(layer: LayerInfo) -> bool:
    return layer.kind in CONTAINER_KINDS or (not layer.kind and not layer.params)


def _ancestors(path: str) -> list[str]:
    """List the proper ancestors of a layer path, the root ``""`` included."""
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(len(parts))] if path else []


def _common_ancestor(paths: set[str]) -> str:
    """Give the deepest path that holds every layer of ``paths`` as a proper descendant."""
    parents = [p.rpartition(".")[0].split(".") if "." in p else [] for p in paths]
    common: list[str] = []
    for parts in zip(*parents, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(common)


def _by_contents(
    orig_layers: Sequence[LayerInfo],
    target_by_path: dict[str, LayerInfo],
    weight_pairs: list[LayerPair],
    add: Callable[[LayerInfo, LayerInfo, str], None],
    taken: set[str],
) -> None:
    """Pair each container with the target one whose paired weight-owning layers are its own's twins.

    The pair is ``ambiguous`` when one of the pairs inside it was.
    """
    under_orig: dict[str, set[str]] = {}
    under_target: dict[str, set[str]] = {}
    unsure: set[str] = set()  # orig containers holding a pair that was ambiguous
    for pair in weight_pairs:
        for ancestor in _ancestors(pair.orig.path):
            under_orig.setdefault(ancestor, set()).add(pair.target.path)
            if pair.paired_by == AMBIGUOUS:
                unsure.add(ancestor)
        for ancestor in _ancestors(pair.target.path):
            under_target.setdefault(ancestor, set()).add(pair.target.path)
    for layer in reversed(orig_layers[1:]):  # the deepest container first
        twins = under_orig.get(layer.path)
        if not twins:
            continue
        holder: str | None = _common_ancestor(twins)
        while holder and holder in target_by_path and under_target.get(holder) == twins:
            if holder not in taken:  # a wrapper the other side lacks may hold the same: go up
                add(layer, target_by_path[holder], AMBIGUOUS if layer.path in unsure else "contents")
                break
            holder = holder.rpartition(".")[0] if "." in holder else None


def _align(
    orig_children: list[LayerInfo], target_children: list[LayerInfo], leftovers: bool = True
) -> list[tuple[LayerInfo, LayerInfo]]:
    """Pair two lists of layers in order: longest common run of one family, then leftovers one for one.

    Leftovers pair only when both are containers or both are not, and, unless ``leftovers``
    is true, only when their kinds play one role (two activations, two poolings).
    """
    n, m = len(orig_children), len(target_children)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            same = _alike(orig_children[i], target_children[j])
            best[i][j] = best[i + 1][j + 1] + 1 if same else max(best[i + 1][j], best[i][j + 1])
    pairs: list[tuple[LayerInfo, LayerInfo]] = []
    i = j = 0
    while i < n and j < m:
        if _alike(orig_children[i], target_children[j]):
            pairs.append((orig_children[i], target_children[j]))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    left_t = [t for t in orig_children if all(t is not p[0] for p in pairs)]
    left_m = [c for c in target_children if all(c is not p[1] for p in pairs)]
    if left_t and len(left_t) == len(left_m):
        pairs.extend(
            (a, b)
            for a, b in zip(left_t, left_m, strict=True)
            if _is_container(a) == _is_container(b) and (leftovers or kind_role(a.kind) == kind_role(b.kind))
        )
    return pairs


def pair_layers(
    orig_layers: Sequence[LayerInfo], target_layers: Sequence[LayerInfo], weight_map: WeightMap | None
) -> list[LayerPair]:
    """Pair the layers of two networks; the roots always pair. Returns pairs in the orig network's order."""
    target_by_path = {layer.path: layer for layer in target_layers}
    taken: set[str] = set()
    found: dict[str, LayerPair] = {}

    def add(orig_layer: LayerInfo, target_layer: LayerInfo, how: str) -> None:
        if orig_layer.path not in found and target_layer.path not in taken:
            found[orig_layer.path] = LayerPair(orig_layer, target_layer, how)
            taken.add(target_layer.path)

    add(orig_layers[0], target_layers[0], "root")
    if weight_map is not None:
        twins = weight_map.twins()
        for layer in orig_layers[1:]:
            twin, how = twins.get(layer.path, ("", "weights"))
            if how in (STRUCTURE, AMBIGUOUS) and twin in target_by_path and _holds(twin, layer, weight_map):
                add(layer, target_by_path[twin], how)
                continue
            target = _through_weights(layer, weight_map, set(target_by_path))
            if target:
                add(layer, target_by_path[target], "weights")
        weight_pairs = [p for p in found.values() if p.paired_by != "root"]
        _by_contents(orig_layers, target_by_path, weight_pairs, add, taken)
    for layer in orig_layers[1:]:
        if layer.path in target_by_path:
            add(layer, target_by_path[layer.path], "path")
    children_t: dict[str, list[LayerInfo]] = {}
    children_m: dict[str, list[LayerInfo]] = {}
    for layer in orig_layers[1:]:
        children_t.setdefault(layer.parent or "", []).append(layer)
    for layer in target_layers[1:]:
        children_m.setdefault(layer.parent or "", []).append(layer)
    for layer in orig_layers:  # parents come before their children
        pair = found.get(layer.path)
        if pair is None:
            continue
        free_t = [c for c in children_t.get(layer.path, []) if c.path not in found and not c.params]
        free_m = [c for c in children_m.get(pair.target.path, []) if c.path not in taken and not c.params]
        for orig_child, target_child in _align(free_t, free_m):
            add(orig_child, target_child, "order")
    _leaves_between_anchors(orig_layers, target_layers, found, add)
    return [found[layer.path] for layer in orig_layers if layer.path in found]


def _leaves(layers: Sequence[LayerInfo]) -> list[LayerInfo]:
    parents = {layer.parent for layer in layers}
    return [layer for layer in layers[1:] if layer.path not in parents]


def _leaves_between_anchors(
    orig_layers: Sequence[LayerInfo],
    target_layers: Sequence[LayerInfo],
    found: dict[str, LayerPair],
    add: Callable[[LayerInfo, LayerInfo, str], None],
) -> None:
    """Pair the leaves left over where the two trees nest differently, by kind, between paired leaves.

    The leaves of each network in order, cut at the leaves already paired (in the same order on
    both sides): the free ones between two cuts pair as :func:`_align` pairs children.
    """
    orig_leaves, target_leaves = _leaves(orig_layers), _leaves(target_layers)
    position = {layer.path: j for j, layer in enumerate(target_leaves)}
    cuts = [
        (i, position[found[leaf.path].target.path])
        for i, leaf in enumerate(orig_leaves)
        if leaf.path in found and found[leaf.path].target.path in position
    ]
    cuts = longest_increasing(cuts)  # where paired leaves cross (defined in another order), keep most of them
    paired_target = {pair.target.path for pair in found.values()}
    bounds = [(-1, -1), *cuts, (len(orig_leaves), len(target_leaves))]
    for (i0, j0), (i1, j1) in pairwise(bounds):
        free_o = [x for x in orig_leaves[i0 + 1 : i1] if x.path not in found and not x.params]
        free_t = [x for x in target_leaves[j0 + 1 : j1] if x.path not in paired_target and not x.params]
        for orig_leaf, target_leaf in _align(free_o, free_t, leftovers=False):
            add(orig_leaf, target_leaf, "order")


def in_call_order(layers: Sequence[LayerInfo], first_calls: dict[str, int]) -> list[LayerInfo]:
    """Order layers by when they (or, for a layer never called itself, the first layer inside it) first ran.

    ``first_calls`` maps a layer path to the order of its first call. Parents stay before their
    children; layers never called, with nothing called inside, keep their listed order after the rest.
    The root stays first.
    """
    if not layers:
        return []
    earliest: dict[str, float] = {}
    for layer in layers:
        when = first_calls.get(layer.path)
        if when is None:
            continue
        for path in (layer.path, *_ancestors(layer.path)):
            earliest[path] = min(earliest.get(path, when), when)
    listed = {layer.path: index for index, layer in enumerate(layers)}
    never = float("inf")

    def key(layer: LayerInfo) -> tuple[float, int, int]:
        when = earliest.get(layer.path)
        if when is None:  # never called, nothing inside called: in listed order, after the rest
            return never, 0, listed[layer.path]
        return when, layer.path.count("."), listed[layer.path]  # a parent never called before its first child

    return [layers[0], *sorted(layers[1:], key=key)]
