"""The Backend base: ownership said once, only overridden capabilities registered, neutral dtypes."""

from __future__ import annotations

import sys
import types

import ml_dtypes
import numpy as np
import pytest

import tscore as ts
from tscore.dtypes import neutral_dtype
from tscore.plugin_api import Backend
from tscore.plugins import get_plugin_manager, hook


class Crate:
    """A tensor of the imaginary framework ``cratefw``: a numpy array in a box."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.shape = array.shape
        self.dtype = f"cratefw.{array.dtype.name}"


class CrateNet:
    """A network of ``cratefw``."""


class CrateBackend(Backend):
    framework = "cratefw"

    def tensor_types(self) -> tuple[type, ...]:
        return (sys.modules["cratefw"].Crate,)

    def model_types(self) -> tuple[type, ...]:
        return (sys.modules["cratefw"].CrateNet,)

    def tensor_device(self, tensor: Crate) -> str:
        return "crate:0"

    def to_numpy(self, tensor: Crate, copy: bool) -> np.ndarray:
        return np.array(tensor.array, copy=copy)

    def from_numpy(self, array: np.ndarray, like: object) -> Crate:
        return Crate(np.array(array))


@pytest.fixture()
def cratefw(monkeypatch: pytest.MonkeyPatch):
    module = types.ModuleType("cratefw")
    module.Crate, module.CrateNet = Crate, CrateNet  # type: ignore[attr-defined]
    name = ts.register_plugin(CrateBackend(), "cratefw")
    yield module, name
    ts.unregister_plugin(name)
    monkeypatch.delitem(sys.modules, "cratefw", raising=False)


def test_only_the_overridden_capabilities_become_hooks(cratefw) -> None:
    _, name = cratefw
    hooks = set(get_plugin_manager().records[name].hooks)
    assert {"ts_is_tensor", "ts_to_numpy", "ts_from_numpy", "ts_tensor_meta", "ts_model_info"} <= hooks
    assert not hooks & {"ts_run_forward", "ts_named_layers", "ts_load_checkpoint", "ts_seed_all"}


def test_nothing_is_claimed_before_the_framework_is_imported(cratefw, monkeypatch) -> None:
    module, _ = cratefw
    crate = Crate(np.ones(2, np.float32))
    assert not ts.is_tensor(crate)  # cratefw not in sys.modules: cannot be one of its tensors
    monkeypatch.setitem(sys.modules, "cratefw", module)
    assert ts.is_tensor(crate)
    meta = ts.tensor_meta(Crate(np.zeros(3, ml_dtypes.bfloat16)))
    assert (meta.framework, meta.dtype, meta.native_dtype, meta.device) == (
        "cratefw",
        "bfloat16",
        "cratefw.bfloat16",
        "crate:0",
    )
    assert ts.to_numpy(crate).tobytes() == crate.array.tobytes()
    assert isinstance(ts.from_numpy(np.ones(2), "cratefw"), Crate)
    info = hook().ts_model_info(model=CrateNet())
    assert info is not None and info.label() == "cratefw (cpu)"
    assert hook().ts_model_info(model=object()) is None


def test_a_network_of_a_framework_without_layers_cannot_get_a_weight_map(cratefw, monkeypatch) -> None:
    module, _ = cratefw
    monkeypatch.setitem(sys.modules, "cratefw", module)
    with pytest.raises(ts.UnsupportedObjectError, match="cratefw plugin does not list the layers"):
        ts.migrator.get_weight_map(CrateNet(), target="cratefw")


class LayeredCrateBackend(CrateBackend):
    """Lists the layers of a network that has them, and cannot read any network's state."""

    def layer_params(self, model: CrateNet) -> list[tuple[str, str, list[str]]] | None:
        return getattr(model, "layers", None)


def test_a_target_whose_plugin_cannot_answer_leaves_the_names_to_pair_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    module = types.ModuleType("cratefw")
    module.Crate, module.CrateNet = Crate, CrateNet  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cratefw", module)
    name = ts.register_plugin(LayeredCrateBackend(), "cratefw_layers")
    try:
        source, target = CrateNet(), CrateNet()
        source.layers = [("body", "linear", ["weight"]), ("head", "linear", ["weight"])]  # type: ignore[attr-defined]
        weight_map = ts.migrator.get_weight_map(source, ms_net=target)
        assert weight_map.alignment == ()
        assert weight_map.name_map == {"body.weight": "body.weight", "head.weight": "head.weight"}
        assert "ms_net is a" in caplog.text and "paired by their names only" in caplog.text
        target.layers = [("trunk", "linear", ["weight"]), ("fc", "linear", ["weight"])]  # type: ignore[attr-defined]
        caplog.clear()
        weight_map = ts.migrator.get_weight_map(source, ms_net=target)
        assert weight_map.alignment == () and "cannot read its state (ts_model_state)" in caplog.text
    finally:
        ts.unregister_plugin(name)


@pytest.mark.parametrize(
    ("spelling", "neutral"),
    [
        ("torch.bfloat16", "bfloat16"),
        ("BFloat16", "bfloat16"),
        ("paddle.float32", "float32"),
        ("Float32", "float32"),
        (np.dtype("float16"), "float16"),
        ("torch.half", "float16"),
        ("Int64", "int64"),
        ("torch.float8_e4m3fn", "float8_e4m3fn"),
        ("Float8E4M3FN", "float8_e4m3fn"),
        ("bool_", "bool"),
        ("cratefw.quaternion", "quaternion"),
    ],
)
def test_every_framework_spelling_has_one_neutral_name(spelling: object, neutral: str) -> None:
    assert neutral_dtype(spelling) == neutral


class ListingOnly(Backend):
    framework = "listingfw"

    def model_types(self) -> tuple[type, ...]:
        return (CrateNet,)

    def layer_params(self, model: object) -> list[tuple[str, str, list[str]]]:
        return [("fc", "linear", ["weight"])]


class WritingOnly(Backend):
    framework = "writingfw"
    checkpoint_kinds = ("wfw",)
    checkpoint_suffixes = {".wfw": "wfw"}  # noqa: RUF012

    def save_checkpoint(self, params: object, path: str, format: str) -> None:
        raise NotImplementedError


def test_a_capability_with_two_methods_is_registered_for_either() -> None:
    for backend in (ListingOnly(), WritingOnly()):
        name = ts.register_plugin(backend, backend.framework)
        try:
            hooks = set(get_plugin_manager().records[name].hooks)
        finally:
            ts.unregister_plugin(name)
        expected = "ts_layer_params" if backend.framework == "listingfw" else "ts_checkpoint_suffixes"
        assert expected in hooks, hooks
