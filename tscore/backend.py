"""``Backend``: the base class a framework plugin derives from.

A plugin says once which objects are its own (its framework's tensor and
network types) and writes each capability as a plain method; the base turns
those methods into the hooks of :mod:`tscore.hookspecs`, answering ``None``
for every object that is not its own and never importing the framework to
find out. Only the hooks whose methods a subclass overrides are registered,
so ``tscore plugins`` lists what a backend really does::

    class JaxBackend(Backend):
        framework = "jax"

        def tensor_types(self):
            import jax                      # only called once jax is imported
            return (jax.Array,)

        def to_numpy(self, tensor, copy):
            return np.array(tensor) if copy else np.asarray(tensor)

    plugin = JaxBackend()                   # the entry point names this object

Every method below documents the hook it answers; the hookspec of the same
name (``ts_`` + hook) is the contract.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import numpy as np

from tscore.contract.checkpoints import CheckpointContents
from tscore.contract.graph import GraphNode
from tscore.contract.kernels import NativeDump
from tscore.contract.layers import HookHandles, LayerInfo, ModuleRecorder
from tscore.contract.recorders import ApiRecorder
from tscore.contract.runtime import Runtime
from tscore.contract.settings import RunSetting
from tscore.contract.tensors import FrameworkInfo, ModelInfo, TensorMeta
from tscore.contract.transfers import PendingArray, StatsRows
from tscore.dtypes import neutral_dtype
from tscore.hookspecs import hookimpl

log = logging.getLogger(__name__)

# hook name -> the Backend methods a subclass must override for the hook to be registered;
# a tuple in the list is a choice: any one of its methods will do.
HOOK_METHODS: dict[str, tuple[str | tuple[str, ...], ...]] = {
    "ts_is_tensor": ("tensor_types",),
    "ts_tensor_meta": ("tensor_types",),
    "ts_to_numpy": ("tensor_types", "to_numpy"),
    "ts_from_numpy": ("tensor_types", "from_numpy"),
    "ts_attach_grad_hook": ("tensor_types", "attach_grad_hook"),
    "ts_compiled_grad_hook": ("compiled_grad_hook",),
    "ts_model_info": ("model_types",),
    "ts_model_grads": ("model_types", "model_grads"),
    "ts_model_state": ("model_types", "model_state"),
    "ts_load_model_state": ("model_types", "load_model_state"),
    "ts_layer_params": ("model_types", ("layer_params", "named_layers")),
    "ts_named_layers": ("model_types", "named_layers"),
    "ts_install_module_hooks": ("model_types", "install_module_hooks"),
    "ts_layer_layout": ("model_types", "layer_layout"),
    "ts_layer_training": ("model_types",),
    "ts_run_forward": ("model_types", "run_forward"),
    "ts_load_checkpoint": ("load_checkpoint",),
    "ts_checkpoint_suffixes": (("load_checkpoint", "save_checkpoint"),),
    "ts_save_checkpoint": ("save_checkpoint",),
    "ts_weight_convention": ("weight_convention",),
    "ts_dump_api_names": ("dump_api_names",),
    "ts_value_transforms": ("value_transforms",),
    "ts_seed_all": ("seed",),
    "ts_prepare_runtime": ("prepare_runtime",),
    "ts_install_api_hooks": ("install_api_hooks",),
    "ts_tensor_stats": ("tensor_types", "tensor_stats"),
    "ts_tensor_key": ("tensor_types", "tensor_key"),
    "ts_stats_to_host": ("stats_to_host",),
    "ts_copy_to_host": ("tensor_types", "copy_to_host"),
    "ts_run_settings": ("run_settings",),
    "ts_tensor_abs_max": ("tensor_types", "tensor_abs_max"),
    "ts_tensor_finite_probe": ("tensor_types", "tensor_finite_probe"),
    "ts_read_scalars": ("tensor_types", "read_scalars"),
    "ts_tensor_requires_grad": ("tensor_types", "tensor_requires_grad"),
    "ts_device_overflow": ("device_overflow",),
    "ts_kernel_dump": ("kernel_dump",),
    "ts_native_dump": ("native_dump",),
    "ts_current_rank": ("current_rank",),
    "ts_read_graph_file": ("read_graph_file",),
    "ts_read_print_file": ("read_print_file",),
}


class Backend:
    """Base of a framework backend: ownership said once, one method per capability.

    :cvar framework: the framework's name as tscore reports it (``"torch"``).
    :cvar module: its top-level import name, when it differs from ``framework``.
    :cvar distribution: its package name on the index, when it differs from ``module``.
    :cvar checkpoint_kinds: the checkpoint file kinds (``"pth"``, ``"pdparams"``) that
        :meth:`load_checkpoint` reads and :meth:`save_checkpoint` writes.
    :cvar checkpoint_suffixes: ``{suffix: kind}`` for those files (``{".pdparams": "pdparams"}``).
    :cvar import_to_seed: whether ``ts.seed_all`` may import the framework to seed it (False for a
        framework whose import changes the process, such as PaddlePaddle's logging set-up).
    :cvar builds_on: the framework whose objects this one's also are, for a layer over another
        framework (MSAdapter's torch API over MindSpore: ``"mindspore"``). Where both backends
        are loaded and claim an object, this one answers first; while this framework is imported,
        the other's API capture stays out of a dump, which would otherwise record the inner calls
        of every call this one records.
    """

    framework: ClassVar[str] = ""
    module: ClassVar[str] = ""
    distribution: ClassVar[str | None] = None
    checkpoint_kinds: ClassVar[tuple[str, ...]] = ()
    checkpoint_suffixes: ClassVar[Mapping[str, str]] = {}
    import_to_seed: ClassVar[bool] = True
    builds_on: ClassVar[str | None] = None

    # ------------------------------------------------------------ ownership

    @property
    def module_name(self) -> str:
        """The framework's top-level import name."""
        return self.module or self.framework

    def imported(self) -> Any:
        """Return the framework's module if the user's program imported it, else None (never imports it)."""
        return sys.modules.get(self.module_name)

    def tensor_types(self) -> tuple[type, ...]:
        """Return the framework's tensor types; called only once the framework is imported."""
        return ()

    def model_types(self) -> tuple[type, ...]:
        """Return the framework's network types (``torch.nn.Module``); called only once it is imported."""
        return ()

    def owns_tensor(self, obj: object) -> bool:
        """Say whether ``obj`` is one of this framework's tensors."""
        return self.imported() is not None and isinstance(obj, self.tensor_types())

    def owns_model(self, obj: object) -> bool:
        """Say whether ``obj`` is one of this framework's networks."""
        return self.imported() is not None and isinstance(obj, self.model_types())

    @classmethod
    def implements(cls, hook_name: str) -> bool:
        """Say whether this backend answers ``hook_name``: every method the hook needs is overridden."""
        needed = HOOK_METHODS.get(hook_name)
        if needed is None:
            return True

        def overridden(name: str) -> bool:
            return getattr(cls, name) is not getattr(Backend, name)

        return all(
            overridden(need) if isinstance(need, str) else any(overridden(n) for n in need) for need in needed
        )

    # ------------------------------------------------------------ methods to override

    def tensor_dtype(self, tensor: Any) -> str:
        """Return the tensor's dtype as the framework spells it (default ``str(tensor.dtype)``)."""
        return str(tensor.dtype)

    def neutral_dtype(self, native: str) -> str:
        """Map the framework's dtype spelling to tscore's neutral name (:mod:`tscore.dtypes`)."""
        return neutral_dtype(native)

    def tensor_device(self, tensor: Any) -> str:
        """Return where the tensor lives (``"cpu"``, ``"cuda:0"``); default ``"cpu"``."""
        return "cpu"

    def model_device(self, model: Any) -> str:
        """Return where the network's parameters live; default ``"cpu"``."""
        return "cpu"

    def to_numpy(self, tensor: Any, copy: bool) -> np.ndarray:
        """Answer ``ts_to_numpy`` for one of your tensors."""
        raise NotImplementedError

    def from_numpy(self, array: np.ndarray, like: Any | None) -> Any:
        """Answer ``ts_from_numpy``: a tensor of your framework (on ``like``'s device when given)."""
        raise NotImplementedError

    def attach_grad_hook(self, tensor: Any, callback: Callable[[object], None]) -> Any:
        """Answer ``ts_attach_grad_hook`` for one of your tensors."""
        raise NotImplementedError

    def compiled_grad_hook(self, callback: Callable[[object], None]) -> Any:
        """Answer ``ts_compiled_grad_hook``: ``None`` unless your framework is compiling now."""
        raise NotImplementedError

    def model_grads(self, model: Any, grads: object | None) -> dict[str, object]:
        """Answer ``ts_model_grads`` for one of your networks."""
        raise NotImplementedError

    def model_state(self, model: Any) -> dict[str, np.ndarray]:
        """Answer ``ts_model_state`` for one of your networks."""
        raise NotImplementedError

    def load_model_state(self, model: Any, params: Mapping[str, np.ndarray]) -> None:
        """Answer ``ts_load_model_state`` for one of your networks."""
        raise NotImplementedError

    def layer_params(self, model: Any) -> Sequence[tuple[str, str, Sequence[str]]]:
        """Answer ``ts_layer_params``; by default the layers of :meth:`named_layers` that own entries.

        Override it, or :meth:`named_layers`, or both.
        """
        out = []
        for layer in self.named_layers(model):
            if layer.params:
                prefix = f"{layer.path}." if layer.path else ""
                out.append((layer.path, layer.kind, [name.removeprefix(prefix) for name in layer.params]))
        return out

    def named_layers(self, model: Any) -> Sequence[LayerInfo]:
        """Answer ``ts_named_layers`` for one of your networks."""
        raise NotImplementedError

    def install_module_hooks(self, model: Any, recorder: ModuleRecorder) -> HookHandles:
        """Answer ``ts_install_module_hooks`` for one of your networks."""
        raise NotImplementedError

    def layer_layout(self, layer: Any, kind: str) -> str | None:
        """Answer ``ts_layer_layout`` for one of your layers (``"NHWC"``, ``"channels_first"``, None)."""
        return None

    def layer_training(self, layer: Any) -> bool | None:
        """Answer ``ts_layer_training``; by default the layer's ``training`` attribute when it is a bool."""
        mode = getattr(layer, "training", None)
        return mode if isinstance(mode, bool) else None

    def run_forward(self, model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], train: bool) -> Any:
        """Answer ``ts_run_forward`` for one of your networks."""
        raise NotImplementedError

    def load_checkpoint(self, path: str, kind: str, trust: bool) -> CheckpointContents:
        """Answer ``ts_load_checkpoint`` for a file of one of your ``checkpoint_kinds``."""
        raise NotImplementedError

    def save_checkpoint(self, params: Mapping[str, np.ndarray], path: str, format: str) -> None:
        """Answer ``ts_save_checkpoint`` for a format in your ``checkpoint_kinds``."""
        raise NotImplementedError

    def weight_convention(self, kind: str) -> Mapping[str, Any] | None:
        """Answer ``ts_weight_convention`` for your framework: how a layer kind stores its weights."""
        raise NotImplementedError

    def value_transforms(self) -> Mapping[str, Any]:
        """Answer ``ts_value_transforms``: transforms your weight conventions use beyond tscore's own."""
        raise NotImplementedError

    def dump_api_names(self) -> Mapping[str, Mapping[str, Any]]:
        """Answer ``ts_dump_api_names`` for your framework: your dumped APIs as neutral operations."""
        raise NotImplementedError

    def seed(self, seed: int, deterministic: bool) -> None:
        """Answer ``ts_seed_all``: seed your framework (it is imported by then)."""
        raise NotImplementedError

    def prepare_runtime(self, runtime: Runtime) -> None:
        """Answer ``ts_prepare_runtime``: tell your framework how to treat tscore's functions."""
        raise NotImplementedError

    def install_api_hooks(self, recorder: ApiRecorder) -> HookHandles:
        """Answer ``ts_install_api_hooks``: report every API call to ``recorder`` (framework imported)."""
        raise NotImplementedError

    def tensor_stats(self, tensor: Any) -> Any:
        """Answer ``ts_tensor_stats``: max, min, mean, L2 norm on the tensor's device."""
        raise NotImplementedError

    def tensor_key(self, tensor: Any) -> Any:
        """Answer ``ts_tensor_key``: a value that changes when the tensor's contents may have changed."""
        raise NotImplementedError

    def stats_to_host(self, stats: Sequence[Any]) -> Callable[[], StatsRows] | None:
        """Answer ``ts_stats_to_host``: start one copy of many statistics; None when they are not yours."""
        raise NotImplementedError

    def copy_to_host(self, tensor: Any) -> PendingArray | None:
        """Answer ``ts_copy_to_host``: start an asynchronous copy (None for a tensor in host memory)."""
        raise NotImplementedError

    def run_settings(self, device: str) -> Sequence[RunSetting]:
        """Answer ``ts_run_settings``: the settings that change the numbers computed on ``device``."""
        raise NotImplementedError

    def tensor_abs_max(self, tensor: Any) -> Any:
        """Answer ``ts_tensor_abs_max``: the largest |x| on the tensor's device (NaN, inf when present)."""
        raise NotImplementedError

    def tensor_finite_probe(self, tensor: Any) -> Any:
        """Answer ``ts_tensor_finite_probe``: a number that is finite when every element is (a sum)."""
        raise NotImplementedError

    def read_scalars(self, values: Sequence[Any]) -> Sequence[float]:
        """Answer ``ts_read_scalars``: many one-element tensors left on their devices, read as floats."""
        raise NotImplementedError

    def tensor_requires_grad(self, tensor: Any) -> bool | None:
        """Answer ``ts_tensor_requires_grad``: does the tensor take part in autograd (None: unknown)."""
        raise NotImplementedError

    def device_overflow(self) -> bool | None:
        """Answer ``ts_device_overflow``: was the device's overflow flag raised (then lower it)."""
        raise NotImplementedError

    def kernel_dump(self, config_path: str) -> AbstractContextManager[object] | None:
        """Answer ``ts_kernel_dump``: a context manager running the device's kernel-level dump."""
        raise NotImplementedError

    def native_dump(self, folder: str, model: object) -> NativeDump | None:
        """Answer ``ts_native_dump``: your framework's own kernel dump, armed, when it runs compiled."""
        raise NotImplementedError

    def current_rank(self) -> int | None:
        """Answer ``ts_current_rank``: the distributed rank when your framework knows it."""
        raise NotImplementedError

    def read_graph_file(self, path: str) -> Sequence[GraphNode] | None:
        """Answer ``ts_read_graph_file``: a graph file of your framework's format as records, else None."""
        raise NotImplementedError

    def read_print_file(self, path: str) -> Sequence[str | np.ndarray] | None:
        """Answer ``ts_read_print_file``: a file of your framework's print format as its items, else None."""
        raise NotImplementedError

    # ------------------------------------------------------------ the hooks

    @hookimpl
    def ts_framework_info(self) -> FrameworkInfo:
        """Name the framework, its installed version and whether it is imported."""
        info = FrameworkInfo.installed(self.module_name, self.distribution)
        return info.model_copy(update={"name": self.framework}) if self.framework != info.name else info

    @hookimpl
    def ts_is_tensor(self, obj: object) -> bool | None:
        """Claim your tensors."""
        return True if self.owns_tensor(obj) else None

    @hookimpl
    def ts_tensor_meta(self, obj: object) -> TensorMeta | None:
        """Describe one of your tensors: neutral dtype, own spelling, shape, device."""
        if not self.owns_tensor(obj):
            return None
        native = self.tensor_dtype(obj)
        return TensorMeta(
            framework=self.framework,
            dtype=self.neutral_dtype(native),
            native_dtype=native,
            shape=tuple(int(d) for d in obj.shape),  # type: ignore[attr-defined]
            device=self.tensor_device(obj),
        )

    @hookimpl
    def ts_to_numpy(self, obj: object, copy: bool) -> np.ndarray | None:
        """Convert one of your tensors."""
        return self.to_numpy(obj, copy) if self.owns_tensor(obj) else None

    @hookimpl
    def ts_from_numpy(self, array: np.ndarray, framework: str, like: object | None) -> Any:
        """Make a tensor when asked for your framework by name or ``like`` is yours."""
        mine = self.owns_tensor(like)
        if framework != self.framework and not mine:
            return None
        return self.from_numpy(array, like if mine else None)

    @hookimpl
    def ts_attach_grad_hook(self, tensor: object, callback: Callable[[object], None]) -> Any:
        """Attach a gradient hook to one of your tensors."""
        return self.attach_grad_hook(tensor, callback) if self.owns_tensor(tensor) else None

    @hookimpl
    def ts_compiled_grad_hook(self, callback: Callable[[object], None]) -> Any:
        """Give a compiled graph a gradient hook, when your framework is compiling."""
        return self.compiled_grad_hook(callback) if self.imported() is not None else None

    @hookimpl
    def ts_model_info(self, model: object) -> ModelInfo | None:
        """Say that ``model`` is yours and where it runs."""
        if not self.owns_model(model):
            return None
        return ModelInfo(framework=self.framework, device=self.model_device(model))

    @hookimpl
    def ts_model_grads(self, model: object, grads: object | None) -> dict[str, object] | None:
        """Name the gradients of one of your networks."""
        return self.model_grads(model, grads) if self.owns_model(model) else None

    @hookimpl
    def ts_model_state(self, model: object) -> dict[str, np.ndarray] | None:
        """Copy the state of one of your networks."""
        return self.model_state(model) if self.owns_model(model) else None

    @hookimpl
    def ts_load_model_state(self, model: object, params: Mapping[str, np.ndarray]) -> bool | None:
        """Load arrays into one of your networks."""
        if not self.owns_model(model):
            return None
        self.load_model_state(model, params)
        return True

    @hookimpl
    def ts_layer_params(self, model: object) -> Sequence[tuple[str, str, Sequence[str]]] | None:
        """List the weight-owning layers of one of your networks."""
        return self.layer_params(model) if self.owns_model(model) else None

    @hookimpl
    def ts_named_layers(self, model: object) -> Sequence[LayerInfo] | None:
        """List every layer of one of your networks."""
        return self.named_layers(model) if self.owns_model(model) else None

    @hookimpl
    def ts_install_module_hooks(self, model: object, recorder: ModuleRecorder) -> HookHandles | None:
        """Report every layer call of one of your networks."""
        return self.install_module_hooks(model, recorder) if self.owns_model(model) else None

    @hookimpl
    def ts_layer_layout(self, layer: object, kind: str) -> str | None:
        """Say in which axis order one of your layers computes."""
        return self.layer_layout(layer, kind) if self.owns_model(layer) else None

    @hookimpl
    def ts_layer_training(self, layer: object) -> bool | None:
        """Say whether one of your layers is in training mode."""
        return self.layer_training(layer) if self.owns_model(layer) else None

    @hookimpl
    def ts_run_forward(
        self, model: object, args: Sequence[Any], kwargs: Mapping[str, Any], train: bool
    ) -> Any:
        """Run one of your networks."""
        return self.run_forward(model, args, kwargs, train) if self.owns_model(model) else None

    @hookimpl
    def ts_load_checkpoint(self, path: str, kind: str, trust: bool) -> CheckpointContents | None:
        """Read a checkpoint of one of your kinds."""
        return self.load_checkpoint(path, kind, trust) if kind in self.checkpoint_kinds else None

    @hookimpl
    def ts_checkpoint_suffixes(self) -> Mapping[str, str]:
        """Name the suffixes of your checkpoint kinds."""
        return dict(self.checkpoint_suffixes)

    @hookimpl
    def ts_save_checkpoint(self, params: Mapping[str, np.ndarray], path: str, format: str) -> bool | None:
        """Write a checkpoint of one of your kinds."""
        if format not in self.checkpoint_kinds:
            return None
        self.save_checkpoint(params, path, format)
        return True

    @hookimpl
    def ts_weight_convention(self, kind: str, framework: str) -> Mapping[str, Any] | None:
        """Say how your framework stores one layer kind's weights."""
        return self.weight_convention(kind) if framework == self.framework else None

    @hookimpl
    def ts_dump_api_names(self, framework: str) -> Mapping[str, Mapping[str, Any]] | None:
        """Say which neutral operation each of your framework's dumped APIs is."""
        return self.dump_api_names() if framework == self.framework else None

    @hookimpl
    def ts_value_transforms(self) -> Mapping[str, Any]:
        """Offer the transforms your conventions need."""
        return self.value_transforms()

    @hookimpl
    def ts_seed_all(self, seed: int, deterministic: bool) -> str | None:
        """Seed your framework, importing it if ``import_to_seed`` (the caller asked to seed every one)."""
        if not self.import_to_seed and self.imported() is None:
            return None
        try:
            importlib.import_module(self.module_name)
        except ImportError as exc:  # installed but broken (torch_npu without CANN)
            log.warning("seed_all: %s is installed but does not import (%s); not seeded", self.framework, exc)
            return None
        self.seed(seed, deterministic)
        return self.framework

    @hookimpl
    def ts_install_api_hooks(self, recorder: ApiRecorder) -> HookHandles | None:
        """Report your framework's API calls to ``recorder``, when the user imported it."""
        return self.install_api_hooks(recorder) if self.imported() is not None else None

    @hookimpl
    def ts_tensor_stats(self, tensor: object) -> Any:
        """Summarise one of your tensors on its device."""
        return self.tensor_stats(tensor) if self.owns_tensor(tensor) else None

    @hookimpl
    def ts_tensor_key(self, tensor: object) -> Any:
        """Say when one of your tensors may have changed."""
        return self.tensor_key(tensor) if self.owns_tensor(tensor) else None

    @hookimpl
    def ts_tensor_requires_grad(self, tensor: object) -> bool | None:
        """Say whether one of your tensors takes part in autograd."""
        return self.tensor_requires_grad(tensor) if self.owns_tensor(tensor) else None

    @hookimpl
    def ts_device_overflow(self) -> bool | None:
        """Report your device's overflow flag, when your framework is imported."""
        return self.device_overflow() if self.imported() is not None else None

    @hookimpl
    def ts_kernel_dump(self, config_path: str) -> AbstractContextManager[object] | None:
        """Offer your device's kernel-level dump, when your framework is imported."""
        return self.kernel_dump(config_path) if self.imported() is not None else None

    @hookimpl
    def ts_native_dump(self, folder: str, model: object) -> NativeDump | None:
        """Arm your framework's own dump for compiled steps, when your framework is imported."""
        return self.native_dump(folder, model) if self.imported() is not None else None

    @hookimpl
    def ts_stats_to_host(self, stats: Sequence[object]) -> Callable[[], StatsRows] | None:
        """Start one copy of your tensors' statistics to the host."""
        return self.stats_to_host(stats) if self.imported() is not None else None

    @hookimpl
    def ts_copy_to_host(self, tensor: object) -> PendingArray | None:
        """Start an asynchronous copy of one of your tensors to host memory."""
        return self.copy_to_host(tensor) if self.owns_tensor(tensor) else None

    @hookimpl
    def ts_run_settings(self, framework: str, device: str) -> Sequence[RunSetting] | None:
        """Report your framework's settings that change the numbers on ``device``."""
        if framework != self.framework or self.imported() is None:
            return None
        return self.run_settings(device)

    @hookimpl
    def ts_tensor_abs_max(self, tensor: object) -> Any:
        """Give the largest magnitude of one of your floating tensors, for the overflow check."""
        return self.tensor_abs_max(tensor) if self.owns_tensor(tensor) else None

    @hookimpl
    def ts_tensor_finite_probe(self, tensor: object) -> Any:
        """Give a number that is finite when every element of one of your tensors is (the overflow check)."""
        return self.tensor_finite_probe(tensor) if self.owns_tensor(tensor) else None

    @hookimpl
    def ts_read_scalars(self, values: Sequence[object]) -> Sequence[float] | None:
        """Read many one-element tensors of yours left on their devices (the overflow check's probes)."""
        if not values or not all(self.owns_tensor(value) for value in values):
            return None
        return self.read_scalars(values)

    @hookimpl
    def ts_current_rank(self) -> int | None:
        """Give the distributed rank, when your framework is imported and knows it."""
        return self.current_rank() if self.imported() is not None else None

    @hookimpl
    def ts_read_graph_file(self, path: str) -> Sequence[GraphNode] | None:
        """Read a graph file of your framework's format."""
        return self.read_graph_file(path)

    @hookimpl
    def ts_read_print_file(self, path: str) -> Sequence[str | np.ndarray] | None:
        """Read a file of your framework's print format."""
        return self.read_print_file(path)

    @hookimpl
    def ts_prepare_runtime(self, runtime: Runtime) -> None:
        """Prepare your framework for tscore's functions, once, when your plugin is registered."""
        self.prepare_runtime(runtime)
