"""Aligning two networks' weight-owning layers when their names differ, through their plugins.

Each side's plugin lists its layers (``ts_layer_params``) and gives the
shapes of their entries (``ts_model_state``); a plugin that cannot answer
leaves the names alone to pair the layers, with a warning. A source layer's
*signature* is its neutral kind (without a rank: torch's SyncBatchNorm is any
BatchNorm) and its entries as the target would store them (names and shapes
carried through :class:`~tscore.checkpoint.conventions.Conventions`);
a target layer's is its kind and its own entries, less those the source
never has. :func:`~tscore.checkpoint.layer_alignment.align_layers` then pairs
them. When every layer is at the same path on both sides, no state is read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np

from tscore import value_transforms as transforms
from tscore.checkpoint.conventions import Conventions, LayerMapping
from tscore.checkpoint.layer_alignment import (
    NAMES,
    AlignedLayer,
    LayerMatch,
    align_layers,
    base_kind,
    kinds_agree,
)
from tscore.plugins import hook

log = logging.getLogger(__name__)

LayerParams = Sequence[tuple[str, str, Sequence[str]]]


def _shapes(model: object) -> dict[str, tuple[int, ...]] | None:
    state = hook().ts_model_state(model=model)
    return None if state is None else {name: tuple(array.shape) for name, array in state.items()}


def _cannot(argument: str, model: object, what: str) -> tuple[LayerMatch, ...]:
    log.warning(
        "%s is a %s.%s whose plugin cannot %s, so the layers are paired by their names only",
        argument,
        type(model).__module__,
        type(model).__name__,
        what,
    )
    return ()


def _carried_shape(shape: tuple[int, ...] | None, spec: str | None) -> tuple[int, ...] | None:
    """Give the shape an entry has once ``spec`` has changed its layout; ``None`` when it does not fit."""
    if shape is None or not spec:
        return shape
    try:
        return tuple(transforms.apply(spec, np.broadcast_to(np.zeros((), np.bool_), shape)).shape)
    except transforms.TransformError:
        return None


def _full(path: str, local: str) -> str:
    return f"{path}.{local}" if path else local


def _all_at_same_paths(
    owners: LayerParams, mappings: Mapping[str, LayerMapping], target: Mapping[str, tuple[str, set[str]]]
) -> bool:
    """Say whether each side's weight-owning layers are the other's, path for path, kinds agreeing."""
    if {path for path, _, _ in owners} != set(target):
        return False
    for path, kind, _ in owners:
        if not kinds_agree(kind, target[path][0]):
            return False
        wanted = {name for name in mappings[path].names.values() if name is not None}
        if not wanted <= target[path][1]:
            return False
    return True


def align_networks(
    source_layers: LayerParams,
    mappings: Mapping[str, LayerMapping],
    models: tuple[object, object],
    conventions: Conventions,
    arguments: tuple[str, str],
) -> tuple[LayerMatch, ...]:
    """Pair the source network's weight-owning layers with the target's.

    :param source_layers: the source's ``ts_layer_params`` answer.
    :param mappings: source layer path -> its entries carried to the target's convention.
    :param models: the source and target networks.
    :param arguments: how the caller names the two networks, for the log.
    :return: every weight-owning layer of either side once; nothing (a warning logged) when a
        plugin cannot list the target's layers or read a network's state: then names alone pair.
    """
    owners = [(path, kind, tuple(params)) for path, kind, params in source_layers if params]
    listed = hook().ts_layer_params(model=models[1])
    if listed is None:
        return _cannot(arguments[1], models[1], "list its layers (ts_layer_params)")
    target_listed = [(path, kind, tuple(params)) for path, kind, params in listed if params]
    quick = {path: (kind, set(params)) for path, kind, params in target_listed}
    if _all_at_same_paths(owners, mappings, quick):
        return tuple(LayerMatch(path, path, kind, NAMES) for path, kind, _ in owners)
    source_shapes, target_shapes = _shapes(models[0]), _shapes(models[1])
    if source_shapes is None or target_shapes is None:
        which = 0 if source_shapes is None else 1
        return _cannot(arguments[which], models[which], "read its state (ts_model_state)")
    source = []
    for path, kind, _ in owners:
        mapping = mappings[path]
        entries = sorted(
            (
                str(renamed),
                _carried_shape(source_shapes.get(_full(path, local)), mapping.transforms.get(local)),
            )
            for local, renamed in mapping.names.items()
            if renamed is not None
        )
        source.append(AlignedLayer(path, kind, (base_kind(kind), tuple(entries))))
    target = []
    for path, kind, params in target_listed:
        extra = conventions.target_only(kind)
        entries = sorted(
            (local, target_shapes.get(_full(path, local))) for local in params if local not in extra
        )
        target.append(AlignedLayer(path, kind, (base_kind(kind), tuple(entries))))
    matches = tuple(align_layers(source, target))
    log.debug("aligned %d source and %d target layers: %s", len(source), len(target), matches)
    return matches
