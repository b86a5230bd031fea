"""tscore backend for MindSpore.

Loading this module never imports MindSpore: :class:`MindSporeBackend`
claims an object only when ``mindspore`` is already in ``sys.modules``. The
module refuses to load when MindSpore is not installed at all, so tscore
skips it with one warning.

Graph mode: when the plugin is registered, :meth:`MindSporeBackend.prepare_runtime`
tells MindSpore's compiler to run ``tscore`` functions at run time (see
:mod:`ts_mindspore.graph_mode`) and to compile ``tscore.save_grad``, which
asks :meth:`~MindSporeBackend.compiled_grad_hook` for an ``InsertGradientOf``
primitive while the graph is being built. The gradient callback lives in
this package, which MindSpore compiles into the backward graph; the callback
it calls is a tscore function, which MindSpore runs at run time with the
real gradient.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from tscore.plugin_api import (
    Backend,
    GraphNode,
    HookHandles,
    LayerInfo,
    ModuleRecorder,
    Runtime,
    array_stats,
    layout_from_attributes,
    read_package_json,
)

if importlib.util.find_spec("mindspore") is None:
    raise ImportError("ts_mindspore needs MindSpore, which is not installed (pip install mindspore)")

log = logging.getLogger(__name__)

FRAMEWORK = "mindspore"


def _ml_dtype(name: str) -> np.dtype | None:
    """Return the ml_dtypes type called ``name`` (MindSpore registers look-alikes of its own)."""
    found = getattr(ml_dtypes, name, None)
    return np.dtype(found) if found is not None else None


def _pass_gradient_through(callback: Callable[[object], None]) -> Callable[[Any], Any]:
    """Wrap ``callback`` as an ``InsertGradientOf`` function: see the gradient, return it unchanged."""
    from mindspore import mutable

    def save_then_pass(grad: Any) -> Any:
        # mutable: a gradient that is constant (ones, from ``sum()``) would
        # otherwise make MindSpore run the callback once while compiling,
        # and never again.
        callback(mutable(grad))
        return grad

    return save_then_pass


def _trainable_names(net: Any) -> list[str]:
    """Names of ``net``'s trainable parameters, in ``trainable_params()`` order.

    ``Parameter.name`` changes when a Cell is wrapped in another one, so the
    names come from ``parameters_and_names()`` of ``net`` itself.
    """
    by_id = {id(p): name for name, p in net.parameters_and_names()}
    return [by_id.get(id(p), p.name) for p in net.trainable_params()]


class MindSporeBackend(Backend):
    """Tensors, gradients (PyNative and graph mode), networks and weight names of MindSpore."""

    framework = FRAMEWORK

    def tensor_types(self) -> tuple[type, ...]:
        """``mindspore.Tensor`` and ``Parameter``."""
        return (sys.modules["mindspore"].Tensor,)

    def model_types(self) -> tuple[type, ...]:
        """``mindspore.nn.Cell``."""
        return (sys.modules["mindspore"].nn.Cell,)

    _target: str | None = None  # the device target read when the API capture was installed
    _pipeline: Any = None  # statistics launched into PyNative's pipeline while the capture is installed (CPU)

    def _device_target(self) -> str:
        """Return the device target; while a dump runs, as read at its start (get_context: 25 us a call)."""
        if self._target is not None:
            return self._target
        return str(sys.modules["mindspore"].get_context("device_target"))

    def tensor_device(self, tensor: Any) -> str:
        """Return the context's device target (``CPU``, ``Ascend``), where MindSpore runs every tensor.

        Not ``Tensor.device``: in PyNative it waits for every queued kernel (2 ms a call in a dump).
        """
        return self._device_target()

    def model_device(self, model: Any) -> str:
        """Return the context's device target: MindSpore places a whole network on it."""
        return str(sys.modules["mindspore"].get_context("device_target"))

    def to_numpy(self, tensor: Any, copy: bool) -> np.ndarray:
        """Copy a MindSpore tensor or Parameter to a host numpy array of the same dtype.

        MindSpore hands bfloat16 and float8 out as numpy dtypes of its own; they
        are reinterpreted, bit for bit, as the ``ml_dtypes`` types of the same
        name. Formats ml_dtypes lacks (``hifloat8``) are widened to float32.
        """
        array = tensor.asnumpy()
        if array.dtype.kind == "V" and array.dtype.fields is None:
            target = _ml_dtype(array.dtype.name)
            if target is None or target.itemsize != array.dtype.itemsize:
                array = tensor.astype(sys.modules["mindspore"].float32).asnumpy()
            else:
                carrier = np.dtype(f"u{array.dtype.itemsize}")
                array = array.view(carrier).view(target)
        # asnumpy() shares the tensor's memory on CPU: copy when asked.
        return np.array(array, copy=True, order="C") if copy else np.asarray(array, order="C")

    def from_numpy(self, array: np.ndarray, like: Any | None) -> Any:
        """Make a MindSpore tensor from a numpy array (ml_dtypes bfloat16/float8 included)."""
        import mindspore as ms

        if array.dtype.kind == "V":
            ms_dtype = getattr(ms, array.dtype.name, None)
            if ms_dtype is None:
                raise TypeError(f"MindSpore has no dtype {array.dtype.name!r}")
            return ms.Tensor(array.astype(np.float32), dtype=ms_dtype)
        return ms.Tensor(np.array(array, copy=True, order="C"))

    def attach_grad_hook(self, tensor: Any, callback: Callable[[object], None]) -> Any:
        """Pass ``tensor`` through an ``InsertGradientOf`` that hands its gradient to ``callback``."""
        from mindspore import ops

        return ops.InsertGradientOf(_pass_gradient_through(callback))(tensor)

    def compiled_grad_hook(self, callback: Callable[[object], None]) -> Any:
        """While MindSpore compiles a graph, give it an ``InsertGradientOf`` that calls ``callback``."""
        from ts_mindspore.graph_mode import compiling

        if not compiling():
            return None
        from mindspore import ops

        return ops.InsertGradientOf(_pass_gradient_through(callback))

    def model_grads(self, model: Any, grads: object | None) -> dict[str, object]:
        """Name the gradients that ``grad``/``value_and_grad`` returned for ``model.trainable_params()``.

        Accepts the plain tuple of gradients or the ``(name, grad)`` pairs of
        ``return_ids=True``. Keys are ``{name}_{index}``. With ``grads=None``, the gradients
        the dump's parameter hooks caught (``install_module_hooks``), else an error.
        """
        if grads is None:
            from ts_mindspore.cells import CAPTURED_GRADS

            kept = CAPTURED_GRADS.pop(model, None)
            if kept:  # what the dump's parameter hooks caught during the step
                names = _trainable_names(model)
                return {f"{name}_{index}": kept[name] for index, name in enumerate(names) if name in kept}
            raise ValueError(
                "get_grads: MindSpore parameters do not keep their gradients; pass the gradients "
                "that ms.grad/value_and_grad returned for net.trainable_params()"
            )
        values = list(grads)  # type: ignore[call-overload]
        if values and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) for v in values):
            return {f"{name}_{index}": grad for index, (name, grad) in enumerate(values)}
        names = _trainable_names(model)
        if len(values) != len(names):
            raise ValueError(
                f"get_grads: {len(values)} gradients for {len(names)} trainable parameters of "
                f"{type(model).__name__}; pass the gradients of net.trainable_params() in order"
            )
        return {f"{name}_{index}": grad for index, (name, grad) in enumerate(zip(names, values, strict=True))}

    def seed(self, seed: int, deterministic: bool) -> None:
        """Seed MindSpore; with ``deterministic`` switch on its deterministic kernels."""
        import mindspore as ms

        ms.set_seed(seed)
        # MindSpore takes set_deterministic once a process (a second call raises, also with the
        # same value): seed_all called again (msprobe's loop, a test suite) leaves it as it is
        if deterministic and ms.get_context("deterministic") != "ON":
            ms.set_deterministic(True)

    def prepare_runtime(self, runtime: Runtime) -> None:
        """Run tscore at run time in graph mode; compile ``save_grad`` (:mod:`ts_mindspore.graph_mode`)."""
        from ts_mindspore.graph_mode import declare_runtime

        declare_runtime(runtime)

    def install_api_hooks(self, recorder: Any) -> HookHandles:
        """Report every API call in PyNative mode (:mod:`ts_mindspore.api_capture`).

        In graph mode the Python wrappers would be compiled into nothing: no wrapper is
        installed, and one warning says that only cell-level records are made.
        """
        import mindspore as ms

        if ms.get_context("mode") != ms.PYNATIVE_MODE:
            log.warning(
                "dump: MindSpore runs in graph mode, where API calls are compiled and cannot be seen "
                "from Python; only cell-level records (L0) are made. Use PYNATIVE_MODE for API records."
            )
            return HookHandles([], label="MindSpore API capture (graph mode: none)")
        from ts_mindspore.api_capture import ApiCapture

        target = str(ms.get_context("device_target"))
        # on CPU, statistics are worked out in PyNative's pipeline (ts_mindspore.pipeline_stats);
        # its drain runs last when the hooks come off, after the capture has stopped launching
        pipeline = self._start_pipeline() if target == "CPU" and not recorder.reads_values else None
        handles = HookHandles([self._end_capture], label="MindSpore API capture")
        if pipeline is not None:
            handles.add(pipeline.drain)
        try:
            after_call = pipeline.raise_taken_error if pipeline is not None else None
            capture = ApiCapture(recorder, after_call).install()
        except BaseException:
            handles.remove()
            raise
        handles.add(capture.remove)
        self._target = target
        self._pipeline = pipeline
        return handles

    def _host_view(self, tensor: Any) -> np.ndarray:
        """Return the tensor's host memory as an array, after waiting for the pipeline (not a copy)."""
        return self.to_numpy(tensor, False)

    def _start_pipeline(self) -> Any:
        from ts_mindspore.pipeline_stats import PipelineStats

        try:
            return PipelineStats()
        except Exception as exc:  # statistics are then read per tensor, as before
            log.warning("dump: MindSpore statistics are read per tensor (no pipeline operator): %s", exc)
            return None

    def _end_capture(self) -> None:
        """Forget the device target and the pipeline statistics read when the capture was installed."""
        self._target = None
        self._pipeline = None

    def tensor_stats(self, tensor: Any) -> Any:
        """Max, min, mean and L2 norm: from host memory on CPU, else four 0-d tensors on the device.

        On CPU the tensor is already in host memory: ``array_stats`` summarises it (one compiled
        pass), which costs a PyNative step far less than six more operators in MindSpore's pipeline (a dumped
        encoder step went from 6.4x to 1.4x the plain one). While a dump runs, that happens
        either at once (``asnumpy`` waits for the pipeline) or inside the pipeline, in its turn,
        whichever was timed cheaper (:mod:`ts_mindspore.pipeline_stats`); then the writer's
        thread waits for the numbers (their ``tolist()``). On a device, MindSpore computes them
        outside autodiff: half and integer tensors in float32 (float64 for 64-bit integers),
        complex ones by their magnitudes; the norm is ``sqrt(sum(x * x))``, since MindSpore's CPU
        build lacks ``LinalgVectorNorm``.
        """
        import mindspore as ms

        if self._device_target() == "CPU":
            if self._pipeline is not None and tensor.size != 0:  # read at once, or launched (pipeline_stats)
                return self._pipeline.stats(tensor, self._host_view)
            return array_stats(self.to_numpy(tensor, False))
        if tensor.size == 0:
            return None
        wide = (ms.float32, ms.float64)
        t = tensor
        with ms._no_grad():
            if t.dtype in (ms.complex64, ms.complex128):
                t = ms.ops.ComplexAbs()(t)  # the magnitudes, as the torch backend summarises complex
            if t.dtype not in wide:
                t = t.astype(ms.float64 if t.dtype in (ms.int64, ms.uint64) else ms.float32)
            # four 0-d tensors: ops.stack goes through a slow PyNative path (3 ms a call here)
            return t.max(), t.min(), t.mean(), (t * t).sum().sqrt()

    def tensor_requires_grad(self, tensor: Any) -> bool | None:
        """Return a ``Parameter``'s ``requires_grad``; None for other tensors (MindSpore does not say).

        Read from the parameter's info object directly: the ``requires_grad`` property waits
        for the whole PyNative pipeline first (``wait_pipeline``), once per parameter and call.
        """
        import mindspore as ms

        if not isinstance(tensor, ms.Parameter):
            return None
        info = getattr(tensor, "_param_info", None)
        return bool(tensor.requires_grad if info is None else info.requires_grad)

    def tensor_abs_max(self, tensor: Any) -> Any:
        """Return the largest |x| (NaN, inf kept): a float on CPU, else a 0-d tensor; None: not floating."""
        import mindspore as ms

        if tensor.size == 0 or tensor.dtype not in (ms.float16, ms.bfloat16, ms.float32, ms.float64):
            return None
        if self._device_target() == "CPU":  # in host memory already: no operator launched
            values = self.to_numpy(tensor, False).reshape(-1)
            if values.dtype.itemsize < 4:
                values = values.astype(np.float32)
            with np.errstate(all="ignore"):
                return float(np.max(np.abs(values)))  # NaN when one is there, inf when one is there
        with ms._no_grad():
            if tensor.dtype == ms.bfloat16:  # no bfloat16 Maximum on CPU; float32 holds its values exactly
                tensor = tensor.astype(ms.float32)
            largest = ms.ops.maximum(tensor.max(), tensor.min().neg())
            # MindSpore's max and min skip a NaN that is not first: ask for NaN apart
            nan = ms.ops.fill(tensor.dtype, (), float("nan"))
            return ms.ops.select(ms.ops.isnan(tensor).any(), nan, largest)

    def tensor_finite_probe(self, tensor: Any) -> Any:
        """Return the sum of a float32 or float64 CPU tensor (numpy, host memory); None elsewhere.

        On a device, and for other dtypes, the check asks :meth:`tensor_abs_max` instead.
        """
        import mindspore as ms

        if tensor.dtype not in (ms.float32, ms.float64) or tensor.size == 0 or self._device_target() != "CPU":
            return None
        with np.errstate(all="ignore"):  # a sum that overflows is inf: the check then asks abs max
            return float(self.to_numpy(tensor, False).sum())

    def tensor_key(self, tensor: Any) -> Any:
        """None: MindSpore keeps no counter that moves when a tensor is changed in place."""
        return None

    def dump_api_names(self) -> Mapping[str, Mapping[str, Any]]:
        """Answer ``ts_dump_api_names``: MindSpore's dumped APIs as neutral operations (a data file)."""
        return read_package_json("ts_mindspore", "dump_api_names.json")  # type: ignore[no-any-return]

    def read_graph_file(self, path: str) -> list[GraphNode] | None:
        """Answer ``ts_read_graph_file``: an ANF IR ``.pb`` as graph records; None for other files."""
        from ts_mindspore.ir_graph import read_ir_graph

        return read_ir_graph(path)

    def read_print_file(self, path: str) -> list[str | np.ndarray] | None:
        """Answer ``ts_read_print_file``: MindSpore's binary print file as its items; None for other files."""
        from ts_mindspore.print_file import read_print_file

        return read_print_file(path)

    def native_dump(self, folder: str, model: object) -> Any:
        """In graph mode, arm MindSpore's own kernel dump (:mod:`ts_mindspore.native_dump`); else None."""
        import mindspore as ms

        if ms.get_context("mode") != ms.GRAPH_MODE:
            return None
        from ts_mindspore.native_dump import MindSporeNativeDump

        names = None
        if isinstance(model, ms.nn.Cell):
            names = {param.name for param in model.get_parameters()}
        return MindSporeNativeDump(folder, names, rank=lambda: self.current_rank() or 0)

    def current_rank(self) -> int | None:
        """Return MindSpore's rank once its communication is initialised (``init()``), else None."""
        helper = sys.modules.get("mindspore.communication._comm_helper")
        if helper is None or not helper._is_initialized():
            return None
        from mindspore.communication import get_rank

        return int(get_rank())

    def weight_convention(self, kind: str) -> Mapping[str, Any] | None:
        """How ``mindspore.nn`` names and lays out a layer kind's weights (BatchNorm: gamma, beta ...)."""
        from ts_mindspore.weight_convention import weight_convention

        return weight_convention(kind)

    def layer_params(self, model: Any) -> Sequence[tuple[str, str, Sequence[str]]]:
        """List the weight-owning cells; a BatchNorm3d owns its ``bn2d`` cell's parameters."""
        from ts_mindspore.cells import layer_params

        return layer_params(model)

    def named_layers(self, model: Any) -> list[LayerInfo]:
        """List every cell with its kind, own parameters and settings."""
        from ts_mindspore.cells import named_layers

        return named_layers(model)

    def layer_layout(self, layer: Any, kind: str) -> str | None:
        """Read a cell's ``data_format`` (``format`` on BatchNorm and pooling); channels first unless set."""
        return layout_from_attributes(layer, kind, ("data_format", "format"), default="channels_first")

    def install_module_hooks(self, model: Any, recorder: ModuleRecorder) -> HookHandles:
        """Report every cell call through cell forward pre-hooks and hooks, in PyNative mode until removed."""
        from ts_mindspore.cells import install_cell_hooks

        return install_cell_hooks(model, recorder)

    def run_forward(self, model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], train: bool) -> Any:
        """Run a cell with ``set_train(train)``; restore every cell's mode."""
        from ts_mindspore.cells import run_forward

        return run_forward(model, args, kwargs, train, lambda a: self.from_numpy(a, None))

    def model_state(self, model: Any) -> dict[str, np.ndarray]:
        """Copy a cell's parameters to numpy, named by ``parameters_and_names()``."""
        from ts_mindspore.cells import model_state

        return model_state(model, self.to_numpy)

    def load_model_state(self, model: Any, params: Mapping[str, np.ndarray]) -> None:
        """Copy arrays into a cell's parameters of the same names (``Parameter.set_data``)."""
        from ts_mindspore.cells import load_model_state

        load_model_state(model, params, lambda a: self.from_numpy(a, None))


plugin = MindSporeBackend()
