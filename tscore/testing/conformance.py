"""The conformance kit: the tests every tscore backend passes, for any backend author to run.

A backend's test module derives one class from :class:`BackendConformance`
and supplies a few factories, in the manner of fsspec's abstract tests; it
then inherits every test below (pytest collects them from the subclass)::

    # tests/test_conformance.py of ts_jax
    from tscore.testing.conformance import BackendConformance

    class TestJaxConformance(BackendConformance):
        framework = "jax"

        def make_tensor(self, array): ...
        def make_network(self): ...          # Linear, Conv, BatchNorm, ReLU
        def network_inputs(self): ...
        def plant_epsilon(self, network): ...
        def run_backward(self, array, through): ...
        def backward_network(self, network, inputs): ...

The six factories are :data:`FACTORIES`; the backend author's guide (docs/writing-a-backend.md) names the same
(a test of tscore checks it). A hook the backend leaves unanswered makes the
tests that need it *skip*, with the reason, never pass: a skipped test in
your run is a capability your backend does not offer yet.

What it checks: tensors round-trip (bfloat16 bit for bit) and are claimed by
this backend alone with a neutral dtype; ``ts.save`` and ``ts.save_grad``
write the names and values every backend writes; model state and, where the
backend writes checkpoints, checkpoint files round-trip; the weight
conventions invert; every layer is listed once, parents first, and hooks come
off after use with every layer's mode (``ts_layer_training``) restored; the
layouts it declares (``ts_layer_layout``) put the channels where the BatchNorm's
weights say they are; and the difference finder,
given the network against a copy with one epsilon changed, names that layer,
in a report that names no other framework.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tscore as ts
from tscore import value_transforms as transforms
from tscore.checkpoint.files import load_checkpoint, save_checkpoint, suffix_kinds
from tscore.checkpoint.weight_map import build_weight_map
from tscore.dtypes import NEUTRAL_DTYPES
from tscore.layouts import check_layout, for_rank, to_neutral
from tscore.plugins import get_plugin_manager, hook

FACTORIES = (
    "make_tensor",
    "make_network",
    "network_inputs",
    "plant_epsilon",
    "run_backward",
    "backward_network",
)
ROUND_TRIP_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool")
WEIGHT_KINDS = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "batchnorm",
    "batchnorm1d",
    "batchnorm2d",
    "batchnorm3d",
    "instancenorm1d",
    "instancenorm2d",
    "instancenorm3d",
    "layernorm",
    "groupnorm",
    "embedding",
    "prelu",
    "rnn",
    "lstm",
    "gru",
    "multihead_attention",
)


class _Recorder:
    """Count layer calls and check that every ``enter`` has its ``leave``; keep each layer's first output."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.left: list[str] = []
        self.outputs: dict[str, object] = {}

    def enter(self, path: str, layer: object, args: tuple[Any, ...], kwargs: Any) -> None:
        self.entered.append(path)

    def leave(self, path: str, layer: object, output: object) -> None:
        self.left.append(path)
        if path not in self.outputs and ts.is_tensor(output):
            self.outputs[path] = ts.to_numpy(output, copy=True)


def _sample(dtype: str) -> np.ndarray:
    """Make a small array of ``dtype`` with awkward values where the dtype has them (-0.0, NaN, inf)."""
    if dtype == "bool":
        return np.array([True, False, True])
    target = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    if target.kind in "iu":
        info = np.iinfo(target)
        return np.array([info.min, 0, 1, info.max], dtype=target)
    return np.array([1.5, -0.0, -2.25, np.inf, np.nan, 3e-3], dtype=np.float32).astype(target)


def _fitting_array(spec: str) -> np.ndarray:
    """Make an array of distinct values, of the first rank (1 to 6) that ``spec`` applies to."""
    for rank in range(1, 7):
        shape = tuple(range(2, 2 + rank))
        array = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        for size_one in (None, *range(rank)):  # squeeze needs a size-1 axis somewhere
            candidate = array if size_one is None else np.expand_dims(array.take(0, size_one), size_one)
            try:
                transforms.apply(spec, candidate)
            except transforms.TransformError:
                continue
            return candidate
    raise AssertionError(f"no array of rank 1 to 6 fits the transform {spec!r}")


