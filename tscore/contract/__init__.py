"""The contract between tscore's core and its backends: the records hooks exchange.

This package is the bottom of the core. It imports pydantic, numpy and the
standard library only, and :mod:`tscore.hookspecs`, which defines the hooks,
imports nothing of tscore but it and :mod:`tscore.errors`. One module per
subject:

* :mod:`~tscore.contract.tensors`: :class:`TensorMeta`, :class:`ModelInfo`, :class:`FrameworkInfo`;
* :mod:`~tscore.contract.layers`: :class:`LayerInfo`, :class:`ModuleRecorder`, :class:`HookHandles`;
* :mod:`~tscore.contract.kinds`: the neutral layer kinds, their families and roles (:data:`NEUTRAL_KINDS`);
* :mod:`~tscore.contract.recorders`: :class:`ApiRecorder`, what ``ts_install_api_hooks`` reports to;
* :mod:`~tscore.contract.transfers`: :class:`PendingArray`, :class:`StagedStats` (values on their
  way from a device);
* :mod:`~tscore.contract.checkpoints`: :class:`CheckpointContents`, :class:`CheckpointReadError`;
* :mod:`~tscore.contract.kernels`: :class:`KernelCall`, :class:`KernelTensor`, :class:`NativeDump`;
* :mod:`~tscore.contract.graph`: :class:`GraphNode`, :class:`GraphInput`;
* :mod:`~tscore.contract.settings`: :class:`RunSetting`;
* :mod:`~tscore.contract.runtime`: :class:`Runtime`.
"""
