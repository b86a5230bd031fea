"""Pairing each layer of one network with its twin in the other (any two backends).

1. Layers that own parameters pair through the weight map: the target
   names of an orig layer's parameters lead to the target layer that holds
   them (the one at the same path, or named like the orig layer, or else the
   deepest layer holding them all).
2. Layers at the same path pair (the usual case: a migration keeps the
   attribute names).
3. The rest pair by order within their already paired parents, matching
   neutral kinds first (``relu`` with ``relu``), then leftovers one for one
   when as many remain on each side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tscore.checkpoint.weight_map import WeightMap
from tscore.module_hooks import LayerInfo


@dataclass(frozen=True)
class LayerPair:
    """An orig layer, its target twin, and what paired them (``weights``, ``path``, ``order``, ``root``).

    Pairs are found by :func:`pair_layers`.
    """

    orig: LayerInfo
    target: LayerInfo
    paired_by: str


def _owners(name: str) -> list[str]:
    """List the paths that could hold parameter ``name``, shallowest first (``""``, ``a``, ``a.b``)."""
    parts = name.split(".")[:-1]
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


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


def _align(
    orig_children: list[LayerInfo], target_children: list[LayerInfo]
) -> list[tuple[LayerInfo, LayerInfo]]:
    """Pair two lists of layers in order: longest common run of equal kinds, then leftovers one for one."""
    n, m = len(orig_children), len(target_children)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            same = orig_children[i].kind and orig_children[i].kind == target_children[j].kind
            best[i][j] = best[i + 1][j + 1] + 1 if same else max(best[i + 1][j], best[i][j + 1])
    pairs: list[tuple[LayerInfo, LayerInfo]] = []
    i = j = 0
    while i < n and j < m:
        if orig_children[i].kind and orig_children[i].kind == target_children[j].kind:
            pairs.append((orig_children[i], target_children[j]))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    left_t = [t for t in orig_children if all(t is not p[0] for p in pairs)]
    left_m = [c for c in target_children if all(c is not p[1] for p in pairs)]
    if left_t and len(left_t) == len(left_m):
        pairs.extend(zip(left_t, left_m, strict=False))
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
        for layer in orig_layers[1:]:
            target = _through_weights(layer, weight_map, set(target_by_path))
            if target:
                add(layer, target_by_path[target], "weights")
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
    return [found[layer.path] for layer in orig_layers if layer.path in found]
