"""The one module a backend author imports from tscore.

Everything a plugin needs is here, and a plugin in this repository imports
nothing else of tscore (a test checks the import graph). It re-exports the
contract (:mod:`tscore.contract`) and the helpers above it, and loads no
feature of tscore: importing it is cheap and pulls in no dump, compare or
report machinery.

* :class:`Backend`, the base that says "is this object mine" once and turns
  plain methods into hooks; :data:`hookimpl` for a plugin written as
  functions; :data:`hookspec` and :data:`PROJECT_NAME` for tools.
* The records hooks take and return (:mod:`tscore.contract`): :class:`TensorMeta`,
  :class:`FrameworkInfo`, :class:`ModelInfo`, :class:`LayerInfo`,
  :class:`ModuleRecorder`, :class:`ApiRecorder` (what ``ts_install_api_hooks``
  reports to; :data:`STACK_HERE`, its ``begin``'s default stack),
  :class:`HookHandles`, :class:`CheckpointContents`, :class:`Runtime`,
  :class:`PendingArray`, :class:`RunSetting`, :class:`KernelCall`, :class:`KernelTensor`,
  :class:`GraphNode` and :class:`GraphInput`; and :class:`ValueTransform`.
* Errors: :class:`TscoreError`, :class:`UnsupportedObjectError`,
  :class:`CheckpointReadError`, :class:`UnsafePickleError`.
* Helpers a backend uses: :func:`hook_layers` (forward pre- and post-hooks
  on layers that offer torch's hook API), :func:`kind_by_class` (a layer's
  neutral kind from a table of classes), :func:`kind_by_name` (the RMS norms and rotary
  embeddings model code defines itself), :func:`training_modes_restored`
  (every layer's mode back after a run), :func:`map_arrays` (turn every
  array in nested arguments into a tensor), :func:`write_atomic`,
  :func:`read_package_json` (a data file shipped in your package),
  :func:`torch_style_named_layers`, :func:`torch_style_layer_params`,
  :func:`torch_style_kind` and :func:`torch_style_config` (the layers of any
  backend with torch's module API, given its ``nn`` namespace),
  :func:`layout_from_attributes` (a layer's layout from its ``data_format``),
  :data:`NEUTRAL_KINDS` and :func:`kind_family` (the neutral layer kinds),
  :data:`TORCH_STYLE_NOT_COMPUTING` (the tensor methods of torch's API that an
  API dump leaves out),
  :func:`neutral_dtype` and :data:`NEUTRAL_DTYPES`, :func:`restricted_unpickle`
  (read a pickle that may hold only arrays and plain data).

The hooks themselves are documented in :mod:`tscore.hookspecs`; the
conformance kit a backend runs is :mod:`tscore.testing.conformance`.
"""

from __future__ import annotations

from tscore.array_stats import array_stats, memory_stats, memory_stats_address, memory_stats_dtypes
from tscore.backend import Backend
from tscore.contract.checkpoints import CheckpointContents, CheckpointReadError
from tscore.contract.graph import GraphInput, GraphNode
from tscore.contract.kernels import KernelCall, KernelTensor
from tscore.contract.kinds import NEUTRAL_KINDS, NeutralKind, kind_family
from tscore.contract.layers import HookHandles, LayerInfo, ModuleRecorder
from tscore.contract.recorders import STACK_HERE, ApiRecorder
from tscore.contract.runtime import Runtime
from tscore.contract.settings import RunSetting
from tscore.contract.tensors import FrameworkInfo, ModelInfo, TensorMeta
from tscore.contract.transfers import PendingArray
from tscore.dtypes import NEUTRAL_DTYPES, neutral_dtype
from tscore.errors import StepStopped, TscoreError, UnsupportedObjectError
from tscore.hookspecs import PROJECT_NAME, hookimpl, hookspec
from tscore.json_files import read_package_json
from tscore.layouts import from_attributes as layout_from_attributes
from tscore.module_hooks import hook_layers, kind_by_class, kind_by_name, training_modes_restored
from tscore.npy_files import write_atomic
from tscore.safe_pickle import UnsafePickleError, restricted_unpickle
from tscore.structures import map_arrays
from tscore.torch_style_api import TORCH_STYLE_NOT_COMPUTING
from tscore.torch_style_layers import (
    TORCH_STYLE_KINDS,
    torch_style_config,
    torch_style_kind,
    torch_style_layer_params,
    torch_style_named_layers,
)
from tscore.value_transforms import ValueTransform

__all__ = [
    "NEUTRAL_DTYPES",
    "NEUTRAL_KINDS",
    "PROJECT_NAME",
    "TORCH_STYLE_KINDS",
    "ApiRecorder",
    "STACK_HERE",
    "Backend",
    "CheckpointContents",
    "CheckpointReadError",
    "FrameworkInfo",
    "GraphInput",
    "GraphNode",
    "HookHandles",
    "NeutralKind",
    "KernelCall",
    "KernelTensor",
    "LayerInfo",
    "ModelInfo",
    "ModuleRecorder",
    "PendingArray",
    "RunSetting",
    "Runtime",
    "StepStopped",
    "read_package_json",
    "TensorMeta",
    "TscoreError",
    "UnsafePickleError",
    "UnsupportedObjectError",
    "array_stats",
    "memory_stats",
    "memory_stats_address",
    "memory_stats_dtypes",
    "ValueTransform",
    "hook_layers",
    "hookimpl",
    "hookspec",
    "kind_by_class",
    "kind_by_name",
    "kind_family",
    "layout_from_attributes",
    "map_arrays",
    "neutral_dtype",
    "restricted_unpickle",
    "TORCH_STYLE_NOT_COMPUTING",
    "torch_style_config",
    "torch_style_kind",
    "torch_style_layer_params",
    "torch_style_named_layers",
    "training_modes_restored",
    "write_atomic",
]
