"""``ts.dump.Debugger``: start, stop and step a dump, as msprobe's ``PrecisionDebugger`` does.

::

    debugger = ts.dump.Debugger(task="statistics", dump_path="./dump", level="L1")
    for batch in loader:
        debugger.start(model)        # or: with debugger: ...
        loss = model(batch).sum(); loss.backward(); optimizer.step()
        debugger.stop()
        debugger.step()

Each step that is dumped gets ``{dump_path}/step{k}/rank{r}/``. ``stop()``
takes off every hook it installed, also when the step raised; nothing stays
installed, patched or imported.
"""

from __future__ import annotations

import atexit
import logging
import os
import time
import weakref
from collections.abc import Mapping
from typing import Any

from tscore.contract.kernels import NativeDump
from tscore.contract.layers import HookHandles
from tscore.contract.recorders import ApiRecorder
from tscore.dump.acl_config import check_acl_config
from tscore.dump.config import DumpConfig, DumpConfigError, load_config, make_config
from tscore.dump.native import NATIVE_FOLDER, record_kernels
from tscore.dump.overflow import OverflowRecorder, OverflowSummary
from tscore.dump.recorder import DumpRecorder, finish_record, stage_statistics
from tscore.dump.writer import DumpWriter, WriterThread
from tscore.errors import TscoreError
from tscore.plugins import get_plugin_manager, hook

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


def _config(config: object, keywords: Mapping[str, Any]) -> DumpConfig:
    if isinstance(config, DumpConfig):
        return config.model_copy(update=dict(keywords)) if keywords else config
    if isinstance(config, (str, os.PathLike)):
        loaded = load_config(config)
        return make_config({**loaded.model_dump(by_alias=True), **keywords}, os.fspath(config))
    if isinstance(config, Mapping):
        return make_config({**config, **keywords})
    if config is None:
        return make_config(keywords)
    raise TypeError(f"Debugger: config must be a path, a dict or a DumpConfig, not {type(config).__name__}")


