"""How each framework stores a layer kind's weights, and one layer's entries carried from one to another.

Each plugin answers ``ts_weight_convention``: its own names for a kind's
neutral parameter names, and the transform from the neutral layout to its
own. :func:`map_layer` goes from the source convention through the neutral
form to the target's; :class:`Conventions` asks each plugin once per kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tscore import value_transforms as transforms
from tscore.errors import TscoreError
from tscore.plugins import get_plugin_manager, hook

Convention = dict[str, dict[str, Any]]


@dataclass
class LayerMapping:
    """The source layer kind's entries, renamed and transformed for the target."""

    names: dict[str, str | None] = field(default_factory=dict)
    transforms: dict[str, str] = field(default_factory=dict)
    target_only: list[str] = field(default_factory=list)
    needs_rule: str = ""  # why no renaming converts this kind between the two frameworks


class Conventions:
    """The conventions of a source and a target framework, asked of their plugins once per kind.

    :ivar source: the source framework's name.
    :ivar target: the target framework's name; equal to ``source``, every name maps to itself.
    """

    def __init__(self, source: str, target: str) -> None:
        """Remember the two frameworks; nothing is asked until a kind is mapped."""
        self.source = source
        self.target = target
        self._cache: dict[tuple[str, str], Convention] = {}

    def of(self, kind: str, framework: str) -> Convention:
        """Say how ``framework`` stores ``kind``: its ``names``, ``transforms`` and ``needs_rule``.

        ``needs_rule`` is ``{"why": ...}`` when the plugin says that no renaming converts the kind.
        """
        key = (kind, framework)
        if key not in self._cache:
            answer = hook().ts_weight_convention(kind=kind, framework=framework) if kind else None
            answer = answer or {}
            self._cache[key] = {
                "names": dict(answer.get("names", {})),
                "transforms": dict(answer.get("transforms", {})),
                "needs_rule": {"why": str(answer["needs_rule"])} if answer.get("needs_rule") else {},
            }
        return self._cache[key]

    def map_layer(self, kind: str, params: Sequence[str]) -> LayerMapping:
        """Carry one layer's local entry names (and their layouts) from the source to the target."""
        if self.source == self.target:
            return LayerMapping(names={local: local for local in params})
        source, target = self.of(kind, self.source), self.of(kind, self.target)
        for framework, convention in ((self.source, source), (self.target, target)):
            if convention["needs_rule"]:  # never converted by renaming: every entry left out, with why
                rule = convention["needs_rule"]["why"]
                why = f"{framework} stores {kind} so that no renaming converts it: {rule}"
                return LayerMapping(names=dict.fromkeys(params), needs_rule=why)
        return map_layer(params, source, target)

    def target_only(self, kind: str) -> set[str]:
        """List the local names of entries of a kind that only the target has (``num_batches_tracked``)."""
        return set(self.map_layer(kind, ()).target_only)


def map_layer(params: Sequence[str], source: Convention, target: Convention) -> LayerMapping:
    """Send one layer's entries from the source convention through the neutral form to the target's."""
    out = LayerMapping()
    to_neutral = {own: neutral for neutral, own in source["names"].items() if own is not None}
    for local in params:
        neutral = to_neutral.get(local, local)
        back = source["transforms"].get(neutral)
        undo = transforms.inverse(back) if back else None
        renamed = target["names"].get(neutral, neutral)
        out.names[local] = renamed
        combined = transforms.compose(undo, target["transforms"].get(neutral))
        if renamed is not None and combined:
            out.transforms[local] = combined
    for neutral, own in source["names"].items():
        if own is None and target["names"].get(neutral, neutral) is not None:
            out.target_only.append(target["names"].get(neutral, neutral))
    return out


def require_plugin(framework: str) -> None:
    """Refuse a target framework whose plugin is not loaded: its plugin says how it stores weights.

    :raises TscoreError: naming the framework and the plugins that are loaded.
    """
    names = {info.name for info in get_plugin_manager().hook.ts_framework_info()}
    if framework not in names:
        raise TscoreError(
            f"no plugin for {framework} is loaded, and its plugin says how {framework} stores weights "
            f"(loaded: {', '.join(sorted(names))}); install ts_{framework} and {framework}, or pass a "
            "target network"
        )
