"""Weight maps: which target parameter each source parameter becomes, and how its value changes.

A map is built from a network (:func:`build_weight_map`) for a target
framework, which may be any installed backend, the network's own included.
The source network's plugin says which kind of layer owns each state-dict
entry (``ts_layer_params``); each framework's plugin says how it stores a
kind's weights relative to a neutral form (``ts_weight_convention``), and the
map goes through that form: the source's names and layouts back to it, then
on to the target's. Two networks of one framework map every name to itself.
Saved, a map is JSON a person can read and edit::

    {
      "tscore_weight_map": 1,
      "source": "torch",
      "target": "mindspore",
      "name_map": {"bn1.weight": "bn1.gamma", "bn1.num_batches_tracked": null, ...},
      "value_map": {"conv.weight": "unsqueeze(2)"},
      "target_only": [],
      "layers": {"bn1": "batchnorm1d", ...}
    }

``null`` in ``name_map`` means the target has no such parameter (the entry is
dropped on conversion); ``target_only`` lists target entries the source has
no counterpart for (torch's ``num_batches_tracked`` coming from MindSpore),
which keep the value the target network has. A map written by
TroubleShooter, ``[name_map, value_map]``, loads too, as torch to MindSpore.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tabulate import tabulate

from tscore import value_transforms as transforms
from tscore.checkpoint.conventions import Conventions, require_plugin
from tscore.checkpoint.layer_alignment import LayerMatch, alignment_table
from tscore.checkpoint.network_alignment import align_networks
from tscore.errors import TscoreError, UnsupportedObjectError
from tscore.json_files import read_json
from tscore.models import model_info
from tscore.npy_files import writable_target, write_atomic
from tscore.plugins import hook

log = logging.getLogger(__name__)

FORMAT_KEY = "tscore_weight_map"
FORMAT_VERSION = 1


class WeightMapError(TscoreError, ValueError):
    """A weight map that cannot be read, or that does not fit the checkpoint it is used with."""


@dataclass(frozen=True)
class WeightMap:
    """Source parameter name -> target name (``None``: dropped), and source name -> value transform.

    It unpacks as TroubleShooter's pair, so ``name_map, value_map =
    get_weight_map(...)`` keeps working.

    :ivar source: the framework the names on the left belong to.
    :ivar target: the framework the names on the right belong to.
    :ivar layers: layer path -> neutral layer kind, for a person reading the map.
    :ivar target_only: target names with no source counterpart; they keep the
        target network's own value.
    :ivar alignment: when the map was built for a target network, each
        weight-owning layer's twin and how it was found (``names``,
        ``structure``, ``ambiguous``; ``unmatched`` with the other side ``None``).
    :ivar needs_rule: source name -> why it is not converted: its layer is of a kind that a plugin
        says no renaming converts (per-gate RNN weights, split q/k/v projections). Such entries map
        to ``None`` until a person writes the rule into a saved map (names and value transforms). In
        an inverted map they are the names the target keeps (``target_only``), with the same reasons.
    """

    name_map: dict[str, str | None]
    value_map: dict[str, str]
    source: str = "torch"
    target: str = "mindspore"
    layers: dict[str, str] = field(default_factory=dict)
    target_only: tuple[str, ...] = ()
    alignment: tuple[LayerMatch, ...] = ()
    needs_rule: dict[str, str] = field(default_factory=dict)

    def check_frameworks(self, source: str, target: str, what: str) -> None:
        """Refuse a map written for another pair of frameworks than the two sides at hand.

        :raises WeightMapError: naming both pairs and how to get the right map.
        """
        if (self.source, self.target) != (source, target):
            raise WeightMapError(
                f"the weight map converts {self.source} names to {self.target} names, but {what} are "
                f"{source} and {target}; build one for them with get_weight_map(pt_net=..., ms_net=...) "
                "or pass weight_map=None"
            )

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Yield ``name_map`` then ``value_map``, as TroubleShooter's tuple did."""
        return iter((self.name_map, self.value_map))

    def to_json(self) -> str:
        """Render the map as indented JSON."""
        document = {
            FORMAT_KEY: FORMAT_VERSION,
            "source": self.source,
            "target": self.target,
            "name_map": self.name_map,
            "value_map": self.value_map,
            "target_only": list(self.target_only),
            "layers": self.layers,
        }
        if self.alignment:
            document["alignment"] = [match.to_dict() for match in self.alignment]
        if self.needs_rule:
            document["needs_rule"] = self.needs_rule
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the map as JSON, atomically; return the path."""
        target = os.fspath(path)
        text = self.to_json().encode("utf-8")
        write_atomic(target, lambda stream: stream.write(text))
        return target

    def inverse(self) -> WeightMap:
        """Return the map for the other direction: target name -> source name, transforms undone.

        Entries dropped on the way there are target-only on the way back, and
        target-only entries are dropped.
        """
        name_map: dict[str, str | None] = dict.fromkeys(self.target_only)
        value_map: dict[str, str] = {}
        dropped = tuple(name for name, target_name in self.name_map.items() if target_name is None)
        for source_name, target_name in self.name_map.items():
            if target_name is None:
                continue
            if target_name in name_map:
                raise WeightMapError(
                    f"the weight map sends both {name_map[target_name]!r} and {source_name!r} to "
                    f"{target_name!r}, so it cannot be inverted; fix the map"
                )
            name_map[target_name] = source_name
            if source_name in self.value_map:
                value_map[target_name] = transforms.inverse(self.value_map[source_name])
        alignment = tuple(
            replace(match, source=match.target, target=match.source) for match in self.alignment
        )
        inverse = WeightMap(name_map, value_map, self.target, self.source, self.layers, dropped, alignment)
        # what needed a rule on the way there has no name on this side: the other side's entries keep theirs
        return replace(inverse, needs_rule=dict(self.needs_rule))

    def twins(self) -> dict[str, tuple[str, str]]:
        """Source layer path -> (target layer path, how it was found), for the layers the alignment paired."""
        return {
            m.source: (m.target, m.how)
            for m in self.alignment
            if m.source is not None and m.target is not None
        }

    def table(self) -> str:
        """Render the map as a table: source name, target name, value transform."""
        rows = [
            [source, self._target_cell(source, target), self.value_map.get(source, "")]
            for source, target in self.name_map.items()
        ]
        return tabulate(
            rows, headers=[f"{self.source} name", f"{self.target} name", "value transform"], tablefmt="pretty"
        )

    def _target_cell(self, source: str, target: str | None) -> str:
        if target is not None:
            return target
        return f"(needs a rule: {self.needs_rule[source]})" if source in self.needs_rule else "(dropped)"

    def alignment_table(self) -> str:
        """Render how each weight-owning layer found its twin, and a count of each way; ``""`` with none."""
        return alignment_table(self.alignment, (self.source, self.target)) if self.alignment else ""


def build_weight_map(
    model: object,
    *,
    target: str | None = None,
    target_model: object = None,
    arguments: tuple[str, str] = ("the source network", "the target network"),
) -> WeightMap:
    """Build the map for every state-dict entry of ``model`` to the ``target`` framework's names.

    :param model: the source network, of any framework whose plugin is installed.
    :param target: the target framework's name; taken from ``target_model`` when that is given.
    :param target_model: the target network, to name its framework.
    :param arguments: how the caller's arguments name the two networks, for errors.
    :raises UnsupportedObjectError: when no plugin knows a network.
    """
    source = model_info(model, arguments[0]).framework
    if target_model is not None:
        found = model_info(target_model, arguments[1]).framework
        if target is not None and target != found:
            raise ValueError(f"target={target!r}, but the target network is a {found} network")
        target = found
    if target is None:
        raise TypeError("build_weight_map: name the target framework or pass the target network")
    layers = hook().ts_layer_params(model=model)
    if layers is None:
        raise UnsupportedObjectError(
            f"the {source} plugin does not list the layers of a {type(model).__module__}."
            f"{type(model).__name__}, so no weight map can be built for it"
        )
    if target != source:
        require_plugin(target)
    conventions = Conventions(source, target)
    mappings = {path: conventions.map_layer(kind, params) for path, kind, params in layers}
    alignment: tuple[LayerMatch, ...] = ()
    if target_model is not None:
        alignment = align_networks(layers, mappings, (model, target_model), conventions, arguments)
    twins = {m.source: m.target for m in alignment if m.source is not None and m.target is not None}
    name_map: dict[str, str | None] = {}
    value_map: dict[str, str] = {}
    target_only: list[str] = []
    kinds: dict[str, str] = {}
    paired: set[str] = set()
    needs_rule: dict[str, str] = {}
    for path, kind, _ in layers:
        if kind:
            kinds[path] = kind
        twin = twins.get(path, path)
        mapped = mappings[path]
        for local, renamed in mapped.names.items():
            name_map[_prefixed(path, local)] = None if renamed is None else _prefixed(twin, renamed)
            if path in twins:
                paired.add(_prefixed(path, local))
        value_map.update({_prefixed(path, local): spec for local, spec in mapped.transforms.items()})
        needs_rule.update(
            dict.fromkeys((_prefixed(path, local) for local in mapped.names), mapped.needs_rule)
        )
        target_only.extend(_prefixed(twin, name) for name in mapped.target_only)
    _drop_collisions(name_map, value_map, paired)
    needs_rule = {name: why for name, why in needs_rule.items() if why}
    if needs_rule:
        log.warning(
            "%d %s entries are left out of the map to %s, since no renaming converts their layers (%s); "
            "write their names and transforms into the saved map (name_map, value_map); pass that",
            len(needs_rule),
            source,
            target,
            ", ".join(sorted({n.rpartition(".")[0] or n for n in needs_rule})[:5]),
        )
    return WeightMap(name_map, value_map, source, target, kinds, tuple(target_only), alignment, needs_rule)


def _drop_collisions(name_map: dict[str, str | None], value_map: dict[str, str], paired: set[str]) -> None:
    """Drop what a layer with no twin would send to a name that a paired layer's entry already takes.

    A layer the alignment left without a twin keeps the name its own path gives it, so that
    conversion and weight comparison show it as one-sided; where that name is a paired entry's
    target, it is dropped instead of overwriting it.
    """
    claimed = {target: name for name, target in name_map.items() if target is not None and name in paired}
    for name, target in name_map.items():
        if target is not None and claimed.get(target, name) != name:
            name_map[name] = None
            value_map.pop(name, None)


def _prefixed(path: str | None, local: str | None) -> str:
    return f"{path}.{local}" if path else str(local)


def customise(
    weight_map: WeightMap,
    prefix: str | None = None,
    custom_name_func: Callable[[dict[str, str]], Mapping[str, str]] | None = None,
) -> WeightMap:
    """Apply TroubleShooter's customisations to the target names: a prefix, then a function.

    ``custom_name_func`` receives ``{source name: target name}`` for the
    entries that are not dropped and returns the new dict, as in TroubleShooter.

    :raises WeightMapError: when the function returns something else than a dict of the same keys.
    """
    kept = {k: v for k, v in weight_map.name_map.items() if v is not None}
    if prefix:
        kept = {k: f"{prefix}.{v}" for k, v in kept.items()}
    if custom_name_func is not None:
        changed = custom_name_func(dict(kept))
        if not isinstance(changed, Mapping):
            raise WeightMapError(
                f"custom_name_func returned a {type(changed).__name__}; it must return the dict it was "
                "given, {source name: new target name}"
            )
        lost = kept.keys() - changed.keys()
        if lost:
            raise WeightMapError(
                f"custom_name_func dropped {len(lost)} name(s), such as {sorted(lost)[:5]}; return every key"
            )
        kept = {k: str(changed[k]) for k in kept}
    name_map = {k: kept.get(k) for k in weight_map.name_map}
    target_only = tuple(f"{prefix}.{n}" for n in weight_map.target_only) if prefix else weight_map.target_only
    alignment = weight_map.alignment
    if prefix:
        alignment = tuple(
            replace(m, target=None if m.target is None else _prefixed(prefix, m.target)) for m in alignment
        )
    return replace(weight_map, name_map=name_map, target_only=target_only, alignment=alignment)


def _read_alignment(value: object, path: str) -> tuple[LayerMatch, ...]:
    """Read a map file's ``alignment``: a list of ``{"source", "target", "kind", "how", "note"}``."""
    if value is None:
        return ()
    fields = ("source", "target", "kind", "how", "note")
    if not isinstance(value, list) or not all(
        isinstance(item, dict) and all(isinstance(item.get(k, ""), (str, type(None))) for k in fields)
        for item in value
    ):
        raise WeightMapError(
            f"{path}: 'alignment' must be a list of objects with source, target, kind, how and note "
            "(names or null); delete it to use the map without it"
        )
    return tuple(
        LayerMatch(
            item.get("source"),
            item.get("target"),
            item.get("kind") or "",
            item.get("how") or "",
            item.get("note") or "",
        )
        for item in value
    )