class BackendConformance:
    """Mix-in of the tests every backend passes; a subclass supplies ``framework`` and the factories.

    :cvar framework: the framework name the backend reports (``"torch"``).
    :cvar skip_dtypes: dtypes of :data:`ROUND_TRIP_DTYPES` the framework has no tensor for.
    :cvar stores_neutral_form: True for a framework that stores every layer kind's weights as the
        neutral form does (torch, and torch-API frameworks): it must answer no weight convention.
    """

    framework: str = ""
    skip_dtypes: Sequence[str] = ()
    stores_neutral_form: bool = False

    # ------------------------------------------------------------------ factories

    def make_tensor(self, array: np.ndarray) -> Any:
        """Return a tensor of the framework with ``array``'s values and dtype (``ml_dtypes`` for bfloat16)."""
        raise NotImplementedError

    def make_network(self) -> Any:
        """Return a small network with a convolution, a BatchNorm, a ReLU and a Linear layer, in eval mode."""
        raise NotImplementedError

    def network_inputs(self) -> tuple[tuple[tuple[int, ...], Any], ...]:
        """Return ``auto_inputs`` for the network: ``(((2, 3, 8, 8), np.float32),)``."""
        raise NotImplementedError

    def plant_epsilon(self, network: Any) -> str:
        """Change the epsilon of the network's BatchNorm to 0.5 in place; return that layer's path."""
        raise NotImplementedError

    def run_backward(self, array: np.ndarray, through: Callable[[Any], Any]) -> None:
        """Make ``x`` from ``array`` (tracking gradients), and run backward of ``(2 * through(x)).sum()``."""
        raise NotImplementedError

    def backward_network(self, network: Any, inputs: tuple[np.ndarray, ...]) -> Any:
        """Run backward of ``network(*inputs).sum()``; return what ``get_grads`` needs as ``grads``.

        ``None`` for a framework whose parameters keep their gradients (torch's ``.grad``), the
        gradients of the trainable parameters in order for one that returns them (MindSpore).
        """
        raise NotImplementedError

    # ------------------------------------------------------------------ tensors

    def test_the_plugin_is_loaded_and_names_its_framework(self) -> None:
        """The plugin is registered and answers ``ts_framework_info`` with ``framework``."""
        names = {info.name for info in hook().ts_framework_info()}
        assert self.framework in names, get_plugin_manager().records

    @pytest.mark.parametrize("dtype", ROUND_TRIP_DTYPES)
    def test_tensors_round_trip_bit_for_bit(self, dtype: str) -> None:
        """A tensor of each dtype comes back as the same bytes, and again through ``from_numpy``."""
        if dtype in self.skip_dtypes:
            pytest.skip(f"{self.framework} has no {dtype} tensor")
        array = _sample(dtype)
        tensor = self.make_tensor(array)
        assert ts.is_tensor(tensor)
        back = ts.to_numpy(tensor)
        assert back.dtype == array.dtype and back.shape == array.shape
        assert back.tobytes() == array.tobytes()
        again = ts.to_numpy(ts.from_numpy(back, self.framework))
        assert again.dtype == array.dtype and again.tobytes() == array.tobytes()

    def test_tensor_meta_uses_the_neutral_dtype_and_keeps_the_framework_spelling(self) -> None:
        """``tensor_meta`` gives the neutral dtype name and keeps the framework's own spelling."""
        meta = ts.tensor_meta(self.make_tensor(np.zeros((2, 3), dtype=ml_dtypes.bfloat16)))
        assert (meta.framework, meta.dtype, meta.shape) == (self.framework, "bfloat16", (2, 3))
        assert meta.dtype in NEUTRAL_DTYPES and meta.native_dtype
        assert ts.tensor_meta(self.make_tensor(np.zeros(2, np.float32))).dtype == "float32"

    def test_copies_do_not_follow_the_tensor(self) -> None:
        """``to_numpy(copy=True)`` never shares memory with the tensor."""
        tensor = self.make_tensor(np.arange(4, dtype=np.float32))
        copied = ts.to_numpy(tensor, copy=True)
        copied[0] = 99.0
        assert ts.to_numpy(tensor)[0] == 0.0

    def test_other_objects_are_not_claimed(self) -> None:
        """Plain Python objects are nobody's tensors or networks."""
        for obj in ([1.0], "text", object()):
            assert not ts.is_tensor(obj)
        assert hook().ts_model_info(model=object()) is None

    # ------------------------------------------------------------------ save and save_grad

    def test_save_writes_the_shared_names_and_values(self, tmp_path: Path) -> None:
        """``ts.save`` writes the names every backend writes, the values, and neutral metadata."""
        ts.reset_save_id()
        values = np.arange(6, dtype=np.float32).reshape(2, 3)
        ts.save(str(tmp_path / "x"), self.make_tensor(values))
        ts.save(str(tmp_path / "pair"), [self.make_tensor(values), self.make_tensor(values + 1)])
        names = sorted(p.name for p in tmp_path.glob("*.npy"))
        assert names == ["0_x.npy", "1_pair_0.npy", "1_pair_1.npy"]
        np.testing.assert_array_equal(np.load(tmp_path / "1_pair_1.npy"), values + 1)
        records = [json.loads(line) for line in (tmp_path / "tscore_meta.jsonl").read_text().splitlines()]
        assert {r["framework"] for r in records} == {self.framework}
        assert {r["dtype"] for r in records} == {"float32"}

    def test_save_grad_writes_the_gradient_when_backward_runs(self, tmp_path: Path) -> None:
        """``ts.save_grad`` writes the gradient reaching the tensor: 2 everywhere for ``(2 * x).sum()``."""
        ts.reset_save_id()
        array = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
        self.run_backward(array, lambda x: ts.save_grad(str(tmp_path / "x"), x))
        np.testing.assert_array_equal(
            np.load(tmp_path / "0_x_backward.npy"), np.full((2, 3), 2.0, np.float32)
        )

    def test_model_gradients_are_named_in_parameter_order(self) -> None:
        """``get_grads`` names each trainable parameter's gradient ``{name}_{index}``, in order."""
        network = self.make_network()
        grads = ts.widget.get_grads(network, self.backward_network(network, self._inputs()))
        state = hook().ts_model_state(model=network)
        names = [key.rpartition("_")[0] for key in grads]
        assert [int(key.rpartition("_")[2]) for key in grads] == list(range(len(grads)))
        assert len(names) >= 6 and set(names) <= set(state), names
        for key, name in zip(grads, names, strict=True):
            assert ts.to_numpy(grads[key]).shape == state[name].shape

    # ------------------------------------------------------------------ state and files

    def test_model_state_round_trips(self) -> None:
        """Changed state loads into the network and reads back exactly, in the same order."""
        network = self.make_network()
        state = hook().ts_model_state(model=network)
        assert state and all(isinstance(a, np.ndarray) for a in state.values())
        changed = {name: (a + 1).astype(a.dtype) if a.dtype.kind == "f" else a for name, a in state.items()}
        assert hook().ts_load_model_state(model=network, params=changed)
        again = hook().ts_model_state(model=network)
        assert list(again) == list(state)
        for name in state:
            np.testing.assert_array_equal(again[name], changed[name])

    def test_checkpoint_files_round_trip(self, tmp_path: Path) -> None:
        """The backend's own file kind when it has one, else safetensors, which every backend can share."""
        own = self._checkpoint_kinds()
        suffixes = [suffix for suffix, kind in suffix_kinds().items() if kind in own] or [".safetensors"]
        params = {
            "w": np.arange(6, dtype=np.float32).reshape(2, 3),
            "half": np.array([1.5, -0.0, 3.0], dtype=ml_dtypes.bfloat16),
            "steps": np.array(7, dtype=np.int64),
            **hook().ts_model_state(model=self.make_network()),
        }
        path = save_checkpoint(params, tmp_path / f"state{suffixes[0]}", framework=self.framework)
        contents = load_checkpoint(path)
        assert list(contents.params) == list(params)
        for name, array in params.items():
            got = contents.params[name]
            assert got.dtype == array.dtype and got.shape == array.shape and got.tobytes() == array.tobytes()

    def _checkpoint_kinds(self) -> set[str]:
        kinds: set[str] = set()
        for plugin in get_plugin_manager().get_plugins():
            if getattr(plugin, "framework", None) == self.framework:
                kinds.update(getattr(plugin, "checkpoint_kinds", ()))
        return kinds

    # ------------------------------------------------------------------ weight conventions

    def test_weight_conventions_invert(self) -> None:
        """Each convention names each entry once, and every transform it uses has an inverse.

        Kinds the backend answers None for are stored in the neutral form; a backend that answers
        for no kind at all (torch, the neutral form itself) skips.
        """
        answers = {
            kind: hook().ts_weight_convention(kind=kind, framework=self.framework) for kind in WEIGHT_KINDS
        }
        answered = {kind: answer for kind, answer in answers.items() if answer is not None}
        if self.stores_neutral_form:
            assert not answered, (
                f"{self.framework} stores the neutral form, yet answers for {sorted(answered)}"
            )
            return
        if not answered:
            pytest.skip(
                f"{self.framework} stores every kind in the neutral form (ts_weight_convention: None)"
            )
        failures = []
        for kind, answer in answered.items():  # every kind checked, every failure reported
            try:
                self._check_convention(kind, answer)
            except (AssertionError, transforms.TransformError) as exc:
                failures.append(f"{kind}: {exc}")
        assert not failures, "; ".join(failures)

    def _check_convention(self, kind: str, answer: Any) -> None:
        if answer.get("needs_rule"):
            assert isinstance(answer["needs_rule"], str) and not answer.get("names"), (
                f"{kind}: needs_rule says why in words, and then no names are given"
            )
            return
        names = {k: v for k, v in answer.get("names", {}).items() if v is not None}
        assert len(set(names.values())) == len(names), (
            f"{kind}: two neutral names share one {self.framework} name"
        )
        for neutral, spec in answer.get("transforms", {}).items():
            undo = transforms.inverse(spec)
            assert transforms.compose(spec, undo) is None, f"{kind}.{neutral}: {spec} then {undo}"
            array = _fitting_array(spec)
            back = transforms.apply(undo, transforms.apply(spec, array))
            assert back.shape == array.shape and np.array_equal(back, array), f"{kind}.{neutral}: {spec}"

    def test_dump_api_names_are_a_well_formed_table(self) -> None:
        """Each dumped API the backend names is one neutral operation with named slots; none is dropped."""
        answer = hook().ts_dump_api_names(framework=self.framework)
        if answer is None:
            pytest.skip(
                f"{self.framework} names no dumped API (ts_dump_api_names): its dumps pair by name only"
            )
        from tscore.dump_compare.api_names import api_table

        table = api_table(self.framework)
        assert set(table) == set(answer), f"entries left out: {sorted(set(answer) - set(table))}"
        for api, entry in table.items():
            assert api.count(".") >= 1 and entry.op, f"{api}: 'Prefix.api' naming a neutral op"
            assert len(set(entry.inputs)) == len(entry.inputs), f"{api}: an input slot named twice"

    def test_a_network_maps_to_its_own_framework_by_name(self) -> None:
        """Two networks of one framework need no renaming and no transform."""
        network = self.make_network()
        weight_map = build_weight_map(network, target=self.framework)
        assert weight_map.source == weight_map.target == self.framework
        assert all(source == target for source, target in weight_map.name_map.items())
        assert weight_map.value_map == {}

    # ------------------------------------------------------------------ layers and hooks

    def test_layers_are_listed_root_first_and_own_every_state_entry_once(self) -> None:
        """Layers come root first, parents before children, and own each state entry once."""
        network = self.make_network()
        layers = list(hook().ts_named_layers(model=network))
        assert layers[0].path == "" and layers[0].layer is network
        seen = {layer.path for layer in layers}
        for layer in layers[1:]:
            assert layer.parent in seen, f"{layer.path} listed without its parent"
        owned = [name for layer in layers for name in layer.params]
        assert sorted(owned) == sorted(hook().ts_model_state(model=network))
        kinds = {layer.kind for layer in layers}
        assert {"linear", "relu"} <= kinds and any(k.startswith("conv") for k in kinds)
        assert any(k.startswith("batchnorm") for k in kinds)

    def test_module_hooks_report_every_call_and_come_off(self) -> None:
        """Hooks report every layer call, enter and leave paired, and none fires after ``remove()``."""
        network = self.make_network()
        inputs = self._inputs()
        recorder = _Recorder()
        handles = hook().ts_install_module_hooks(model=network, recorder=recorder)
        hook().ts_run_forward(model=network, args=inputs, kwargs={}, train=False)
        assert "" in recorder.entered and sorted(recorder.entered) == sorted(recorder.left)
        calls = len(recorder.entered)
        handles.remove()
        hook().ts_run_forward(model=network, args=inputs, kwargs={}, train=False)
        assert len(recorder.entered) == calls, "hooks still fire after remove()"

    def test_run_forward_runs_in_the_asked_mode(self) -> None:
        """Train mode updates the BatchNorm statistics, eval mode does not."""
        network = self.make_network()
        before = hook().ts_model_state(model=network)
        hook().ts_run_forward(model=network, args=self._inputs(), kwargs={}, train=False)
        after_eval = hook().ts_model_state(model=network)
        assert all(np.array_equal(before[n], after_eval[n]) for n in before), "eval mode changed the state"
        hook().ts_run_forward(model=network, args=self._inputs(), kwargs={}, train=True)
        after_train = hook().ts_model_state(model=network)
        assert any(not np.array_equal(before[n], after_train[n]) for n in before), "train mode was not used"

    def test_run_forward_gives_every_layer_its_own_mode_back(self) -> None:
        """After runs in both modes every layer is in the mode it had, as ``ts_layer_training`` reads it."""
        network = self.make_network()
        layers = [layer.layer for layer in hook().ts_named_layers(model=network)]
        modes = [hook().ts_layer_training(layer=layer) for layer in layers]
        if all(mode is None for mode in modes):
            pytest.skip(f"{self.framework} reads no layer's mode (ts_layer_training answers None)")
        for train in (True, False):
            hook().ts_run_forward(model=network, args=self._inputs(), kwargs={}, train=train)
            assert [hook().ts_layer_training(layer=layer) for layer in layers] == modes, (
                f"after train={train}"
            )

    def test_declared_layouts_put_the_channels_where_the_batchnorm_has_them(self) -> None:
        """A BatchNorm's output read in its declared layout has its channels on axis 1 (the neutral form)."""
        network = self.make_network()
        layers = list(hook().ts_named_layers(model=network))
        norms = [layer for layer in layers if layer.kind.startswith("batchnorm")]
        assert norms, "make_network must hold a BatchNorm (its kind batchnorm, batchnorm2d, ...)"
        layout = hook().ts_layer_layout(layer=norms[0].layer, kind=norms[0].kind)
        if layout is None:
            pytest.skip(
                f"{self.framework} declares no layouts (ts_layer_layout): the finder says 'cannot tell' "
                "wherever another framework's shapes are the same axes in another order"
            )
        check_layout(layout, f"{norms[0].path}'s layout")
        state = hook().ts_model_state(model=network)
        channels = {state[name].size for name in norms[0].params if state[name].ndim == 1}
        recorder = _Recorder()
        with hook().ts_install_module_hooks(model=network, recorder=recorder):
            hook().ts_run_forward(model=network, args=self._inputs(), kwargs={}, train=False)
        output = recorder.outputs[norms[0].path]
        assert isinstance(output, np.ndarray)
        axes = for_rank(layout, output.ndim)
        neutral = to_neutral(output, axes) if axes else output
        assert len(channels) == 1 and neutral.shape[1] in channels, (
            f"{norms[0].path} declares {layout}: its output {output.shape} reads as {neutral.shape}, "
            f"but it normalises {channels} channels"
        )

    def _inputs(self) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(0)
        return tuple(rng.standard_normal(shape).astype(dtype) for shape, dtype, *_ in self.network_inputs())

    # ------------------------------------------------------------------ the finder

    def test_the_finder_names_a_planted_epsilon_and_no_other_framework(self) -> None:
        """The finder names the BatchNorm whose epsilon changed, and the report names no other framework."""
        reference, planted = self.make_network(), self.make_network()
        path = self.plant_epsilon(planted)
        finder = ts.migrator.NetDifferenceFinder(reference, planted, print_level=0)
        report = finder.compare(auto_inputs=self.network_inputs())
        assert not report.passed
        first = report.first_divergence
        assert first is not None and first.orig_path == first.target_path == path, report.render()
        assert [s.name for s in first.settings] == ["eps"]
        text = report.render() + report.to_json()
        others = {info.name for info in hook().ts_framework_info()} - {self.framework, "numpy"}
        for other in others:
            assert other.lower() not in text.lower(), f"the report names {other}"
        assert report.weights is not None and report.weights.passed
