"""A backend for a layer over another framework (``builds_on``): it answers first for the objects both
claim, and while its framework is imported the other's API capture stays out of a dump.

Two stand-in frameworks: ``basefw`` and ``layerfw``, whose tensors are basefw's (as mindtorch's are
MindSpore's). The real pair, ts_msadapter over ts_mindspore, runs in ``nox -s msadapter``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import numpy as np
import pytest

import tscore as ts
from tscore.plugin_api import Backend, HookHandles
from tscore.plugins import get_plugin_manager, hook


class Base:
    """A tensor of ``basefw``; ``layerfw`` hands out the same objects."""

    def __init__(self, values: list[float]) -> None:
        self.array = np.asarray(values, dtype=np.float32)
        self.shape = self.array.shape
        self.dtype = "float32"


class _Stand(Backend):
    """What both stand-ins share: they own ``Base`` objects and capture nothing but count installs."""

    def __init__(self) -> None:
        self.installs = 0

    def tensor_types(self) -> tuple[type, ...]:
        return (Base,)

    def to_numpy(self, tensor: Base, copy: bool) -> np.ndarray:
        return np.array(tensor.array, copy=copy)

    def tensor_stats(self, tensor: Base) -> tuple[float, float, float, float]:
        a = tensor.array.astype(np.float64)
        return float(a.max()), float(a.min()), float(a.mean()), float(np.linalg.norm(a))

    def install_api_hooks(self, recorder: object) -> HookHandles:
        self.installs += 1
        return HookHandles(label=f"{self.framework} stand-in capture")


class BaseBackend(_Stand):
    framework = "basefw"


class LayerBackend(_Stand):
    framework = "layerfw"
    builds_on = "basefw"


@pytest.fixture()
def both(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[BaseBackend, LayerBackend]]:
    monkeypatch.setitem(sys.modules, "basefw", types.ModuleType("basefw"))
    base, layer = BaseBackend(), LayerBackend()
    # the layer's plugin registered first: pluggy would ask the base's (registered later) first
    names = [ts.register_plugin(layer, "layerfw"), ts.register_plugin(base, "basefw")]
    yield base, layer
    for name in names:
        ts.unregister_plugin(name)


def test_with_its_framework_imported_the_layer_answers_for_the_objects_both_claim(both, monkeypatch) -> None:
    base, layer = both
    tensor = Base([1.0, -2.0])
    assert hook().ts_tensor_meta(obj=tensor).framework == "basefw"  # layerfw not imported: not its
    assert get_plugin_manager().covered_backends() == []
    monkeypatch.setitem(sys.modules, "layerfw", types.ModuleType("layerfw"))
    assert hook().ts_tensor_meta(obj=tensor).framework == "layerfw"
    assert get_plugin_manager().covered_backends() == [base]
    assert get_plugin_manager().backends()[0] is layer


def test_a_dump_installs_only_the_layer_s_capture_and_records_its_tensors(
    both, monkeypatch, tmp_path
) -> None:
    base, layer = both
    monkeypatch.setitem(sys.modules, "layerfw", types.ModuleType("layerfw"))
    debugger = ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1")
    debugger.start()
    recorder = debugger.recorder
    token = recorder.begin("Torch", "neg", (Base([1.0, -2.0]),), {})
    recorder.end(token, Base([-1.0, 2.0]))
    debugger.stop()
    assert (layer.installs, base.installs) == (1, 0)
    assert recorder.frameworks == ["layerfw"]