def _check_names(value: object, what: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise WeightMapError(f"{path}: {what} must be a JSON object of names")
    return value


def load_weight_map(path: str | os.PathLike[str]) -> WeightMap:
    """Read a weight map written by tscore or by TroubleShooter (``[name_map, value_map]``).

    :raises WeightMapError: naming the file when it is missing, not JSON or not a weight map.
    """
    name = os.fspath(path)
    document = read_json(name, "weight map", WeightMapError, "write one with get_weight_map")
    if isinstance(document, list) and len(document) == 2:  # TroubleShooter
        name_map, value_map = (_check_names(part, "each half", name) for part in document)
        source, target, layers = "torch", "mindspore", {}
        target_only: list[str] = []
        alignment: tuple[LayerMatch, ...] = ()
        needs_rule: dict[str, Any] = {}
    elif isinstance(document, dict) and "name_map" in document:
        name_map = _check_names(document["name_map"], "'name_map'", name)
        value_map = _check_names(document.get("value_map") or {}, "'value_map'", name)
        source = str(document.get("source", "torch"))
        target = str(document.get("target", "mindspore"))
        layers = dict(document.get("layers") or {})
        target_only = document.get("target_only") or []
        alignment = _read_alignment(document.get("alignment"), name)
        needs_rule = _check_names(document.get("needs_rule") or {}, "'needs_rule'", name)
        if not isinstance(target_only, list) or not all(isinstance(n, str) for n in target_only):
            raise WeightMapError(f"{name}: 'target_only' must be a list of names")
    else:
        raise WeightMapError(
            f"{name!r} is not a weight map: expected an object with 'name_map' (tscore) or a list "
            "[name_map, value_map] (TroubleShooter)"
        )
    for key, value in name_map.items():
        if value is not None and not isinstance(value, str):
            raise WeightMapError(f"{name}: name_map[{key!r}] must be a name or null, not {value!r}")
    try:
        value_map = {k: transforms.normalise(v) for k, v in value_map.items() if v}
    except transforms.TransformError as exc:
        raise WeightMapError(f"{name}: {exc}") from None
    rules = {key: str(why) for key, why in needs_rule.items() if name_map.get(key) is None}
    return WeightMap(dict(name_map), value_map, source, target, layers, tuple(target_only), alignment, rules)


def save_weight_map(weight_map: WeightMap, path: str | os.PathLike[str]) -> str:
    """Write ``weight_map`` to ``path`` as JSON; the folder must exist.

    :raises TargetPathError: naming the path when its folder does not exist.
    """
    return weight_map.save(writable_target(path, "weight_map_save_path"))
