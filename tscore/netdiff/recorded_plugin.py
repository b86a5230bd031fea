"""The built-in plugin that lets a recorded network (:mod:`tscore.netdiff.recorded`) stand in for it.

Registered when :mod:`tscore.netdiff` is imported; it answers only for a
:class:`~tscore.netdiff.recorded.RecordedNetwork`:
its framework and device as recorded, its layers, weights and state, module
hooks that replay the recorded calls, and a forward that returns the
recorded output for the recorded inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tscore.contract.layers import HookHandles, LayerInfo, ModuleRecorder
from tscore.contract.tensors import ModelInfo
from tscore.hookspecs import hookimpl
from tscore.netdiff.recorded import RecordedNetwork, RecordingError


def _recorded(model: object) -> Any:
    return model if isinstance(model, RecordedNetwork) else None


@hookimpl(trylast=True)
def ts_model_info(model: object) -> ModelInfo | None:
    """Name the recorded network's framework and device."""
    net = _recorded(model)
    return None if net is None else ModelInfo(framework=net.framework, device=net.device)


@hookimpl(trylast=True)
def ts_named_layers(model: object) -> Sequence[LayerInfo] | None:
    """List the recorded layers (no layer objects: a recorded side is never replayed)."""
    net = _recorded(model)
    return None if net is None else list(net.layers)


@hookimpl(trylast=True)
def ts_layer_params(model: object) -> Sequence[tuple[str, str, Sequence[str]]] | None:
    """List the recorded weight-owning layers."""
    net = _recorded(model)
    return None if net is None else list(net.layer_params)


@hookimpl(trylast=True)
def ts_model_state(model: object) -> dict[str, np.ndarray] | None:
    """Return copies of the recorded parameters and buffers."""
    net = _recorded(model)
    return None if net is None else {name: array.copy() for name, array in net.state.items()}


@hookimpl(trylast=True)
def ts_load_model_state(model: object, params: Mapping[str, np.ndarray]) -> bool | None:
    """Refuse: a recorded network keeps the weights it ran with."""
    net = _recorded(model)
    if net is None:
        return None
    raise RecordingError(
        f"{net.source or 'a recorded network'} keeps the weights it was recorded with: load a checkpoint "
        "into the network before recording it (record_network, tscore diff --record), not into the recording"
    )


@hookimpl(trylast=True)
def ts_install_module_hooks(model: object, recorder: ModuleRecorder) -> HookHandles | None:
    """Attach ``recorder``: the next forward replays the recorded calls to it."""
    net = _recorded(model)
    if net is None:
        return None
    net.replaying.append(recorder)
    handles = HookHandles(label="replay of a recorded network")
    handles.add(lambda: net.replaying.remove(recorder))
    return handles


@hookimpl(trylast=True)
def ts_run_forward(model: object, args: Sequence[Any], kwargs: Mapping[str, Any], train: bool) -> Any:
    """Return the recorded output for the recorded inputs, replaying the calls to attached recorders."""
    net = _recorded(model)
    if net is None:
        return None
    case = net.case_for(tuple(args))
    net.replay(case)
    return case.output
