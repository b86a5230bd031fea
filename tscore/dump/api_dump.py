"""TroubleShooter's ``api_dump_init/start/stop/compare``: thin, deprecated entries into tscore's API dump.

They keep a TroubleShooter script running unchanged; each call warns
(``DeprecationWarning``) with the tscore call that does the same:
:class:`tscore.dump.Debugger` for the dump, :func:`tscore.dump.compare_dumps`
for the comparison. The dump is tscore's (``{output_path}/step{k}/rank{r}/``,
one step per start/stop pair), which every tscore comparison reads.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tscore.dump.config import DumpConfigError, make_config
from tscore.dump.debugger import Debugger
from tscore.dump.modes import mode_filters
from tscore.npy_files import writable_target

if TYPE_CHECKING:
    from tscore.dump_compare.report import DumpCompareReport

log = logging.getLogger(__name__)

DUMP_TYPES = ("all", "statistics", "stack", "npy")
MODES = ("all", "list", "range", "api_list")  # TroubleShooter's; scope names the calls or APIs
_STEP = re.compile(r"^step(\d+)$")


class _ApiDump:
    """What ``api_dump_init`` set, one per process, as TroubleShooter keeps it."""

    def __init__(self) -> None:
        self.net: object = None
        self.output_path: str | None = None
        self.debugger: Debugger | None = None
        self.steps = 0


_state = _ApiDump()


def _deprecated(call: str, instead: str) -> None:
    warnings.warn(f"{call} is TroubleShooter's; use {instead}", DeprecationWarning, stacklevel=3)


def api_dump_init(
    net: object,
    output_path: str | os.PathLike[str] | None = None,
    *,
    retain_backward: bool = False,
    **kwargs: Any,
) -> None:
    """Name the network whose API calls :func:`api_dump_start` dumps, and the folder (created if missing).

    :param output_path: default ``./ts_api_dump``, as in TroubleShooter.
    :param retain_backward: accepted: tscore dumps the backward calls of a step either way.
    """
    del retain_backward, kwargs
    _deprecated("api_dump_init(net, output_path)", "ts.dump.Debugger(dump_path=output_path).start(net)")
    folder = os.fspath(output_path) if output_path is not None else os.path.join(os.getcwd(), "ts_api_dump")
    os.makedirs(folder, exist_ok=True)
    writable_target(os.path.join(folder, "dump_info.json"), "output_path")
    _state.net, _state.output_path, _state.steps = net, folder, 0


def api_dump_start(
    mode: str = "all",
    scope: Sequence[str] | None = None,
    dump_type: str = "all",
    filter_data: bool = True,
    filter_stack: bool = True,
    overflow_check: bool = False,
    statistic_category: Sequence[str] | None = None,
) -> None:
    """Start dumping the API calls of the network given to :func:`api_dump_init` (one step per start).

    :param mode: ``all``, ``list``, ``range``, ``api_list`` (ptdbg's modes; ``scope`` names the
        calls or APIs).
    :param dump_type: ``all`` or ``npy`` (tensors), ``statistics``, ``stack`` (names and stacks).
    :param filter_data: leave out bool and integer tensors.
    :param overflow_check: record only the calls whose outputs hold inf or NaN, with the full
        tensors of those that made it (:mod:`tscore.dump.overflow`); the step is never stopped.
    :raises RuntimeError: before :func:`api_dump_init`.
    :raises DumpConfigError: for an unknown mode or dump_type.
    """
    del filter_stack, statistic_category  # tscore records max, min, mean and L2 norm, stacks whole
    _deprecated("api_dump_start()", "ts.dump.Debugger(...).start(net)")
    if _state.output_path is None:
        raise RuntimeError("api_dump_start: call api_dump_init(net, output_path) first")
    names = list(scope or [])
    if mode not in MODES:
        raise DumpConfigError(f"api_dump_start: mode {mode!r} is not one of {', '.join(MODES)}")
    if (mode in ("list", "api_list") and not names) or (mode == "range" and len(names) != 2):
        wanted = "the first and last call" if mode == "range" else "the calls or APIs to dump"
        raise DumpConfigError(f"api_dump_start(mode={mode!r}) needs scope=[{wanted}], got {names!r}")
    if dump_type not in DUMP_TYPES:
        raise DumpConfigError(
            f"api_dump_start: dump_type {dump_type!r} is not one of {', '.join(DUMP_TYPES)}"
        )
    values = mode_filters(mode, names, names)  # ptdbg's modes, which TroubleShooter's are
    values.update(
        task="overflow_check"
        if overflow_check
        else ("statistics" if dump_type == "statistics" else "tensor"),
        dump_path=_state.output_path,
        filter_int=bool(filter_data),
        step=[],
        level="L1",
    )
    if overflow_check:
        values["overflow_nums"] = -1
    elif dump_type == "stack":
        values["stack_only"] = True
    if _state.debugger is not None:
        _state.debugger.stop()
    debugger = Debugger(make_config(values, "api_dump_start"))
    debugger.current_step = _state.steps
    _state.steps += 1
    debugger.start(_state.net)
    _state.debugger = debugger


def api_dump_stop() -> None:
    """Stop the dump that :func:`api_dump_start` started; its files are complete when this returns.

    :raises RuntimeError: before :func:`api_dump_init`.
    """
    _deprecated("api_dump_stop()", "Debugger.stop()")
    if _state.output_path is None:
        raise RuntimeError("api_dump_stop: call api_dump_init(net, output_path) first")
    debugger, _state.debugger = _state.debugger, None
    if debugger is not None:
        debugger.stop()


def api_dump_compare(
    origin_path: str | os.PathLike[str],
    target_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str] | None = None,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    equal_nan: bool = False,
    ignore_unmatched: bool = False,
    **kwargs: Any,
) -> list[DumpCompareReport]:
    """Compare two API dumps step by step, the target run against the origin one (:func:`compare_dumps`).

    :param origin_path: the ``output_path`` of :func:`api_dump_init` in the run that is right:
        each ``step{k}`` folder both runs dumped is compared with its namesake (one per
        start/stop pair); a single step or rank folder works too.
    :param output_path: the folder for each step's CSV and advisor file (``_step{k}`` in their
        names), created if missing; None writes nothing.
    :param rtol: accepted with ``atol`` and ``equal_nan``: the dump comparison judges each call
        by its scale-free error (see :func:`tscore.dump.compare_dumps`'s ``tolerance``).
    :param ignore_unmatched: say nothing of the calls made in one run only.
    :return: one report per step compared: every call's verdict, the first with an error of its own.
    :raises DumpReadError: naming a folder that holds no dump, or two runs with no step in common.
    """
    del rtol, atol, equal_nan, kwargs
    _deprecated(
        "api_dump_compare(origin_path, target_path)", "ts.dump.compare_dumps(target_path, origin_path)"
    )
    from tscore.dump_compare import DumpReadError, compare_dumps

    origin, target = os.fspath(origin_path), os.fspath(target_path)
    out = None if output_path is None else os.fspath(output_path)
    if out is not None:
        os.makedirs(out, exist_ok=True)
    steps = [_steps(origin), _steps(target)]
    if not steps[0] or not steps[1]:  # a step or rank folder itself
        pairs = [(origin, target, "")]
    else:
        shared = sorted(steps[0].keys() & steps[1].keys())
        if not shared:
            raise DumpReadError(
                f"api_dump_compare: {origin!r} (steps {sorted(steps[0])}) and {target!r} (steps "
                f"{sorted(steps[1])}) have no step in common"
            )
        pairs = [(steps[0][k], steps[1][k], f"_step{k}") for k in shared]
    reports = []
    for orig_folder, target_folder, suffix in pairs:
        report = compare_dumps(target_folder, orig_folder, out, suffix=suffix)
        unpaired = report.counts().get("unpaired", 0)
        if unpaired and not ignore_unmatched:
            log.warning("api_dump_compare%s: %d calls were made in one run only", suffix, unpaired)
        reports.append(report)
    return reports


def _steps(folder: str) -> dict[int, str]:
    """Return the ``step{k}`` folders under ``folder`` by step number (none: ``folder`` is one dump)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    found = {}
    for name in names:
        match = _STEP.match(name)
        if match and os.path.isdir(os.path.join(folder, name)):
            found[int(match.group(1))] = os.path.join(folder, name)
    return found
