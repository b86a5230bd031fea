"""Pairing each torch layer with its MindSpore twin.

1. Layers that own parameters pair through the weight map: the MindSpore
   names of a torch layer's parameters lead to the MindSpore cell that holds
   them (the one at the same path, or named like the torch layer, or else the
   deepest cell holding them all).
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
    """A torch layer, its MindSpore twin, and what paired them (``weights``, ``path``, ``order``, ``root``).

    Pairs are found by :func:`pair_layers`.
    """

    torch: LayerInfo
    mindspore: LayerInfo
    paired_by: str


def _owners(name: str) -> list[str]:
    """List the paths that could hold parameter ``name``, shallowest first (``""``, ``a``, ``a.b``)."""
    parts = name.split(".")[:-1]
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def _through_weights(layer: LayerInfo, weight_map: WeightMap, ms_paths: set[str]) -> str | None:
    targets = [weight_map.name_map.get(p) for p in layer.params]
    names = [t for t in targets if t]
    if not names:
        return None
    common = [p for p in _owners(names[0]) if p in ms_paths and all(n.startswith(p) for n in names)]
    common = [p for p in common if all(p == "" or n.startswith(p + ".") for n in names)]
    if not common:
        return None
    if layer.path in common:
        return layer.path
    last = layer.path.rpartition(".")[2]
    same_name = [p for p in common if p.rpartition(".")[2] == last]
    return same_name[-1] if same_name else common[-1]


def _align(
    torch_children: list[LayerInfo], ms_children: list[LayerInfo]
) -> list[tuple[LayerInfo, LayerInfo]]:
    """Pair two lists of layers in order: longest common run of equal kinds, then leftovers one for one."""
    n, m = len(torch_children), len(ms_children)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            same = torch_children[i].kind and torch_children[i].kind == ms_children[j].kind
            best[i][j] = best[i + 1][j + 1] + 1 if same else max(best[i + 1][j], best[i][j + 1])
    pairs: list[tuple[LayerInfo, LayerInfo]] = []
    i = j = 0
    while i < n and j < m:
        if torch_children[i].kind and torch_children[i].kind == ms_children[j].kind:
            pairs.append((torch_children[i], ms_children[j]))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    left_t = [t for t in torch_children if all(t is not p[0] for p in pairs)]
    left_m = [c for c in ms_children if all(c is not p[1] for p in pairs)]
    if left_t and len(left_t) == len(left_m):
        pairs.extend(zip(left_t, left_m, strict=False))
    return pairs


def pair_layers(
    torch_layers: Sequence[LayerInfo], ms_layers: Sequence[LayerInfo], weight_map: WeightMap | None
) -> list[LayerPair]:
    """Pair the layers of two networks; the roots always pair. Returns pairs in torch order."""
    ms_by_path = {layer.path: layer for layer in ms_layers}
    taken: set[str] = set()
    found: dict[str, LayerPair] = {}

    def add(torch_layer: LayerInfo, ms_layer: LayerInfo, how: str) -> None:
        if torch_layer.path not in found and ms_layer.path not in taken:
            found[torch_layer.path] = LayerPair(torch_layer, ms_layer, how)
            taken.add(ms_layer.path)

    add(torch_layers[0], ms_layers[0], "root")
    if weight_map is not None:
        for layer in torch_layers[1:]:
            target = _through_weights(layer, weight_map, set(ms_by_path))
            if target:
                add(layer, ms_by_path[target], "weights")
    for layer in torch_layers[1:]:
        if layer.path in ms_by_path:
            add(layer, ms_by_path[layer.path], "path")
    children_t: dict[str, list[LayerInfo]] = {}
    children_m: dict[str, list[LayerInfo]] = {}
    for layer in torch_layers[1:]:
        children_t.setdefault(layer.parent or "", []).append(layer)
    for layer in ms_layers[1:]:
        children_m.setdefault(layer.parent or "", []).append(layer)
    for layer in torch_layers:  # parents come before their children
        pair = found.get(layer.path)
        if pair is None:
            continue
        free_t = [c for c in children_t.get(layer.path, []) if c.path not in found and not c.params]
        free_m = [c for c in children_m.get(pair.mindspore.path, []) if c.path not in taken and not c.params]
        for torch_child, ms_child in _align(free_t, free_m):
            add(torch_child, ms_child, "order")
    return [found[layer.path] for layer in torch_layers if layer.path in found]
