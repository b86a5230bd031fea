"""msprobe's ``PrecisionDebugger`` over tscore's dump (:class:`tscore.dump.Debugger`).

It keeps msprobe's contract: one debugger a process (the first one made is the
one every later ``PrecisionDebugger(...)`` returns), ``start``, ``stop``,
``step`` and ``forward_backward_dump_end`` callable on the class or on the
instance, and msprobe's ``config.json`` (top-level ``task``, ``dump_path``,
``rank``, ``step``, ``level``, and a section named after the task). The
arguments given override the file, as in msprobe. Without a config file the
dump goes to ``./dump_path``, msprobe's default.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from tscore.dump.config import TASKS, DumpConfigError, from_msprobe
from tscore.dump.debugger import Debugger
from tscore.json_files import read_json

log = logging.getLogger(__name__)

DEFAULT_DUMP_PATH = "./dump_path"  # msprobe's config.json default
LEVELS = ("L0", "L1", "mix")
# msprobe's tasks and levels that tscore does not have, and what to use instead
_OTHER_TASKS = {
    "free_benchmark": "no free benchmark: dump both runs (task='statistics') and compare them",
    "run_ut": "no API pre-check: dump both runs and compare them",
    "grad_probe": "no gradient probe: dump with data_mode=['backward'] and compare",
    "structure": "no structure-only task: task='statistics' records the calls and modules",
    "exception_dump": "no exception dump",
    "acc_check": "no API accuracy check: dump both runs and compare them",
    "diff_check": "no diff check: dump both runs and compare them",
    "nan_check": "no NaN check: task='overflow_check' names the first call whose outputs hold inf or NaN",
}
_OTHER_LEVELS = {
    "L2": "kernel-level dumps run through ts_npu on an Ascend NPU (acl_config=)",
    "debug": "no debug level",
}
# msprobe switches whose meaning tscore has not: an error when switched on
_SWITCHES = {
    "enable_dataloader": "call start() and stop() around the step instead",
    "async_dump": "tscore writes on a thread of its own already; leave it false",
}
# msprobe methods tscore does not have
_METHODS = {"save", "save_grad", "set_init_step", "register_custom_api", "restore_custom_api", "monitor"}


class PrecisionDebugger:
    """Dump the API and module calls of chosen steps, as msprobe's ``PrecisionDebugger`` does.

    :param config_path: msprobe's ``config.json``; None for msprobe's defaults
        (``statistics``, ``L1``, ``./dump_path``).
    :param task: ``statistics``, ``tensor`` or ``overflow_check``; overrides the file.
    :param dump_path: where the dump goes; overrides the file.
    :param level: ``L0`` (modules), ``L1`` (APIs) or ``mix``; overrides the file.
    :param model: the network (msprobe's PyTorch argument); ``start(model)`` may give it instead.
    :param step: the steps to dump (``[0, 2]``, ``["4-6"]``); overrides the file.
    :raises DumpConfigError: naming any msprobe task, level, switch or key tscore does not support.
    """

    _instance: ClassVar[PrecisionDebugger | None] = None
    _debugger: Debugger | None
    model: object

    def __new__(cls, *args: Any, **kwargs: Any) -> PrecisionDebugger:
        """Return the process's debugger, made at the first call (msprobe keeps one a process)."""
        if cls._instance is None:
            instance = super().__new__(cls)
            instance._debugger = None
            cls._instance = instance
        return cls._instance

    def __init__(
        self,
        config_path: str | os.PathLike[str] | None = None,
        task: str | None = None,
        dump_path: str | None = None,
        level: str | None = None,
        model: object = None,
        step: Sequence[int | str] | None = None,
    ) -> None:
        """Read and check the configuration; nothing is installed until :meth:`start`."""
        if self._debugger is not None:
            log.info("PrecisionDebugger: one debugger a process, as in msprobe; the first one is kept")
            return
        try:
            self._debugger = _debugger(config_path, task, dump_path, level, step)
        except BaseException:  # a debugger that could not be made is not the process's
            type(self)._instance = None
            raise
        self.model = model

    @property
    def debugger(self) -> Debugger:
        """The tscore debugger doing the work."""
        found = self.__dict__.get("_debugger")
        if found is None:
            raise DumpConfigError("this PrecisionDebugger was closed or never made: make a new one")
        return found  # type: ignore[no-any-return]

    def __reduce__(self) -> Any:
        """Refuse: a debugger is one a process, and a copy would replace the live one."""
        raise TypeError("a PrecisionDebugger is one a process and holds a running dump: it cannot be pickled")

    @classmethod
    def _get(cls) -> PrecisionDebugger:
        if cls._instance is None or cls._instance._debugger is None:
            raise DumpConfigError("make a PrecisionDebugger(...) before calling start(), stop() or step()")
        return cls._instance

    @classmethod
    def start(cls, model: object = None, token_range: object = None) -> None:
        """Start dumping the current step (nothing when the config leaves this step or rank out).

        :param model: the network, for module records and the module path of every API record.
        """
        if token_range is not None:
            raise DumpConfigError(
                "PrecisionDebugger.start(token_range=...) is msprobe's; tscore has no token range"
            )
        instance = cls._get()
        instance.debugger.start(model if model is not None else instance.model)

    @classmethod
    def stop(cls) -> None:
        """Stop dumping; what the step recorded is written out."""
        cls._get().debugger.stop()

    @classmethod
    def forward_backward_dump_end(cls) -> None:
        """Stop dumping after the backward pass (the optimizer's calls are left out), as msprobe does."""
        cls._get().debugger.stop()

    @classmethod
    def step(cls) -> None:
        """End the current step; the next :meth:`start` dumps the next one."""
        cls._get().debugger.step()

    @classmethod
    def close(cls) -> None:
        """Stop, end the writing thread and forget the debugger, so that a new one can be made (tscore's)."""
        instance = cls._instance
        cls._instance = None
        if instance is not None and instance._debugger is not None:
            running, instance._debugger = instance._debugger, None
            running.close()

    def __getattr__(self, name: str) -> Any:
        """Name the msprobe methods tscore does not have, instead of a bare AttributeError."""
        if name in _METHODS:
            raise DumpConfigError(f"PrecisionDebugger.{name} is msprobe's; tscore does not support it")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def _debugger(
    config_path: str | os.PathLike[str] | None,
    task: str | None,
    dump_path: str | None,
    level: str | None,
    step: Sequence[int | str] | None,
) -> Debugger:
    """Make tscore's debugger from msprobe's config file and arguments (which override the file)."""
    document = _document(config_path)
    for key, value in {"task": task, "dump_path": dump_path, "level": level}.items():
        if value is not None:
            document[key] = value
    if step is not None:
        document["step"] = list(step)
    source = os.fspath(config_path) if config_path is not None else "PrecisionDebugger"
    _check_supported(document, source)
    document["step"] = _steps(document.get("step", []), source)
    return Debugger(from_msprobe(document, source))


def _document(config_path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """Read msprobe's config.json into a dict (msprobe's defaults without one)."""
    if config_path is None:
        return {"task": "statistics", "dump_path": DEFAULT_DUMP_PATH, "level": "L1"}
    name = os.fspath(config_path)
    document = read_json(name, "msprobe config", DumpConfigError)
    if not isinstance(document, Mapping):
        raise DumpConfigError(f"{name}: msprobe's config is a JSON object, not a {type(document).__name__}")
    return dict(document)


def _check_supported(document: Mapping[str, Any], source: str) -> None:
    """Raise naming the first msprobe task, level or switch that tscore does not support."""
    task = document.get("task", "statistics")
    if task in _OTHER_TASKS:
        raise DumpConfigError(
            f"{source}: msprobe's task {task!r} is not supported by tscore ({_OTHER_TASKS[task]}); "
            f"its tasks are {', '.join(TASKS)}"
        )
    level = document.get("level", "L1")
    if level in _OTHER_LEVELS:
        raise DumpConfigError(
            f"{source}: msprobe's level {level!r} is not supported by tscore ({_OTHER_LEVELS[level]}); "
            f"its levels are {', '.join(LEVELS)}"
        )
    for switch, instead in _SWITCHES.items():
        if document.get(switch):
            raise DumpConfigError(f"{source}: msprobe's {switch}=true is not supported by tscore: {instead}")


def _steps(steps: Any, source: str) -> list[int]:
    """Expand msprobe's steps (``[0, "2-4"]``) into numbers."""
    if not isinstance(steps, list):
        raise DumpConfigError(f'{source}: step is a list of steps (0, 3) or ranges ("2-4"), not {steps!r}')
    found: list[int] = []
    for item in steps:
        if isinstance(item, int) and not isinstance(item, bool):
            found.append(item)
            continue
        first, dash, last = str(item).partition("-")
        if not dash or not first.strip().isdigit() or not last.strip().isdigit():
            raise DumpConfigError(f'{source}: step {item!r} is neither a step nor a range such as "2-4"')
        found += range(int(first), int(last) + 1)
    return found
