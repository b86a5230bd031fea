"""Weight maps: which target parameter each source parameter becomes, and how its value changes.

A map is built from a network (:func:`build_weight_map`): the source
framework's plugin says which kind of layer owns each state-dict entry
(``ts_layer_params``), the target framework's plugin gives the rules per kind
(``ts_weight_rules``). Saved, it is JSON a person can read and edit::

    {
      "tscore_weight_map": 1,
      "source": "torch",
      "target": "mindspore",
      "name_map": {"bn1.weight": "bn1.gamma", "bn1.num_batches_tracked": null, ...},
      "value_map": {"conv.weight": "unsqueeze(2)"},
      "layers": {"bn1": "batchnorm1d", ...}
    }

``null`` in ``name_map`` means the target has no such parameter (the entry is
dropped on conversion). A map written by TroubleShooter, ``[name_map,
value_map]``, loads too.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tabulate import tabulate

from tscore.checkpoint import transforms
from tscore.errors import TscoreError, UnsupportedObjectError
from tscore.npy_files import writable_target, write_atomic
from tscore.plugins import get_plugin_manager, hook

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

    :ivar layers: layer path -> neutral layer kind, for a person reading the map.
    """

    name_map: dict[str, str | None]
    value_map: dict[str, str]
    source: str = "torch"
    target: str = "mindspore"
    layers: dict[str, str] = field(default_factory=dict)

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
            "layers": self.layers,
        }
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the map as JSON, atomically; return the path."""
        target = os.fspath(path)
        text = self.to_json().encode("utf-8")
        write_atomic(target, lambda stream: stream.write(text))
        return target

    def inverse(self) -> WeightMap:
        """Return the map for the other direction: target name -> source name, transforms undone.

        Dropped entries have no target name and are left out.
        """
        name_map: dict[str, str | None] = {}
        value_map: dict[str, str] = {}
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
        return WeightMap(name_map, value_map, self.target, self.source, self.layers)

    def table(self) -> str:
        """Render the map as a table: source name, target name, value transform."""
        rows = [
            [source, "(dropped)" if target is None else target, self.value_map.get(source, "")]
            for source, target in self.name_map.items()
        ]
        return tabulate(
            rows, headers=[f"{self.source} name", f"{self.target} name", "value transform"], tablefmt="pretty"
        )


def _merged_rules(kind: str, source: str, target: str, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if kind not in cache:
        merged: dict[str, Any] = {"names": {}, "transforms": {}}
        if kind:
            for answer in reversed(hook().ts_weight_rules(kind=kind, source=source, target=target)):
                merged["names"].update(answer.get("names", {}))
                merged["transforms"].update(answer.get("transforms", {}))
        cache[kind] = merged
    return cache[kind]


def _require_target_plugin(target: str) -> None:
    pm = get_plugin_manager()
    names = {info.name for info in pm.hook.ts_framework_info()}
    if target not in names:
        raise TscoreError(
            f"no plugin for {target} is loaded, and its plugin supplies the weight rules "
            f"(BatchNorm weight -> gamma, ...): install ts_{target} (pip install tscore[{target}]) "
            f"and {target}"
        )


def build_weight_map(model: object, *, source: str = "torch", target: str = "mindspore") -> WeightMap:
    """Build the map for every state-dict entry of ``model`` from the plugins' layer rules.

    :raises UnsupportedObjectError: when no plugin knows ``model``.
    """
    layers = hook().ts_layer_params(model=model)
    if layers is None:
        raise UnsupportedObjectError(
            f"no plugin lists the layers of a {type(model).__module__}.{type(model).__name__}; "
            f"pass a {source} network (torch.nn.Module) and install its plugin"
        )
    _require_target_plugin(target)
    cache: dict[str, dict[str, Any]] = {}
    name_map: dict[str, str | None] = {}
    value_map: dict[str, str] = {}
    kinds: dict[str, str] = {}
    for path, kind, params in layers:
        rules = _merged_rules(kind, source, target, cache)
        if kind:
            kinds[path] = kind
        prefix = f"{path}." if path else ""
        for local in params:
            renamed = rules["names"].get(local, local)
            name_map[prefix + local] = None if renamed is None else prefix + renamed
            if local in rules["transforms"]:
                value_map[prefix + local] = transforms.normalise(rules["transforms"][local])
    return WeightMap(name_map, value_map, source, target, kinds)


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
    return replace(weight_map, name_map=name_map)


def _check_names(value: object, what: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise WeightMapError(f"{path}: {what} must be a JSON object of names")
    return value


def load_weight_map(path: str | os.PathLike[str]) -> WeightMap:
    """Read a weight map written by tscore or by TroubleShooter (``[name_map, value_map]``).

    :raises WeightMapError: naming the file when it is missing, not JSON or not a weight map.
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as stream:
            document = json.load(stream)
    except FileNotFoundError:
        raise WeightMapError(f"weight map {name!r} does not exist; write one with get_weight_map") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WeightMapError(f"weight map {name!r} cannot be read as JSON: {exc}") from exc
    if isinstance(document, list) and len(document) == 2:  # TroubleShooter
        name_map, value_map = (_check_names(part, "each half", name) for part in document)
        source, target, layers = "torch", "mindspore", {}
    elif isinstance(document, dict) and "name_map" in document:
        name_map = _check_names(document["name_map"], "'name_map'", name)
        value_map = _check_names(document.get("value_map") or {}, "'value_map'", name)
        source = str(document.get("source", "torch"))
        target = str(document.get("target", "mindspore"))
        layers = dict(document.get("layers") or {})
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
    return WeightMap(dict(name_map), value_map, source, target, layers)


def save_weight_map(weight_map: WeightMap, path: str | os.PathLike[str]) -> str:
    """Write ``weight_map`` to ``path`` as JSON; the folder must exist.

    :raises TargetPathError: naming the path when its folder does not exist.
    """
    return weight_map.save(writable_target(path, "weight_map_save_path"))