class Debugger:
    """Dump the API and module calls of chosen steps.

    :param config: a path to a config file (msprobe's ``config.json`` works), a dict, a
        :class:`DumpConfig`, or nothing; keywords override it (``task``, ``dump_path``,
        ``level``, ``scope``, ``list``, ``data_mode``, ``summary_mode``, ``step``, ``rank``).
    :param rank_id: this process's rank, when it is not the framework's (``torch.distributed``).
    :raises DumpConfigError: for an unknown task, level, mode or key, before anything runs.
    """

    def __init__(self, config: object = None, *, rank_id: int | None = None, **keywords: Any) -> None:
        """Check the configuration; nothing is installed until :meth:`start`."""
        self.config = _config(config, keywords)
        if self.config.acl_config is not None:
            check_acl_config(self.config.acl_config, "Debugger(acl_config=)")
        self.rank_id = rank_id
        self.current_step = 0
        self.recorder: DumpRecorder | None = None
        self.writer: DumpWriter | None = None
        self._handles: list[HookHandles] = []
        self._model: object = None
        self._thread: WriterThread | None = None  # one writing thread for every step of this debugger
        self._started_info: dict[str, Any] = {}  # dump_info.json as start() wrote it
        self._native: NativeDump | None = None  # the framework's own dump, for a compiled network
        self._stack_cache: dict[Any, Any] = {}  # stacks worked out, shared by every step's recorder
        self.folders: list[str] = []
        self.overflows: list[OverflowSummary] = []  # with task="overflow_check": each step's findings
        # what every step dumped so far wrote: records, tensor files, bytes, seconds spent writing tensors,
        # and the writer thread's CPU seconds
        self.totals: dict[str, float] = dict.fromkeys(
            ("records", "tensors", "bytes", "tensor_bytes", "tensor_seconds", "writer_cpu_seconds"), 0
        )

    # ------------------------------------------------------------ the switch

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self.recorder is not None

    def rank(self) -> int:
        """Return the rank this process dumps as: the one given, else the framework's, else 0."""
        if self.rank_id is not None:
            return self.rank_id
        found = hook().ts_current_rank()
        return int(found) if found is not None else 0

    def start(self, model: object = None) -> None:
        """Start dumping the current step (nothing when the config leaves this step or rank out).

        :param model: the network, for module records (``L0``, ``mix``) and for the module path
            of every API record; without it, API records carry the root as their module.
        """
        if self.running:
            return
        rank = self.rank()
        if (
            self.config.acl_config is not None
            and hook().ts_kernel_dump(config_path=self.config.acl_config) is None
        ):
            raise DumpConfigError(
                "a kernel-level (ACL) dump needs an Ascend NPU: torch_npu imported and the ts_npu plugin "
                "installed; on this device dump the same calls without acl_config"
            )
        # a compiled network's framework dump is armed at the first start, dumped step or not:
        # the framework may read its configuration only once, before its first graph
        native = self._native_dump(model) if self.config.level in ("L1", "mix") else None
        if native is not None and self.config.task == "overflow_check":
            raise DumpConfigError(
                f"task='overflow_check' needs every API call, which a compiled network "
                f"({native.framework} graph mode) does not show: run the step in PyNative mode for "
                "the overflow check, or dump the kernels with task='statistics' and look for inf and NaN"
            )
        if (self.config.step and self.current_step not in self.config.step) or (
            self.config.rank and rank not in self.config.rank
        ):
            return
        folder = os.path.join(self.config.dump_path, f"step{self.current_step}", f"rank{rank}")
        try:
            if self._thread is None or not self._thread.alive:
                self._thread = WriterThread()
                weakref.finalize(self, self._thread.shutdown)
            writer = DumpWriter(folder, finish_record, stage=stage_statistics, thread=self._thread)
        except TscoreError as exc:
            log.warning("dump off, the training goes on: %s", exc)
            return
        kind = OverflowRecorder if self.config.task == "overflow_check" else DumpRecorder
        handles: list[HookHandles] = []
        try:  # whatever fails from here closes the writer: its thread would wait for it at exit
            recorder = kind(self.config, writer, step=self.current_step, rank=rank)
            recorder.stack_cache = self._stack_cache
            info = self._info(rank, model)
            writer.write_info(info)
            if native is not None:
                native.begin_step()  # steps run between two dumped ones are not this step's
            elif self.config.level in ("L1", "mix"):
                reported_to: ApiRecorder = recorder  # mypy checks the recorder keeps the contract
                handles += [h for h in _api_hooks()(recorder=reported_to) if h is not None]
            if model is not None and native is None:
                # a compiled network's kernels name their module by scope: no hooks in its graph
                module_handles = hook().ts_install_module_hooks(model=model, recorder=recorder)
                if module_handles is None:
                    raise TypeError(
                        f"Debugger.start: no loaded plugin hooks the layers of a {type(model).__name__}"
                    )
                handles.append(module_handles)
        except BaseException:
            for handle in reversed(handles):
                handle.remove()
            writer.close()
            raise
        if native is not None and self.config.level == "mix":
            log.warning("dump: graph mode records kernels only; cell records (mix, L0) need PyNative mode")
        if not handles and native is None:
            log.warning("dump: no imported framework reports its API calls; nothing will be recorded")
        self.writer, self.recorder, self._handles = writer, recorder, handles
        self._started_info = info
        self._model = model
        self.folders.append(folder)
        atexit.register(self.stop)  # an uncaught exception still writes what was recorded

    def stop(self) -> None:
        """Stop dumping: every hook comes off (all of them, even if one fails), the files are closed."""
        if not self.running:
            return
        atexit.unregister(self.stop)
        handles, self._handles = self._handles, []
        recorder, writer = self.recorder, self.writer
        self.recorder = self.writer = None
        failure: BaseException | None = None
        for handle in reversed(handles):
            try:
                handle.remove()
            except Exception as exc:
                if failure is not None:
                    log.warning("dump: %s", exc)
                failure = failure or exc
        assert recorder is not None and writer is not None
        if isinstance(recorder, OverflowRecorder):
            try:  # the calls whose probes were still on their device: the last of them may stop the step
                recorder.settle()
            except Exception as exc:
                if failure is not None:
                    log.warning("dump: %s", exc)
                failure = failure or exc
        recorder.close_kernels()
        if self._native is not None:
            self._record_native(recorder)
        model, self._model = self._model, None
        if model is not None and self.config.level != "L1":
            self._parameter_gradients(model, recorder)
        # which framework's tensors the step recorded: dump_info's frameworks lists every one imported
        info = {**self._started_info, "recorded_frameworks": recorder.frameworks}
        if recorder.devices:
            info["devices"] = recorder.devices
        if recorder.settings:  # what changes numbers on each device, for comparing two runs
            info["settings"] = recorder.settings
        if recorder.native_note:
            info["native_dump"] = recorder.native_note
        writer.write_info(info)
        writer.close()
        if isinstance(recorder, OverflowRecorder):
            recorder.write_summary()
            self.overflows.append(recorder.summary)
            log.info("overflow check: %s", recorder.summary.line())
        missing = recorder.unmatched_scope()
        if missing:
            log.warning("dump: no call of step %d was named %s", recorder.step, ", ".join(missing))
        for key, value in (
            ("records", recorder.dumped),
            ("tensors", writer.tensors_written),
            ("bytes", writer.bytes_written),
            ("tensor_bytes", writer.tensor_bytes),
            ("tensor_seconds", writer.tensor_seconds),
            ("writer_cpu_seconds", writer.cpu_seconds),
        ):
            self.totals[key] += value
        log.info(
            "dump of step %d: %d calls seen, %d records, %d tensors, %.1f MB in %s",
            recorder.step,
            recorder.calls,
            recorder.dumped,
            writer.tensors_written,
            writer.bytes_written / 1e6,
            writer.folder,
        )
        if failure is not None:
            raise failure

    def _native_dump(self, model: object) -> NativeDump | None:
        """Arm the framework's own kernel dump when the network runs compiled (once per debugger)."""
        if self._native is None:
            folder = os.path.join(self.config.dump_path, NATIVE_FOLDER)
            self._native = hook().ts_native_dump(folder=folder, model=model)
        return self._native

    def _record_native(self, recorder: DumpRecorder) -> None:
        """Turn what the framework dumped during the step into records; say so when it wrote nothing."""
        native = self._native
        assert native is not None
        try:
            calls = native.collect()
        except (OSError, ValueError) as exc:  # a damaged native dump: this step says so, training goes on
            log.warning("dump: the framework's own dump in %s could not be read: %s", native.folder, exc)
            recorder.native_note = f"not read: {exc}"
            return
        if not calls:
            why = native.why_empty()
            log.warning("dump of step %d: the framework's own dump wrote nothing: %s", recorder.step, why)
            recorder.native_note = why
            return
        recorder.add_framework(native.framework)
        try:
            written = record_kernels(recorder, calls, move=native.owned)
        except OSError as exc:  # a full disk, a folder gone: the step says so, the training goes on
            log.warning("dump of step %d: kernel records not written: %s", recorder.step, exc)
            recorder.native_note = f"kernel records not written: {exc}"
            return
        native.discard(calls)
        recorder.native_note = f"{written} kernel records from {native.folder}"

    @staticmethod
    def _parameter_gradients(model: object, recorder: DumpRecorder) -> None:
        """Record each module's parameter gradients, as msprobe's ``parameters_grad`` records do.

        Read at ``stop()`` from where the framework keeps them (torch's ``.grad``); a framework
        that hands gradients back instead of keeping them (MindSpore) has none to read here.
        """
        try:
            grads = hook().ts_model_grads(model=model, grads=None)
        except (TscoreError, ValueError, TypeError) as exc:
            log.info("dump: no parameter gradients to record: %s", exc)
            return
        if not grads:
            return
        by_module: dict[str, dict[str, object]] = {}
        for key, grad in grads.items():
            name = key.rpartition("_")[0]
            path, _, local = name.rpartition(".")
            by_module.setdefault(path, {})[local] = grad
        layers = {layer.path: layer.type_name for layer in hook().ts_named_layers(model=model) or ()}
        for path, values in by_module.items():
            recorder.parameter_gradients(path, layers.get(path, ""), values)

    def close(self) -> None:
        """Stop dumping and end the writing thread (it also ends with the debugger or the process)."""
        try:
            self.stop()
        finally:  # also when stopping raises (an overflow limit found at stop())
            if self._native is not None:
                self._native.close()
            if self._thread is not None:
                self._thread.shutdown()
                self._thread = None

    def step(self) -> None:
        """End the current step (stopping it if it runs); the next :meth:`start` dumps the next one.

        The step ends even when stopping raises (an overflow limit found at ``stop()``).
        """
        try:
            self.stop()
        finally:
            self.current_step += 1

    def __enter__(self) -> Debugger:
        """Start dumping (without a model: API records only)."""
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop dumping, whether the block raised or not; a failure to stop never hides the block's own."""
        if exc_info[0] is None:
            self.stop()
            return
        try:
            self.stop()
        except Exception as exc:  # the block's exception is what the user must see
            log.warning("dump: stopping after an exception in the dumped block also failed: %s", exc)

    def _info(self, rank: int, model: object) -> dict[str, Any]:
        frameworks = {info.name: info.version for info in hook().ts_framework_info() if info.imported}
        return {
            "tscore_dump": FORMAT_VERSION,
            "step": self.current_step,
            "rank": rank,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "frameworks": frameworks,
            "model": None if model is None else type(model).__name__,
            "config": self.config.model_dump(by_alias=True),
            "plugins": get_plugin_manager().loaded_names(),
        }


def _api_hooks() -> Any:
    """Return the ``ts_install_api_hooks`` caller, without the backends that an imported one builds on.

    mindtorch's calls run MindSpore's inside: with both backends installed, only mindtorch's
    capture records them (:attr:`tscore.backend.Backend.builds_on`).
    """
    manager = get_plugin_manager()
    covered = manager.covered_backends()
    if not covered:
        return manager.hook.ts_install_api_hooks
    return manager.subset_hook_caller("ts_install_api_hooks", remove_plugins=covered)
