"""Hook specifications: the contract between the tscore core and a backend.

The core never imports a framework. Everything it needs from PyTorch,
MindSpore, PaddlePaddle or any other framework it asks for through the hooks
below, which a backend plugin implements. A backend author imports one
module, :mod:`tscore.plugin_api`, and derives from its
:class:`~tscore.backend.Backend`, which says "is this object mine" once and
turns plain methods into these hooks (:mod:`tscore.backend` shows a whole
backend in a few lines), and the backend object is
registered under the entry point group ``tscore`` in its own
``pyproject.toml``::

    [project.entry-points.tscore]
    jax = "ts_jax.plugin:plugin"

A plugin may also be a module of ``@hookimpl`` functions named like the hooks
(``from tscore.plugin_api import hookimpl``). The manual's "Writing a backend"
page walks through a whole backend; ``tscore.testing.conformance`` is the
test suite a backend runs to show it keeps this contract.

Conventions that hold for every hook:

* Names start with ``ts_``. A plugin implements only the hooks it needs; an
  implementation may accept fewer arguments than the spec names.
* "Who owns this object" hooks are ``firstresult``: the plugin whose framework
  the object belongs to answers, every other plugin returns ``None``, and the
  first non-``None`` answer is the result. A plugin must answer ``None``,
  never raise, for an object that is not its own, and must not import its
  framework to find out: if the framework is not in ``sys.modules`` yet, the
  object cannot be one of its tensors.
* Hooks every backend answers (``ts_seed_all``, ``ts_framework_info``) are
  collecting hooks: the caller receives a list of all non-``None`` answers.
* Arrays cross the boundary as :class:`numpy.ndarray`. bfloat16 and float8
  values travel as ``ml_dtypes`` arrays, never silently widened to float32.
  Dtypes are named by the neutral names of :mod:`tscore.dtypes`
  (``"bfloat16"``), which each plugin maps from its own spelling.
* Neither side of a comparison is a framework: the core asks the plugin of
  each network (``ts_model_info``) and never assumes which is which.
* A plugin raises :class:`tscore.errors.TscoreError` (or a subclass) for an
  object that is its own but cannot be handled, with a message saying what to
  do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import pluggy

from tscore.contract.checkpoints import CheckpointContents
from tscore.contract.graph import GraphNode
from tscore.contract.kernels import NativeDump
from tscore.contract.layers import HookHandles, LayerInfo, ModuleRecorder
from tscore.contract.recorders import ApiRecorder
from tscore.contract.runtime import Runtime
from tscore.contract.settings import RunSetting
from tscore.contract.tensors import FrameworkInfo, ModelInfo, TensorMeta
from tscore.contract.transfers import PendingArray

PROJECT_NAME = "tscore"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# ---------------------------------------------------------------------------
# Plugin identity
# ---------------------------------------------------------------------------


@hookspec
def ts_framework_info() -> FrameworkInfo | None:
    """Say which framework this plugin serves.

    Collecting hook: every backend answers. Used by ``tscore plugins`` and to
    label saved tensors. Must not import the framework: read its version from
    the installed distribution's metadata instead.

    In :class:`~tscore.backend.Backend`: Name, version and whether the framework is imported; from the class
    attributes ``framework``, ``module``, ``distribution``.

    :return: a :class:`~tscore.contract.tensors.FrameworkInfo` such as
        ``FrameworkInfo(name="torch", version="2.13.0", imported=False)``,
        where ``imported`` says whether the framework is in ``sys.modules``.
    """


# ---------------------------------------------------------------------------
# Tensor conversion
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def ts_is_tensor(obj: object) -> bool | None:
    """Say whether ``obj`` is a tensor of this plugin's framework.

    ``firstresult``: return ``True`` for your own tensors (parameters and
    subclasses included) and ``None`` for anything else.

    In :class:`~tscore.backend.Backend`: Claims your tensors: ``tensor_types()``.

    :param obj: any Python object.
    """


@hookspec(firstresult=True)
def ts_to_numpy(obj: object, copy: bool) -> np.ndarray | None:
    """Convert one of your tensors to a numpy array on the host.

    ``firstresult``: return ``None`` for objects that are not yours.

    The array must hold the same values and the same dtype: bfloat16 becomes
    an ``ml_dtypes.bfloat16`` array, float16 stays float16, a 0-d tensor
    becomes a 0-d array. Detach from autograd and copy from any device.

    In :class:`~tscore.backend.Backend`: ``to_numpy(tensor, copy)``: the values on the host, same dtype.

    :param obj: the object to convert.
    :param copy: ``True``: the array must not share memory with the tensor
        (a later in-place update of the tensor must not change it).
        ``False``: the caller uses the array at once and drops it (``save``
        writes it straight to disk), so a view of host memory is fine and
        saves a copy.
    :return: a C-contiguous :class:`numpy.ndarray`, or ``None``.
    """


@hookspec(firstresult=True)
def ts_tensor_meta(obj: object) -> TensorMeta | None:
    """Describe one of your tensors without copying its data.

    ``firstresult``: return ``None`` for objects that are not yours.

    In :class:`~tscore.backend.Backend`: Neutral dtype, your spelling, shape, device: ``tensor_dtype``,
    ``neutral_dtype``, ``tensor_device``.

    :return: a :class:`~tscore.contract.tensors.TensorMeta` with the framework
        name, the neutral dtype name (:func:`tscore.dtypes.neutral_dtype`),
        the dtype as your framework prints it (``native_dtype``), the shape
        and the device (``"cpu"``, ``"cuda:0"``, ``"Ascend:0"``).
    """


@hookspec(firstresult=True)
def ts_from_numpy(array: np.ndarray, framework: str, like: object | None) -> object | None:
    """Make a tensor of your framework from a numpy array.

    ``firstresult``: answer only when ``framework`` is your framework's name
    (as in :func:`ts_framework_info`) or ``like`` is one of your tensors, and
    return ``None`` otherwise. Here you may import your framework: the caller
    asked for it by name.

    In :class:`~tscore.backend.Backend`: ``from_numpy(array, like)``: a tensor of yours, on ``like``'s device.

    :param array: the values; ``ml_dtypes.bfloat16`` arrays become bfloat16
        tensors.
    :param framework: the framework name the caller wants, or ``""``.
    :param like: an existing tensor whose device the new one should match, or
        ``None``.
    """


@hookspec(firstresult=True)
def ts_model_info(model: object) -> ModelInfo | None:
    """Say that ``model`` is a network of your framework, and where it runs.

    ``firstresult``: return ``None`` when ``model`` is not yours. The core
    labels each side of a comparison with the answer (``torch (cpu)``,
    ``torch (npu:0)``) and picks the weight conventions of its framework.

    In :class:`~tscore.backend.Backend`: Claims your networks and says where they run: ``model_types()``,
    ``model_device(model)``; the label of a side (``torch (cpu)``).

    :return: ``ModelInfo(framework="torch", device="cpu")``; the device of the
        network's first parameter, ``"cpu"`` when it has none.
    """


# ---------------------------------------------------------------------------
# Gradient extraction
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def ts_attach_grad_hook(tensor: object, callback: Callable[[object], None]) -> object | None:
    """Arrange for ``callback`` to see the gradient that flows back into ``tensor``.

    ``firstresult``: return ``None`` for objects that are not yours.

    Return the tensor that the caller must use downstream in place of
    ``tensor``: an identity in the forward pass whose backward calls
    ``callback`` once with the gradient (a tensor of your framework) and then
    passes the gradient on unchanged. ``tscore.save_grad`` is built on this
    hook, in eager execution.

    In :class:`~tscore.backend.Backend`: ``attach_grad_hook(tensor, callback)``: what ``ts.save_grad``
    returns.

    :param tensor: one of your tensors, part of a graph that will be
        differentiated.
    :param callback: called with the gradient tensor.
    """


@hookspec(firstresult=True)
def ts_compiled_grad_hook(callback: Callable[[object], None]) -> object | None:
    """Give compiled code a way to hand a gradient to ``callback``, if a compile is under way.

    ``firstresult``: return ``None`` unless your framework is compiling a
    graph at this moment (MindSpore GRAPH_MODE or ``ms.jit``), which is when
    ``tscore.save_grad`` is being translated rather than run. Then return an
    object the compiled graph can apply to a tensor (MindSpore: an
    ``InsertGradientOf`` primitive) so that, every time backward runs,
    ``callback`` receives the gradient at run time.

    In :class:`~tscore.backend.Backend`: ``compiled_grad_hook(callback)``: the same while a graph compiles
    (MindSpore).
    """


@hookspec(firstresult=True)
def ts_model_grads(model: object, grads: object | None) -> dict[str, object] | None:
    """Name the gradients of a model's trainable parameters.

    ``firstresult``: return ``None`` when ``model`` is not yours.

    In :class:`~tscore.backend.Backend`: ``model_grads(model, grads)``: ``{name_index: grad}``, for
    ``ts.widget.get_*_grads``.

    :param model: a network of your framework (``torch.nn.Module``,
        ``mindspore.nn.Cell``).
    :param grads: gradients the caller computed outside the model (MindSpore
        returns them from ``grad``/``value_and_grad`` in parameter order), or
        ``None`` to read them from the parameters themselves (torch's
        ``.grad``).
    :return: ``{parameter name: gradient tensor}`` in parameter order,
        skipping parameters without a gradient.
    """


# ---------------------------------------------------------------------------
# Checkpoint IO
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def ts_load_checkpoint(path: str, kind: str, trust: bool) -> CheckpointContents | None:
    """Read a checkpoint file into numpy arrays.

    ``firstresult``: answer for the file kinds you read and return ``None``
    for the others. tscore itself reads ``"ckpt"`` (MindSpore) and
    ``"safetensors"`` with numpy alone; the torch plugin reads ``"pth"``.

    In :class:`~tscore.backend.Backend`: ``load_checkpoint(path, kind, trust)`` for the kinds in
    ``checkpoint_kinds``; never unpickle what the user did not trust (``restricted_unpickle``).

    :param path: the checkpoint file.
    :param kind: what the file is, from its suffix or first bytes: ``"ckpt"``,
        ``"safetensors"``, ``"pth"`` (torch zip or legacy pickle), or ``""``
        when unknown.
    :param trust: ``True`` only when the caller explicitly allowed unpickling
        arbitrary objects; without it, load with the framework's safe mode
        (``torch.load(weights_only=True)``).
    :return: a :class:`~tscore.contract.checkpoints.CheckpointContents` with the
        tensors in file order. Entries that are not tensors (an epoch counter,
        optimizer state) go to its ``skipped`` dict with the reason, never an
        exception.
    :raises tscore.contract.checkpoints.CheckpointReadError: naming the file
        (and the byte offset, when known) for a file of your kind that cannot be read.

    Example (a plugin for ``.npz`` archives)::

        @hookimpl
        def ts_load_checkpoint(path, kind, trust):
            if not path.endswith(".npz"):
                return None
            with np.load(path, allow_pickle=trust) as archive:
                return CheckpointContents(path, "npz", params=dict(archive))
    """


@hookspec
def ts_checkpoint_suffixes() -> Mapping[str, str] | None:
    """Name the file suffixes of the checkpoint kinds you read and write.

    Collecting hook: each answer is ``{suffix: kind}`` (``{".pdparams": "pdparams"}``);
    tscore then passes ``kind`` to :func:`ts_load_checkpoint` for such files and
    picks the format from the suffix when writing. tscore's own: ``.ckpt``,
    ``.safetensors``, and ``.pth``/``.pt``/``.bin``/``.tar`` as ``"pth"``.

    In :class:`~tscore.backend.Backend`: From ``checkpoint_suffixes``, ``{".pdparams": "pdparams"}``.
    """


@hookspec(firstresult=True)
def ts_save_checkpoint(
    params: Mapping[str, np.ndarray], path: str, format: str, framework: str
) -> bool | None:
    """Write ``{name: array}`` as a checkpoint file.

    ``firstresult``: return ``True`` once written, ``None`` for formats that
    are not yours (``format`` is ``"ckpt"``, ``"safetensors"``, ``"pth"``...).
    Write atomically (:func:`tscore.npy_files.write_atomic`): a failure half
    way must leave no file behind and any old file as it was.

    In :class:`~tscore.backend.Backend`: ``save_checkpoint(params, path, format)``, atomically
    (``write_atomic``).

    :param framework: the framework that will read the file (``"mindspore"``,
        ``"torch"``), for formats that record it (safetensors metadata).
    """


@hookspec(firstresult=True)
def ts_model_state(model: object) -> dict[str, np.ndarray] | None:
    """Return a model's parameters and buffers as ``{name: array}``, copied.

    ``firstresult``: return ``None`` when ``model`` is not yours. Names are
    the ones your framework's own checkpoint would use, in its order
    (torch: ``state_dict()``; MindSpore: ``parameters_and_names()``).

    In :class:`~tscore.backend.Backend`: ``model_state(model)``: every parameter and buffer, by your
    checkpoint's names.
    """


@hookspec(firstresult=True)
def ts_load_model_state(model: object, params: Mapping[str, np.ndarray]) -> bool | None:
    """Copy each array of ``params`` into the model's parameter or buffer of that name.

    ``firstresult``: return ``None`` when ``model`` is not yours, ``True``
    once loaded. The caller has already checked that every name exists in
    :func:`ts_model_state` with the same shape; cast to the parameter's dtype.

    In :class:`~tscore.backend.Backend`: ``load_model_state(model, params)``.
    """


# ---------------------------------------------------------------------------
# Weight mapping
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def ts_layer_params(model: object) -> Sequence[tuple[str, str, Sequence[str]]] | None:
    """List a model's layers as ``(layer path, neutral layer kind, param names)``.

    ``firstresult``: return ``None`` when ``model`` is not yours.

    Every entry of the model's state dict appears exactly once, in state-dict
    order, under the layer that owns it (``""`` for the root); a layer of no
    known kind has kind ``""``.

    The neutral kind names what the layer computes, independent of framework;
    subclasses of a known layer report their base's kind. The kinds in use:
    ``linear``, ``conv1d``/``2d``/``3d``, ``conv_transpose1d``/``2d``/``3d``,
    ``batchnorm1d``/``2d``/``3d``, ``batchnorm`` (no fixed rank, such as
    SyncBatchNorm), ``instancenorm1d``/``2d``/``3d``, ``layernorm``,
    ``groupnorm``, ``embedding``, ``prelu``, ``rnn``, ``lstm``, ``gru``,
    ``multihead_attention``. Parameter names are relative to the layer
    (``"weight"``, ``"running_mean"``).

    In :class:`~tscore.backend.Backend`: The weight-owning layers, ``(path, kind, local names)``; derived from
    ``named_layers`` unless you override ``layer_params``.
    """


@hookspec(firstresult=True)
def ts_weight_convention(kind: str, framework: str) -> Mapping[str, Any] | None:
    """Say how ``framework`` stores the weights of one neutral layer kind, relative to the neutral form.

    ``firstresult``: answer only when ``framework`` is yours; return ``None``
    for other frameworks, and for kinds your framework stores in the neutral
    form. The core converts weights between two frameworks through the
    neutral form: the source's names and layouts back to it, then on to the
    target's. Two networks of one framework load by name, with no rule.

    The neutral form, per kind (names relative to the layer, layouts as
    shapes):

    * ``linear``: ``weight`` ``[out, in]``, ``bias`` ``[out]``;
    * ``conv1d``/``2d``/``3d``: ``weight`` ``[out, in/groups, *kernel]``,
      ``bias``; ``conv_transpose*``: ``weight`` ``[in, out/groups, *kernel]``;
    * ``batchnorm*``, ``instancenorm*``: ``weight``, ``bias``,
      ``running_mean``, ``running_var``, ``num_batches_tracked``;
    * ``layernorm``, ``groupnorm``: ``weight``, ``bias``;
    * ``embedding``: ``weight`` ``[num, dim]``; ``prelu``: ``weight``;
    * ``rnn``, ``lstm``, ``gru``: ``weight_ih_l{k}``, ``weight_hh_l{k}``,
      ``bias_ih_l{k}``, ``bias_hh_l{k}`` (``_reverse`` for the backward
      direction), gates stacked ``[n_gates * hidden, in]``;
    * ``multihead_attention``: ``in_proj_weight``, ``in_proj_bias``,
      ``out_proj.weight``, ``out_proj.bias``.

    (These are PyTorch's names, written down here so that no backend needs
    torch to know them.)

    In :class:`~tscore.backend.Backend`: ``weight_convention(kind)``: how your framework names and lays out a
    layer kind's weights relative to the neutral form (torch's names and layouts); tscore converts any pair of
    frameworks through it.

    :param kind: a neutral layer kind from :func:`ts_layer_params`.
    :param framework: the framework whose convention is asked for.
    :return: ``{"names": {neutral name: your name, or None when your layer
        has no such entry}, "transforms": {neutral name: the transform that
        turns the neutral layout into yours}}`` (neutral to yours; the axes
        of ``transpose`` as :func:`numpy.transpose` reads them), or
        ``{"needs_rule": "why"}`` for a kind that no renaming converts (per-gate
        recurrent weights): its entries are then left out of every map, with
        the reason, and never converted wrongly. A transform is a string of
        :mod:`tscore.value_transforms` (``"unsqueeze(2)"``,
        ``"transpose(1, 0)"``, or one a plugin adds through
        :func:`ts_value_transforms`); it must have an inverse. MindSpore's
        answer for ``batchnorm2d``::

            {"names": {"weight": "gamma", "bias": "beta", "running_mean": "moving_mean",
                       "running_var": "moving_variance", "num_batches_tracked": None}}
    """


@hookspec(firstresult=True)
def ts_dump_api_names(framework: str) -> Mapping[str, Mapping[str, Any]] | None:
    """Say which neutral operation each API your framework's dumps name is, so two frameworks' dumps pair.

    ``firstresult``: answer only when ``framework`` is yours (a dump says which
    framework made it: ``"torch"``, ``"mindspore"``); return ``None`` otherwise.
    The dump comparison pairs API records of two frameworks by these neutral
    operations, and compares their values by neutral slot names, not by
    position. The neutral names are PyTorch's functional names and parameter
    names (``conv2d(input, weight, bias, ...)``, ``batch_norm(input,
    running_mean, running_var, weight, bias, ...)``), written down so that no
    backend needs torch. ``bias_add`` (``input``, ``bias``) right after a
    ``conv1d``/``conv2d``/``conv3d`` or ``matmul`` is folded into it (the
    latter becoming ``linear``), as torch computes both in one call.

    In :class:`~tscore.backend.Backend`: ``dump_api_names()``: ``{"Prefix.api": {"op": ..., "inputs": [...],
    "outputs": [...]}}``, each API your dumps record as a neutral operation (torch's functional names) and its
    values as neutral slots, so that a dump of your framework pairs API by API with another framework's; a
    data file in your package is the usual home.

    :param framework: the framework a dump names.
    :return: ``{"Prefix.api": {"op": neutral operation, "inputs": [neutral name
        of each positional input, in order], "outputs": [neutral name of each
        output]}}``; ``inputs`` and ``outputs`` may be left out (positions kept).
        MindSpore's answer holds, for one::

            {"Primitive.BatchNorm": {"op": "batch_norm",
                                     "inputs": ["input", "weight", "bias", "running_mean", "running_var"],
                                     "outputs": ["output"]}}
    """


@hookspec
def ts_value_transforms() -> Mapping[str, Any] | None:
    """Offer value transforms beyond tscore's own, for your weight conventions.

    Collecting hook: each answer is ``{name: ValueTransform}``
    (:class:`tscore.value_transforms.ValueTransform`: a function of the
    array and the integer arguments, and a function giving the inverse's
    spelling). A weight map then writes ``"name(1, 2)"``. tscore's own:
    ``unsqueeze(axis)``, ``squeeze(axis)``, ``transpose(*axes)``.

    In :class:`~tscore.backend.Backend`: ``value_transforms()``: ``{name: ValueTransform}`` beyond tscore's
    ``unsqueeze``, ``squeeze`` and ``transpose``.
    """


# ---------------------------------------------------------------------------
# The run environment and the layers of a network
# ---------------------------------------------------------------------------


@hookspec
def ts_seed_all(seed: int, deterministic: bool) -> str | None:
    """Seed your framework's random generators, and make it deterministic if asked.

    Collecting hook: every installed backend answers. Seed only when your
    framework is importable; import it if needed (the caller asked to seed
    everything). Return the framework name you seeded, or ``None`` if your
    framework is not installed.

    In :class:`~tscore.backend.Backend`: ``seed(seed, deterministic)``; ``import_to_seed = False`` when
    importing your framework would change the process.
    """


@hookspec(historic=True)
def ts_prepare_runtime(runtime: Runtime) -> None:
    """Prepare your framework for tscore's own functions, once, when your plugin is registered.

    Historic hook: every plugin receives the call when it is registered, also
    one registered after the first call. Use it to tell a compiler of your
    framework how to treat tscore code that a user's network calls:
    ``runtime.package`` names the package whose functions must run in Python
    at run time on real values (``ts.save`` inside compiled code), and
    ``runtime.traced`` the functions it must translate instead
    (``ts.save_grad``, which inserts a gradient hook into the graph).
    tscore loads the plugins before user code can reach ``ts.save``, so the
    compiler knows before it meets them. The MindSpore plugin adds the
    package to ``MS_JIT_IGNORE_MODULES``. Change nothing that a program which
    never calls tscore would notice.

    In :class:`~tscore.backend.Backend`: ``prepare_runtime(runtime)``: once, when the plugin registers, tell
    your compiler to run ``runtime.package`` at run time and to translate ``runtime.traced`` (MindSpore's
    graph mode).
    """


@hookspec
def ts_install_api_hooks(recorder: ApiRecorder) -> HookHandles | None:
    """Start reporting every API call of your framework to ``recorder``, until the handles are removed.

    Collecting hook: each backend whose framework is imported answers with a
    :class:`tscore.contract.layers.HookHandles` whose ``remove()`` undoes
    everything it installed (and leaves nothing patched, checked by identity);
    a backend whose framework is not imported returns ``None``. For each call
    made at the top level (not inside another captured call), call
    ``token = recorder.begin(prefix, api, args, kwargs)`` before it runs
    (``prefix`` as ptdbg names the namespace: ``Torch``, ``Tensor``,
    ``Functional``, ``VF``), ``recorder.end(token, output)`` after, when the
    token is not None, and, when backward reaches the call,
    ``recorder.backward(token, grads_into_outputs, grads_into_inputs)``
    (:class:`tscore.contract.recorders.ApiRecorder` says what else it offers). Keep
    the tool's own work out of what you report, and change no value, no random
    state and no mode of the user's run. ``recorder.reads_values`` says whether
    its records also need tensors' values on the host (tensor files, md5), not
    only their statistics. Example: the torch plugin pushes a
    ``TorchFunctionMode`` and hooks each output's ``grad_fn``.

    In :class:`~tscore.backend.Backend`: ``install_api_hooks(recorder)``: report every API call of your
    framework to the dump recorder until the handles are removed. The recorder is a ``plugin_api.ApiRecorder``
    (``tscore/contract/recorders.py``): ``begin``, ``end``, ``backward``, and ``busy``, ``backward_wanted``,
    ``reads_values``, ``config_wants``; patch nothing you cannot put back (torch: a ``TorchFunctionMode``). A
    backend for a layer over another framework sets ``builds_on`` to that framework's name (ts_msadapter:
    ``"mindspore"``): beside that framework's plugin it answers first for the objects both claim, and while
    its own framework is imported the other's capture stays out of a dump (it would record the inside of every
    call this one records). ``end`` raises ``StepStopped`` (from ``plugin_api``) when the dump stops the step,
    as ptdbg's overflow limit does: if your framework keeps state across a call, set it back before raising it
    on (MindSpore pops the mixed-precision type of each ``to_float`` cell the exception unwinds).
    """


@hookspec(firstresult=True)
def ts_tensor_stats(tensor: object) -> object | None:
    """Compute a tensor's max, min, mean and L2 norm on its own device, without copying it to the host.

    ``firstresult``: return ``None`` for tensors that are not yours. Return the
    four values as one 1-d tensor of yours, or as a tuple of four values that
    ``float()`` reads (0-d tensors of yours, or numbers), or as an object of
    yours that your ``ts_stats_to_host`` turns into the four numbers; ``None``
    for an empty tensor. Leave them on the device: the dump gathers many of
    them into one copy to the host (``ts_stats_to_host``) and its writer reads
    them in its own thread, so an asynchronous device is never waited for per
    call. Compute in a precision that cannot overflow (float32 or more for
    half types) and change nothing: no random state, no autograd graph.
    torch's answer on the CPU: ``aminmax``, ``sum`` and ``vector_norm``, three
    reductions; on a GPU ``aminmax`` and ``var_mean``, two passes over the
    tensor, the norm worked out on the host.

    In :class:`~tscore.backend.Backend`: ``tensor_stats(tensor)``: max, min, mean and L2 norm on the tensor's
    device, as one tensor the dump's writer converts later.
    """


@hookspec(firstresult=True)
def ts_stats_to_host(stats: Sequence[object]) -> Callable[[], Sequence[Sequence[float | None]]] | None:
    """Start one copy to the host of many tensors' statistics, without waiting for the device.

    ``firstresult``: return ``None`` when the objects are not yours. ``stats``
    are what your ``ts_tensor_stats`` returned for the tensors of about 128 dump
    records (the dump hands them over in batches, on the training thread).
    Gather them on the device (one concatenation), start an asynchronous copy
    into page-locked host memory, and return a function that waits for that
    copy and returns one row ``[max, min, mean, norm]`` of floats per object,
    in order; the dump's writer calls it on its own thread. No ``.item()``,
    no ``.cpu()`` here: the training thread must not wait for the device.
    torch's answer on CUDA: ``torch.stack``, a ``non_blocking`` copy and a
    CUDA event.

    In :class:`~tscore.backend.Backend`: ``stats_to_host(stats)``: start one copy to the host of many
    statistics your ``tensor_stats`` left on a device (the dump hands them over about 128 records at a time)
    and return a function that waits for it and gives one row ``[max, min, mean, norm]`` per object; torch
    copies its kernel's partial rows (one copy per shared device buffer) and stacks the rest, into pinned
    memory with ``non_blocking``, and waits on a CUDA event in the writer's thread.
    """


@hookspec(firstresult=True)
def ts_copy_to_host(tensor: object) -> PendingArray | None:
    """Start copying one of your tensors to host memory, for the dump's tensor files, without waiting.

    ``firstresult``: return ``None`` for tensors that are not yours, and for
    tensors already in host memory (the dump then copies them with
    ``ts_to_numpy``). Return a :class:`tscore.contract.transfers.PendingArray`:
    its ``nbytes`` and a ``result()`` that waits for the copy and returns the
    numpy array, called once on the writer's thread. Copy on a stream of your
    own into page-locked memory, after the work that made the tensor, and keep
    the device memory from being reused until the copy is done. The dump bounds
    the bytes in flight, so a slow disk slows the training instead of filling
    memory. torch's answer on CUDA: a side stream, ``pin_memory``,
    ``record_stream`` and an event.

    In :class:`~tscore.backend.Backend`: ``copy_to_host(tensor)``: start copying a device tensor to host
    memory for the dump's tensor files and return a ``PendingArray`` (``nbytes``, ``result()``), or ``None``
    for a tensor already on the host; torch copies on a side stream into pinned memory, after the work that
    made the tensor.
    """


@hookspec(firstresult=True)
def ts_run_settings(framework: str, device: str) -> Sequence[RunSetting] | None:
    """Report the settings of this process that change the numbers computed on ``device``.

    ``firstresult``: answer only when ``framework`` is yours. ``device`` is as
    your ``ts_tensor_meta`` spells it (``cpu``, ``cuda:0``). Return the
    settings as :class:`tscore.run_settings.RunSetting` (name in your
    framework's spelling, value, meaning, and the relative difference a change
    of it alone can explain), as they hold on that device: TF32 does not exist
    on a CPU, so a CPU reports it off. The dump records them when it first
    sees a tensor on a device (inside the step, so autocast shows) and the
    comparisons list the settings that differ between two runs. torch's
    answer: TF32 for matmul and cuDNN, ``float32_matmul_precision``,
    deterministic algorithms, cuDNN benchmark, autocast.

    In :class:`~tscore.backend.Backend`: ``run_settings(device)``: the ``RunSetting``s (name, value, meaning,
    the relative difference a change of it explains) that change numbers on that device, as they hold there;
    the dump records them per device and the comparisons name those that differ between two runs (torch: TF32,
    matmul precision, deterministic algorithms, cuDNN benchmark, autocast).
    """


@hookspec(firstresult=True)
def ts_tensor_abs_max(tensor: object) -> object | None:
    """Return the largest absolute value of a floating tensor, computed on its own device.

    ``firstresult``: return ``None`` for tensors that are not yours, and for
    integer, bool or empty tensors (they do not overflow). The value must be
    NaN when any element is NaN and inf when any is infinite: the overflow
    check (``task="overflow_check"``) reads it with ``float()`` after every
    API call, so it is one reduction, in the tensor's own dtype (its largest
    value is what the check compares with), with no autograd graph and no
    copy of the tensor to the host. torch's answer: ``aminmax``, then the
    larger of ``max`` and ``-min``. On a device that runs behind the host
    (a GPU), return the value as a 0-d tensor left on the device, unread:
    the check then reads many at once with your ``ts_read_scalars``.

    In :class:`~tscore.backend.Backend`: ``tensor_abs_max(tensor)``: the largest |x| of a floating tensor on
    its device (NaN or inf when it holds one; ``None`` for integer, bool or empty tensors), one reduction that
    the overflow check reads after every API call. On a device that runs behind the host, return it as a one-
    element tensor left on the device, unread: the check reads many at once (``ts_read_scalars``).
    """


@hookspec(firstresult=True)
def ts_tensor_finite_probe(tensor: object) -> object | None:
    """Return one number, computed on the tensor's device, that is finite when every element is.

    The overflow check's first look at a float32 or float64 output, cheaper than
    ``ts_tensor_abs_max`` (a sum is one vectorised pass; a max and a min are two
    comparisons an element): the sum, in the tensor's own dtype or wider. inf
    and NaN carry through a sum, so never return a finite number for a tensor
    that holds one; a sum of finite values may overflow to inf, and the check
    then asks ``ts_tensor_abs_max`` before it calls anything an overflow.
    ``firstresult``: return ``None`` for tensors that are not yours and for
    every dtype you do not answer (half types: their near misses need the
    largest magnitude, so the check asks ``ts_tensor_abs_max`` for them).
    torch's answer: ``torch.sum``, read with ``float()``. On a device that
    runs behind the host, leave the value there, unread (see
    ``ts_tensor_abs_max``), and make it one that finite values can never make
    inf or NaN (torch's: the largest magnitude): it is read after later calls,
    which may have changed the tensor in place, so a non-finite value must
    mean an overflow for sure.

    In :class:`~tscore.backend.Backend`: ``tensor_finite_probe(tensor)``: one number, on the tensor's device,
    that is finite when every element is (torch's answer: the sum of a float32 or float64 tensor; ``None`` for
    other dtypes). The overflow check looks at it first and asks ``ts_tensor_abs_max`` only for half types and
    for a sum that was not finite (finite values can sum to inf). Optional: without it, every output gets
    ``ts_tensor_abs_max``. On a device, leave it there unread, as for ``ts_tensor_abs_max``, and make it a
    number that finite values can never make inf or NaN (torch: the largest magnitude, where a sum of finite
    values may be inf): it is read after later calls, which may have changed the tensor in place.
    """


@hookspec(firstresult=True)
def ts_read_scalars(values: Sequence[object]) -> Sequence[float] | None:
    """Read many one-element tensors of yours, left on their devices, with as few copies as you can.

    ``firstresult``: return ``None`` when the values are not yours. ``values``
    are what your ``ts_tensor_finite_probe`` and ``ts_tensor_abs_max`` left on
    a device, about 64 calls' worth: the overflow check reads them together,
    one wait for the device instead of one per call. Return one float per
    value, in order (inf and NaN as they are). Optional: without it each is
    read with ``float()``. torch's answer: one ``torch.stack`` per device and
    dtype, read with ``tolist()``.

    In :class:`~tscore.backend.Backend`: ``read_scalars(values)``: read many one-element tensors that your two
    hooks above left on their devices (about 64 calls' worth), one float per value in order, with as few
    copies as you can (torch: one ``torch.stack`` per device and dtype, then ``tolist()``). Optional: without
    it each value is read with ``float()``, still once per window rather than once per call.
    """


@hookspec(firstresult=True)
def ts_device_overflow() -> bool | None:
    """Say whether your device's floating-point overflow flag was raised since the last ask, and lower it.

    ``firstresult``: answer only for a device that saturates instead of
    writing inf and NaN (an Ascend NPU outside its inf/NaN mode, where
    torch_npu keeps the flag); return ``None`` otherwise. The overflow check
    asks once when it starts (to lower a flag raised before) and after every
    API call; a raised flag makes the call's outputs count as overflowed
    although they are finite.

    In :class:`~tscore.backend.Backend`: ``device_overflow()``: whether the device's floating-point overflow
    flag was raised since the last ask (then lower it); ``None`` for a device that writes inf and NaN into the
    values (the Ascend NPU backend answers from torch_npu).
    """


@hookspec(firstresult=True)
def ts_kernel_dump(config_path: str) -> AbstractContextManager[object] | None:
    """Return a context manager that runs your device's kernel-level dump while it is entered.

    ``firstresult``: answer when your device has such a dump (torch_npu's
    ACL dump: ``init_dump()``, ``set_dump(config_path)``, ``finalize_dump()``);
    ``None`` otherwise. ``config_path`` is ptdbg's ``dump.json``, already
    checked (:mod:`tscore.dump.acl_config`). ptdbg's ``mode="acl"`` enters it
    around each call it names, so the kernels of that call alone are dumped.

    In :class:`~tscore.backend.Backend`: ``kernel_dump(config_path)``: a context manager that runs the
    device's kernel-level dump with ptdbg's ``dump.json`` while it is entered (torch_npu's ACL dump); ptdbg's
    ``mode="acl"`` enters it around each call it names.
    """


@hookspec(firstresult=True)
def ts_native_dump(folder: str, model: object) -> NativeDump | None:
    """Arm your framework's own kernel dump when the network runs compiled, where no API call is seen.

    ``firstresult``: answer only when your framework runs the coming steps as a
    compiled graph that Python wrappers cannot see into (MindSpore's graph
    mode); ``None`` otherwise, and the API hooks are installed instead. Write
    under ``folder`` every step from now on (the first ``start()`` arms it,
    whether that step is dumped or not); ``model`` is the network ``start()``
    was given, or ``None``: with it, say which kernel inputs are its
    parameters (``KernelTensor.parameter``). The debugger calls
    ``begin_step()`` at each dumped step's ``start()`` and ``collect()`` at its
    ``stop()``, turns each :class:`~tscore.contract.kernels.KernelCall` into a
    ``Kernel`` record (:mod:`tscore.dump.native`), then ``discard()`` removes
    what was read.

    In :class:`~tscore.backend.Backend`: ``native_dump(folder, model)``: when your framework runs the coming
    steps as a compiled graph that no Python wrapper sees into (MindSpore's graph mode), arm its own kernel
    dump to write under ``folder`` and return an object with ``folder``, ``framework``, ``collect()`` (the
    ``KernelCall``s written since the last call, in execution order, each with its ``KernelTensor`` files,
    naming the inputs that are ``model``'s parameters), ``begin_step()`` (set aside what was written while no
    step was dumped), ``discard(calls)`` and ``why_empty()``; ``None`` otherwise. The debugger turns each
    kernel call into a ``Kernel`` record at ``stop()`` (``tscore.dump.native``).
    """


@hookspec(firstresult=True)
def ts_tensor_key(tensor: object) -> object | None:
    """Return a hashable identity of ``tensor``'s current contents, or ``None`` when you cannot tell.

    ``firstresult``: return ``None`` for tensors that are not yours. Return a
    tuple whose first item names the memory (two keys with equal first items
    alias the same memory) and whose other items change whenever the values
    may have (torch: ``(data_ptr, _version, shape, stride, dtype)``). The dump
    reuses a tensor's statistics and file while the tensor it first saw is
    alive and the key is unchanged; a call's output written into the same
    memory under another key (torch's ``x.data``) ends the reuse.

    In :class:`~tscore.backend.Backend`: ``tensor_key(tensor)``: a value that changes when the tensor may have
    changed (torch's ``_version``), so the dump writes each tensor once.
    """


@hookspec(firstresult=True)
def ts_tensor_requires_grad(tensor: object) -> bool | None:
    """Say whether ``tensor`` takes part in autograd (torch's ``requires_grad``), or ``None`` when unknown.

    ``firstresult``: return ``None`` for tensors that are not yours, and for yours when
    your framework does not say (a MindSpore tensor that is not a ``Parameter``). The dump
    writes it in each tensor's record, as msprobe does, and the dump comparison shows both
    runs' values and whether they agree (``Requires_grad Consistent``).

    In :class:`~tscore.backend.Backend`: ``tensor_requires_grad(tensor)``: whether the tensor takes part in
    autograd (torch's ``requires_grad``), ``None`` when your framework does not say; the dump writes it in
    each tensor's record and the dump comparison shows both runs' values (msprobe 26's ``Requires_grad``
    columns).
    """


@hookspec(firstresult=True)
def ts_current_rank() -> int | None:
    """Return this process's rank in distributed training, or ``None`` when your framework cannot tell.

    ``firstresult``: answer only when your framework's distributed layer is
    initialised. The dump writes into ``rank{r}`` with this rank unless the user
    named one.

    In :class:`~tscore.backend.Backend`: ``current_rank()``: the distributed rank, for the dump's ``rank{r}``
    folder.
    """


@hookspec(firstresult=True)
def ts_named_layers(model: object) -> Sequence[LayerInfo] | None:
    """List every layer of ``model``, the root first, parents before their children.

    ``firstresult``: return ``None`` when ``model`` is not yours. Each
    :class:`tscore.contract.layers.LayerInfo` gives the layer's path, class name,
    neutral kind (:data:`tscore.contract.kinds.NEUTRAL_KINDS`: ``conv2d``,
    the rank-free ``batchnorm``, ``relu``, ``maxpool2d``, ``sequential``, ...;
    ``""`` for a class you have no kind for), the state entries it owns itself and
    its settings in a neutral meaning, so that the core can pair a torch
    layer with its MindSpore twin and say which setting differs::

        LayerInfo(path="bn1", type_name="BatchNorm2d", kind="batchnorm2d",
                  params=("bn1.gamma", "bn1.beta", ...),
                  config={"eps": 1e-5, "momentum": 0.1}, layer=cell)

    Settings the core compares when both sides give them: ``bias``,
    ``kernel_size``, ``stride``, ``dilation``, ``groups`` and ``padding``
    (``[[before, after], ...]`` per spatial dim, or ``"same"``) of
    convolutions; ``kernel_size``, ``stride``, ``padding`` and ``ceil_mode``
    of max and average poolings; ``eps`` and ``momentum`` (torch's meaning:
    the weight of the new batch) of normalisations; ``p`` (the drop probability) of dropout;
    ``approximate`` of GELU (``"none"``, ``"tanh"``, ``"sigmoid"``: which variant it computes);
    ``eps`` of RMS norms and ``base`` of rotary embeddings (``kind_by_name`` finds both in model code);
    ``hidden_size``, ``num_layers``, ``bidirectional``, ``batch_first`` of
    recurrent layers; ``num_heads`` of attention.

    In :class:`~tscore.backend.Backend`: ``named_layers(model)``: every layer as a ``LayerInfo`` with its
    neutral kind and settings (eps, momentum in torch's meaning, padding as ``[[before, after]]``).
    """


@hookspec(firstresult=True)
def ts_layer_layout(layer: object, kind: str) -> str | None:
    """Say in which axis order ``layer`` takes and returns its activations.

    ``firstresult``: return ``None`` when ``layer`` is not yours, or when
    you cannot tell (a ReLU, which takes whatever it is given). ``kind`` is
    the neutral kind :func:`ts_named_layers` gave the layer. Answer with one
    capital letter per axis (:mod:`tscore.layouts`): ``N`` the batch, ``C``
    the channels, then spatial letters: ``"NCHW"`` for a channels-first 2-d
    layer (torch's, the neutral form), ``"NHWC"`` for a channels-last one
    (Paddle's ``Conv2D(data_format="NHWC")``, Flax), ``"NLC"`` for a
    channels-last 1-d one; or ``"channels_first"``/``"channels_last"`` for a
    layer of any rank (the layout of each tensor's own rank). The layout
    applies to the layer's tensors of its rank; a ``[N, C]`` tensor reads the
    same in any layout. ``tscore.plugin_api.layout_from_attributes`` reads a
    ``data_format`` attribute.

    The difference finder compares and replays layers in the neutral
    layout, so a channels-last port is compared axis by axis with its
    channels-first original. A layer that declares nothing is read in a layout
    its network declares elsewhere, the one under which its inputs line up
    with the other side's. Where a side declares nothing and two tensors'
    shapes are permutations of each other, it says it cannot tell rather than
    compare values that are not in the same places; two square shapes (channels
    as many as height and width) cannot show a permutation, so a backend with
    channels-last layers declares them.

    In :class:`~tscore.backend.Backend`: ``layer_layout(layer, kind)``: the axis order your layer computes in,
    ``"NCHW"`` (channels first, torch's, the neutral form), ``"NHWC"`` (channels last), ``"NLC"``, or
    ``"channels_first"``/``"channels_last"`` for a layer of any rank; ``None`` when the layer takes what it is
    given (a ReLU). The finder compares and replays layers in the neutral layout, so a channels-last port is
    compared axis by axis. ``layout_from_attributes(layer, kind, ("data_format",), default="channels_first")``
    reads a ``data_format`` attribute. A backend that answers nothing gets "cannot tell" wherever shapes are
    the same axes in another order, never a layer named from misplaced values.
    """


@hookspec(firstresult=True)
def ts_layer_training(layer: object) -> bool | None:
    """Say whether ``layer`` is in training mode (dropout active, BatchNorm using batch statistics).

    ``firstresult``: return ``None`` when ``layer`` is not yours, or when
    your framework keeps no mode per layer. The core reads every layer's
    mode before and after it runs a network (:func:`ts_run_forward` must give
    each layer its own mode back) and warns, naming the layer, when one
    changed; the conformance kit checks it the same way, so a framework
    whose mode is not a ``training`` attribute (Flax's ``deterministic``,
    ``use_running_average``) answers here.

    In :class:`~tscore.backend.Backend`: ``layer_training(layer)``: whether the layer is in training mode; by
    default its ``training`` attribute. Override it where the mode is something else (Flax's
    ``deterministic``); the finder warns when a run left a layer in another mode, and the kit checks every
    layer's mode through it.
    """


@hookspec(firstresult=True)
def ts_install_module_hooks(model: object, recorder: ModuleRecorder) -> HookHandles | None:
    """Report every layer call of ``model`` to ``recorder`` until the returned handles are removed.

    ``firstresult``: return ``None`` when ``model`` is not yours. For every
    layer listed by :func:`ts_named_layers`, call ``recorder.enter(path,
    layer, args, kwargs)`` before it runs and ``recorder.leave(path, layer,
    output)`` after it returns (nothing when it raises: the recorder then
    knows which layer failed). Pass the framework's own tensors; the recorder
    copies what it keeps. ``remove()`` on the returned
    :class:`tscore.contract.layers.HookHandles` must take off every hook added
    and undo any setting changed to make hooks fire (a compiled mode).

    In :class:`~tscore.backend.Backend`: ``install_module_hooks(model, recorder)``:
    ``recorder.enter``/``leave`` around every layer call until the returned ``HookHandles`` are removed.
    """


@hookspec(firstresult=True)
def ts_run_forward(
    model: object, args: Sequence[Any], kwargs: Mapping[str, Any], train: bool
) -> object | None:
    """Run ``model(*args, **kwargs)`` in train or eval mode and return its output as the model returns it.

    ``firstresult``: return ``None`` when ``model`` is not yours. Every
    :class:`numpy.ndarray` found in ``args`` and ``kwargs`` (also inside
    tuples, lists and dicts) becomes one of your tensors with the same dtype;
    anything else is passed as it is. Do not track gradients. Set the mode
    of every layer for the run and restore each layer's own mode before
    returning, whether the run succeeded or raised; let the exception of a
    failed run propagate unchanged.

    In :class:`~tscore.backend.Backend`: ``run_forward(model, args, kwargs, train)``: arrays become your
    tensors, no gradients, every layer's mode restored.
    """


@hookspec(firstresult=True)
def ts_read_graph_file(path: str) -> Sequence[GraphNode] | None:
    """Read a computation graph your framework saved (MindSpore's ANF IR ``.pb``) into plain records.

    ``firstresult``: answer only for a file of your framework's format;
    return ``None`` for any other (tscore then says that no plugin reads it).
    ``precision_tracker`` lists from these records the operators whose
    precision your backend changed.

    In :class:`~tscore.backend.Backend`: ``read_graph_file(path)``: a computation graph your framework saved
    (MindSpore's ANF IR ``.pb``) as ``GraphNode`` records (name, scoped name, operator type, attributes as
    text, inputs with shape and dtype); ``None`` for a file of another format. ``ts.widget.precision_tracker``
    lists from them the operators whose precision your backend raised or reduced.

    :param path: the file.
    :return: one :class:`tscore.contract.graph.GraphNode` per operator, in the
        graph's order: its unique ``name`` (what other nodes' inputs name as
        their ``source``), ``full_name`` with its scope, ``op_type``, its
        attributes as text (``precision_flag``: ``raise``/``reduce`` when the
        backend changed its precision), its inputs with shape and dtype, and
        its output's shape and dtype.
    """


@hookspec(firstresult=True)
def ts_read_print_file(path: str) -> Sequence[str | np.ndarray] | None:
    """Read a file your framework's print operator wrote (MindSpore's binary print file) as its items.

    ``firstresult``: answer only for a file of your framework's print format;
    return ``None`` for any other (``save_convert`` then reads the file as
    printed text). ``ts.widget.save_convert`` finds in the items the tensors
    that ``ts.save(..., output_mode="print")`` or the user printed after the
    marker ``_TS_SAVE_NAME:{name}``.

    In :class:`~tscore.backend.Backend`: ``read_print_file(path)``: a file your framework's print operator
    wrote (MindSpore's binary print file) as its items in order, strings as printed and tensors as numpy
    arrays; ``None`` for a file of another format. ``ts.widget.save_convert`` finds there the tensors printed
    after the ``_TS_SAVE_NAME:`` marker.

    :param path: the file.
    :return: every printed item in order: a string as printed (it may hold a
        marker and a tensor's text, ``Tensor(shape=[4], dtype=Float32, value=...)``),
        or a tensor's values as a numpy array.
    """
