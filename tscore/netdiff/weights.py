"""The weight stages of the difference finder: give both networks the same weights, then check them.

Spec 003's three notes on how the two checkpoint paths (TroubleShooter's
``pt_params_path`` and ``ms_params_path``: ``orig_params_path`` and
``target_params_path`` here), ``auto_conv_ckpt`` and ``compare_params`` interact:

1. By default the first network's weights (``pt_net``, the orig side) are
   converted through the weight map and loaded into the second (``ms_net``,
   the target side), then the orig state is compared with the target
   network's own state (names, shapes, values), which checks the structure.
   Two networks of one framework load by name, with no conversion.
2. With both paths, each network loads its file; nothing is converted or compared.
3. With only ``target_params_path``, the target network loads it; nothing is
   converted or compared.

Everything happens in memory: no ``.pth`` or ``.ckpt`` is written.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel, Field

from tscore.checkpoint.ckpt_diff import CheckpointDiff, diff_through_map
from tscore.checkpoint.convert import ConversionReport, convert_params
from tscore.checkpoint.files import load_checkpoint
from tscore.checkpoint.weight_map import WeightMap
from tscore.contract.checkpoints import CheckpointContents
from tscore.errors import TscoreError, UnsupportedObjectError
from tscore.plugins import hook

log = logging.getLogger(__name__)

AUTO_CONV_MODES = {0: "none", 1: "through the weight map", 2: "same names (MSAdapter)"}


class LoadResult(BaseModel):
    """What loading named arrays into a network did: loaded, and what did not fit."""

    network: str = Field(description="the network's label, 'torch (cpu)'")
    source: str = Field(description="where the arrays came from: a file, or the other network's state")
    loaded: int
    unused: list[str] = Field(default_factory=list, description="given names the network does not have")
    missing: list[str] = Field(default_factory=list, description="network names that got no value")
    mismatched: list[str] = Field(
        default_factory=list, description="'name: given shape vs network shape' for names of another shape"
    )

    @property
    def complete(self) -> bool:
        """True when every name fit and every network entry got a value."""
        return not (self.unused or self.missing or self.mismatched)

    def summary(self) -> str:
        """One line: what was loaded and what did not fit."""
        parts = [f"{self.network}: {self.loaded} entries loaded from {self.source}"]
        if self.unused:
            parts.append(f"{len(self.unused)} not in the network ({', '.join(self.unused[:10])})")
        if self.mismatched:
            parts.append(f"{len(self.mismatched)} of another shape ({'; '.join(self.mismatched[:5])})")
        if self.missing:
            parts.append(f"{len(self.missing)} network entries got no value ({', '.join(self.missing[:10])})")
        return "; ".join(parts)


class WeightStage(BaseModel):
    """The weight conversion and comparison stages, as far as they ran."""

    mode: str = Field(
        description="how the weights were set: converted, from files, or as the networks had them"
    )
    loads: list[LoadResult] = Field(default_factory=list)
    conversion: ConversionReport | None = None
    comparison: CheckpointDiff | None = None
    notes: list[str] = Field(default_factory=list)
    orig_label: str = "orig"
    target_label: str = "target"

    @property
    def passed(self) -> bool:
        """True when every load fit and the comparison, if it ran, found the same names, shapes and values."""
        return all(load.complete for load in self.loads) and (
            self.comparison is None or self.comparison.passed
        )

    def verdict(self) -> str:
        """One line saying whether both networks hold the same weights."""
        if self.comparison is None and not self.loads:
            return "weights: not converted or compared (" + self.mode + ")"
        if self.passed:
            return "weights: both networks hold the same weights"
        orig_only = target_only = mismatched = 0
        if self.comparison is not None:
            for row in self.comparison.shape_rows:
                orig_only += row.target_name is None
                target_only += row.orig_name is None
                mismatched += row.shape_equal is False
        parts = [f"{load.summary()}" for load in self.loads if not load.complete]
        orig, target = self.orig_label, self.target_label
        if orig_only or target_only or mismatched:
            parts.append(
                f"{orig_only} {orig} entries have no {target} counterpart, {target_only} {target} "
                f"entries have no {orig} counterpart, {mismatched} differ in shape: the networks' "
                "structures differ there (see the shape table); outputs will differ where those layers run"
            )
        elif self.comparison is not None and not self.comparison.passed:
            parts.append("some values differ after loading (see the value table)")
        return "weights DIFFER: " + "; ".join([*self.notes, *parts])


def model_state(model: object, argument: str) -> dict[str, np.ndarray]:
    """Read a network's state through its plugin.

    :raises UnsupportedObjectError: naming ``argument`` when no plugin knows the network.
    """
    state = hook().ts_model_state(model=model)
    if state is None:
        raise UnsupportedObjectError(
            f"{argument} is a {type(model).__module__}.{type(model).__name__}, which no loaded plugin "
            "can read; install the plugin of its framework"
        )
    return dict(state)


def load_into(
    model: object,
    params: Mapping[str, np.ndarray],
    network: str,
    source: str,
    keep: Sequence[str] = (),
) -> LoadResult:
    """Load the entries of ``params`` that fit ``model`` (same name, same shape); report the rest.

    :param keep: network entries that are meant to get no value (the weight map's ``target_only``).
    """
    state = model_state(model, f"the {network} network")
    kept = set(keep)
    fitting = {n: a for n, a in params.items() if n in state and tuple(state[n].shape) == tuple(a.shape)}
    result = LoadResult(
        network=network,
        source=source,
        loaded=len(fitting),
        unused=[n for n in params if n not in state],
        missing=[n for n in state if n not in params and n not in kept],
        mismatched=[
            f"{n}: {tuple(a.shape)} vs {tuple(state[n].shape)}"
            for n, a in params.items()
            if n in state and tuple(state[n].shape) != tuple(a.shape)
        ],
    )
    if fitting:
        hook().ts_load_model_state(model=model, params=fitting)
    log.info("%s", result.summary())
    return result


def _file_params(path: str | os.PathLike[str], argument: str) -> CheckpointContents:
    try:
        return load_checkpoint(path)
    except TscoreError as exc:
        raise type(exc)(f"{argument}: {exc}") from exc


def load_file_into(model: object, path: str | os.PathLike[str], label: str, argument: str) -> LoadResult:
    """Load the checkpoint file at ``path`` into ``model`` by name; say what did not fit.

    :raises TscoreError: naming ``argument`` when the file cannot be read.
    """
    contents = _file_params(path, argument)
    return load_into(model, contents.params, label, os.fspath(path))


def identity_map(state: Mapping[str, np.ndarray], source: str, target: str) -> WeightMap:
    """Build the map for networks that keep the same names (MSAdapter): every name kept, no value changed."""
    return WeightMap({name: name for name in state}, {}, source, target)


def convert_and_load(
    orig: object, target: object, weight_map: WeightMap, labels: tuple[str, str]
) -> tuple[ConversionReport, LoadResult]:
    """Convert the orig network's state through ``weight_map`` in memory; load it into the target one."""
    state = CheckpointContents(
        path=f"{labels[0]} network", format="state_dict", params=model_state(orig, "pt_net")
    )
    params, rows = convert_params(state, weight_map, strict=False)
    report = ConversionReport(
        source_file=state.path,
        target_file=None,
        format="in memory",
        source=weight_map.source,
        target=weight_map.target,
        rows=rows,
    )
    source = f"the {labels[0]} weights" + (" converted" if weight_map.source != weight_map.target else "")
    return report, load_into(target, params, labels[1], source, weight_map.target_only)


def compare_states(
    orig: object,
    target: object,
    weight_map: WeightMap,
    labels: tuple[str, str],
    tolerances: tuple[float, float, bool],
) -> CheckpointDiff:
    """Compare the orig state, renamed through the map, with the target network's own state."""
    orig_side = CheckpointContents(
        path=f"{labels[0]} network", format="state_dict", params=model_state(orig, "pt_net")
    )
    target_side = CheckpointContents(
        path=f"{labels[1]} network", format="state_dict", params=model_state(target, "ms_net")
    )
    return diff_through_map(
        orig_side,
        target_side,
        weight_map,
        strict=False,
        labels=labels,
        rtol=tolerances[0],
        atol=tolerances[1],
        equal_nan=tolerances[2],
        ignore_target=weight_map.target_only,
    )


def set_weights(
    orig_net: object,
    target_net: object,
    weight_map: WeightMap | None,
    *,
    labels: tuple[str, str],
    orig_params_path: str | os.PathLike[str] | None,
    target_params_path: str | os.PathLike[str] | None,
    auto_conv_ckpt: int,
    compare_params: bool,
    tolerances: tuple[float, float, bool],
) -> WeightStage:
    """Give both networks their weights as spec 003's notes say, and compare them when asked."""
    loads: list[LoadResult] = []
    notes: list[str] = []
    if orig_params_path is not None:
        loads.append(load_file_into(orig_net, orig_params_path, labels[0], "pt_params_path"))

    def stage_of(mode: str) -> WeightStage:
        return WeightStage(mode=mode, loads=loads, notes=notes, orig_label=labels[0], target_label=labels[1])

    if target_params_path is not None:
        loads.append(load_file_into(target_net, target_params_path, labels[1], "ms_params_path"))
        return stage_of("loaded from files; not converted or compared (spec 003, notes 2 and 3)")
    if weight_map is None:
        notes.append("auto_conv_ckpt=0: the networks keep the weights they have; make sure they agree")
        return stage_of("as the networks had them")
    how = AUTO_CONV_MODES[auto_conv_ckpt]
    if weight_map.source == weight_map.target:
        how = "same framework, loaded by name"
    stage = stage_of(f"converted ({how})")
    if weight_map.needs_rule:
        rules = weight_map.needs_rule
        layers = sorted({name.rpartition(".")[0] or name for name in rules})
        stage.notes.append(
            f"{len(rules)} weight(s) of {len(layers)} layer(s) ({', '.join(layers[:3])}) were not "
            f"converted: {next(iter(rules.values()))}; write their names and transforms "
            "into a saved map (get_weight_map, then name_map and value_map) and pass weight_map="
        )
    if auto_conv_ckpt:
        stage.conversion, load = convert_and_load(orig_net, target_net, weight_map, labels)
        stage.loads.append(load)
        if auto_conv_ckpt == 2 and load.unused:
            stage.notes.append(
                f"auto_conv_ckpt=2 loads every weight under its {labels[0]} name, and {len(load.unused)} of "
                f"them are not names of the {labels[1]} network ({', '.join(load.unused[:3])}): it does not "
                "keep torch's names as an MSAdapter network does; pass auto_conv_ckpt=1 to convert through "
                "the weight map"
            )
    else:
        stage.mode = "as the networks had them (auto_conv_ckpt=0)"
    if compare_params:
        stage.comparison = compare_states(orig_net, target_net, weight_map, labels, tolerances)
    return stage
