"""ptdbg_ascend's functions, so that ``from tscore.ptdbg import *`` replaces ``from ptdbg_ascend import *``.

``seed_all``, ``set_dump_path``, ``register_hook`` (with ``acc_cmp_dump`` or ``overflow_check``),
``set_dump_switch``, ``set_overflow_check_switch``, ``parse``, ``compare`` and
``compare_distributed`` keep ptdbg's names and arguments; the manual's page "Coming from
ptdbg_ascend" (``docs/coming-from/ptdbg.md``) shows a whole run, tested, and each function's status.

The dump lands in tscore's layout (:mod:`tscore.dump.writer`):
``{folder of the path}/{dump_tag}/step{k}/rank{r}/``, one step per
``"ON"``/``"OFF"`` pair. Every mode of ``set_dump_switch`` works on CPU and
GPU except ``acl``, which needs an Ascend NPU (torch_npu and the ts_npu plugin).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tscore.compare.report import print_report
from tscore.dump.acl_config import check_acl_config
from tscore.dump.config import DumpConfigError, make_config
from tscore.dump.debugger import Debugger
from tscore.dump.modes import mode_filters
from tscore.dump_compare.compare import compare
from tscore.dump_compare.distributed import compare_distributed
from tscore.dump_format.reading import find_records, format_record
from tscore.plugins import hook as plugin_hook
from tscore.seeding import seed_all as _seed_all

log = logging.getLogger(__name__)

__all__ = [
    "acc_cmp_dump",
    "compare",
    "compare_distributed",
    "overflow_check",
    "parse",
    "register_hook",
    "seed_all",
    "set_backward_input",
    "set_dump_path",
    "set_dump_switch",
    "set_overflow_check_switch",
]

MODES = ("all", "list", "range", "stack", "api_list", "api_stack", "acl")
DEFAULT_TAG = "ptdbg_dump"


def acc_cmp_dump(*args: object, **kwargs: object) -> None:
    """Ptdbg's accuracy-comparison dump hook: pass it to :func:`register_hook`; it is not called directly."""
    raise TypeError("acc_cmp_dump is passed to register_hook(model, acc_cmp_dump), not called")


def overflow_check(*args: object, **kwargs: object) -> None:
    """Ptdbg's overflow-check hook: pass it to :func:`register_hook`; it is not called directly."""
    raise TypeError("overflow_check is passed to register_hook(model, overflow_check), not called")


class _Session:
    """What the ptdbg functions set, one per process, as ptdbg keeps it."""

    def __init__(self) -> None:
        self.dump_path = os.path.join(".", DEFAULT_TAG)
        self.pkl_path: str | None = None
        self.folders: dict[str, str] = {}  # each path given to set_dump_path -> its dump folder
        self.model: object = None
        self.rank: int | None = None
        self.debugger: Debugger | None = None
        self.steps = 0
        self.overflow_nums: int | None = None  # set by register_hook(model, overflow_check)
        self.acl_config: str | None = None  # set by register_hook(model, acc_cmp_dump, dump_mode="acl")


_session = _Session()


def seed_all(seed: int = 1234, mode: bool = False) -> None:
    """Seed Python, numpy and every installed framework; ``mode=True`` asks for deterministic kernels."""
    _seed_all(seed, mode=mode)


def set_dump_path(fpath: str | os.PathLike[str] | None = None, dump_tag: str = DEFAULT_TAG) -> None:
    """Say where the dump goes: ``{folder of fpath}/{dump_tag}/``.

    :param fpath: ptdbg's "dump file", such as ``./npu_dump.pkl``; its folder must exist.
    :param dump_tag: the folder name under it, to tell dumps apart (``"all"``, ``"conv2d_stack"``).
    :raises TargetPathError: when the folder does not exist.
    """
    from tscore.npy_files import writable_target

    if fpath is None:
        raise TypeError("set_dump_path: pass the dump file path, such as './npu_dump.pkl'")
    name = writable_target(fpath, "set_dump_path")
    tag = str(dump_tag or DEFAULT_TAG)
    if os.sep in tag or tag in (".", ".."):
        raise ValueError(f"set_dump_path: dump_tag {tag!r} must be a plain folder name")
    _session.pkl_path = name
    _session.dump_path = os.path.join(os.path.dirname(os.path.abspath(name)), tag)
    _session.folders[os.path.abspath(name)] = _session.dump_path
    _session.steps = 0


def register_hook(
    model: object,
    hook: Callable[..., Any],
    overflow_nums: int = 1,
    dump_mode: str = "api",
    dump_config: str | None = None,
    rank: int | None = None,
    **kwargs: object,
) -> None:
    """Name the model to dump and the rank to dump as; the dump starts at ``set_dump_switch("ON")``.

    :param hook: :func:`acc_cmp_dump`, or :func:`overflow_check`, which starts checking every API
        call's outputs for inf and NaN at once (on any device; :mod:`tscore.dump.overflow`) and
        stops the training at the ``overflow_nums``-th call that overflows by itself (``-1``: never).
    :param dump_mode: ``"api"``, or ``"acl"`` with :func:`acc_cmp_dump`: the calls that
        ``set_dump_switch("ON", mode="acl", scope=[...])`` names then run under the device's
        kernel-level dump configured by ``dump_config`` (spec 004's ``dump.json``; an Ascend NPU
        with torch_npu and the ts_npu plugin).
    :param rank: the rank folder to write (default: the framework's rank, else 0).
    :raises DumpConfigError: for ``dump_mode="acl"`` without a valid ``dump_config`` or without a
        device that has a kernel-level dump, an ``overflow_nums`` that is not a count, and an
        unknown hook; before anything is installed.
    """
    if hook is not acc_cmp_dump and hook is not overflow_check:
        raise DumpConfigError(
            f"register_hook: the hook is acc_cmp_dump or overflow_check (tscore.ptdbg), not {hook!r}"
        )
    if dump_mode not in ("api", "acl"):
        raise DumpConfigError(f"register_hook: dump_mode is 'api' or 'acl', not {dump_mode!r}")
    acl_config = None
    if dump_mode == "acl":
        if hook is overflow_check:
            raise DumpConfigError(
                "register_hook(model, overflow_check, dump_mode='acl'): replaying an overflowing call under "
                "the ACL dump is not part of this version; use dump_mode='api' (every own overflow's tensors "
                "are saved) and then set_dump_switch('ON', mode='acl', scope=[that call])"
            )
        acl_config = check_acl_config(dump_config, "register_hook")
        if plugin_hook().ts_kernel_dump(config_path=acl_config) is None:
            raise DumpConfigError(
                "register_hook(dump_mode='acl') needs ACL dumps of an Ascend NPU: torch_npu imported and the "
                "ts_npu plugin installed; on this device use dump_mode='api'"
            )
    if rank is not None and (not isinstance(rank, int) or rank < 0):
        raise ValueError(f"register_hook: rank must be a rank number >= 0, not {rank!r}")
    _session.model = model
    _session.rank = rank
    _session.acl_config = acl_config
    if hook is overflow_check:
        make_config({"task": "overflow_check", "overflow_nums": overflow_nums}, "register_hook")
        _session.overflow_nums = overflow_nums
        set_overflow_check_switch("ON")
    else:
        _session.overflow_nums = None


def set_overflow_check_switch(switch: str, filter_switch: str = "ON") -> None:
    """Turn the overflow check that :func:`register_hook` ``(model, overflow_check)`` started on or off.

    Checking runs from ``register_hook`` on; to check chosen steps only, turn it ``"OFF"`` and
    ``"ON"`` around them (each ``"ON"`` begins a new ``step{k}`` folder).

    :param filter_switch: ``"ON"`` leaves bool and integer tensors out of the records.
    :raises DumpConfigError: for a switch or filter that is not ``"ON"``/``"OFF"``, or when
        ``register_hook(model, overflow_check)`` was not called.
    """
    if switch not in ("ON", "OFF"):
        raise DumpConfigError(f"set_overflow_check_switch: the switch is 'ON' or 'OFF', not {switch!r}")
    if filter_switch not in ("ON", "OFF"):
        raise DumpConfigError(
            f"set_overflow_check_switch: filter_switch is 'ON' or 'OFF', not {filter_switch!r}"
        )
    if _session.overflow_nums is None:
        raise DumpConfigError(
            "set_overflow_check_switch: call register_hook(model, overflow_check, overflow_nums=N) first"
        )
    if _session.debugger is not None:
        _session.debugger.stop()
        _session.debugger = None
    if switch == "OFF":
        return
    config = make_config(
        {
            "task": "overflow_check",
            "dump_path": _session.dump_path,
            "overflow_nums": _session.overflow_nums,
            "filter_int": filter_switch == "ON",
            "step": [],
            "level": "L1",
        },
        "set_overflow_check_switch",
    )
    debugger = Debugger(config, rank_id=_session.rank)
    debugger.current_step = _session.steps
    _session.steps += 1
    debugger.start(_session.model)
    _session.debugger = debugger


def set_dump_switch(
    switch: str,
    mode: str = "all",
    scope: Iterable[str] | None = None,
    api_list: Iterable[str] | None = None,
    filter_switch: str = "ON",
    dump_mode: Sequence[str] | None = None,
    summary_only: bool = False,
) -> None:
    """Turn the dump on or off; ``mode`` chooses what to dump (spec 004).

    * ``all``: every API call; ``list``: the calls named in ``scope``
      (``["Tensor_permute_1_forward", "Torch_relu_3_backward"]``); ``range``: every call from
      ``scope[0]`` to ``scope[1]``; ``stack``: their stacks only; ``api_list``: every call of
      the APIs named (``["relu"]``); ``api_stack``: everything, with stacks; ``acl``: the forward
      calls named in ``scope`` run under the device's kernel-level dump (after
      ``register_hook(model, acc_cmp_dump, dump_mode="acl", dump_config=...)``; an Ascend NPU).
    * ``filter_switch="OFF"`` keeps bool and integer tensors too.
    * ``dump_mode``: ``["forward"]``, ``["backward"]``, ``["input"]``, ``["output"]`` or ``["all"]``.
    * ``summary_only``: statistics without the tensors.

    :raises DumpConfigError: for an unknown switch or mode, a scope that does not fit the mode,
        or ``acl`` without ``register_hook(..., dump_mode="acl")`` or with a backward call;
        naming the value and the accepted ones.
    """
    if switch not in ("ON", "OFF"):
        raise DumpConfigError(f"set_dump_switch: the switch is 'ON' or 'OFF', not {switch!r}")
    if switch == "OFF":
        debugger, _session.debugger = _session.debugger, None
        if debugger is not None:
            debugger.stop()
            _write_ptdbg_pkl(debugger)
        return
    if mode not in MODES:
        raise DumpConfigError(f"set_dump_switch: mode {mode!r} is not one of {', '.join(MODES)}")
    if filter_switch not in ("ON", "OFF"):
        raise DumpConfigError(f"set_dump_switch: filter_switch is 'ON' or 'OFF', not {filter_switch!r}")
    if _session.debugger is not None:
        _session.debugger.stop()
    values = mode_filters(mode, list(scope or []), list(api_list or []), _session.acl_config)
    values.update(
        task="statistics" if summary_only else "tensor",
        dump_path=_session.dump_path,
        filter_int=filter_switch == "ON",
        data_mode=list(dump_mode or ["all"]),
        step=[],
        level="L1",
    )
    values.setdefault("stack", mode in ("stack", "api_stack", "range", "list"))
    config = make_config(values, "set_dump_switch")
    debugger = Debugger(config, rank_id=_session.rank)
    debugger.current_step = _session.steps
    _session.steps += 1
    debugger.start(_session.model)
    _session.debugger = debugger


def _write_ptdbg_pkl(debugger: Debugger) -> None:
    """Also write ptdbg's ``.pkl`` (JSON lines ``[name, step, [], dtype, shape, [max, min, mean]]``).

    It goes beside tscore's records in each folder dumped, named after the path given to
    :func:`set_dump_path`, so that tools reading ptdbg's files read this dump.
    """
    if _session.pkl_path is None:
        return
    stem = os.path.splitext(os.path.basename(_session.pkl_path))[0]
    for folder in debugger.folders:
        try:
            with open(os.path.join(folder, f"{stem}.pkl"), "w", encoding="utf-8") as out:
                for record in find_records(folder):
                    for side in ("inputs", "outputs"):
                        for entry in record.get(side, ()):
                            if entry.get("type") != "tensor" or "error" in entry:
                                continue
                            summary = [entry.get("max"), entry.get("min"), entry.get("mean")]
                            line = [
                                entry["name"],
                                record["step"],
                                [],
                                entry["dtype"],
                                entry["shape"],
                                summary,
                            ]
                            out.write(json.dumps(line) + "\n")
        except OSError as exc:
            log.warning("ptdbg .pkl not written in %s: %s", folder, exc)


def set_backward_input(backward_input: Iterable[str]) -> None:
    """Ptdbg's gradient files for replaying a backward call under the ACL dump: not in this version.

    :raises DumpConfigError: always, saying what to use instead (the forward call's ACL dump, or
        the backward call's tensors with ``mode="list"``).
    """
    raise DumpConfigError(
        "set_backward_input: replaying a backward call from saved gradients under the ACL dump is not part "
        "of this version; dump the forward call with mode='acl', or the backward call's tensors with "
        "set_dump_switch('ON', mode='list', scope=[...])"
    )


def parse(pkl_path: str | os.PathLike[str], api_name: str) -> list[dict[str, Any]]:
    """Print the stack and statistics of one call (or every call whose name starts with ``api_name``).

    :param pkl_path: the path given to :func:`set_dump_path`, a dump folder, a ``dump.jsonl``, or
        another tool's dump: msprobe's ``dump.json`` (or its folder), ptdbg_ascend's ``.pkl``.
    :param api_name: ``Torch_batch_norm_1_forward`` (msprobe's ``Torch.batch_norm.1.forward`` works too).
    :return: the matching records, with their stacks.
    :raises FileNotFoundError: naming the path when no dump is there.
    """
    try:
        records = find_records(os.fspath(pkl_path), api_name, session_path=_session_folder(pkl_path))
    except FileNotFoundError:  # not tscore's: msprobe's dump.json or ptdbg_ascend's own .pkl
        records = _other_records(os.fspath(pkl_path), api_name)
    if not records:
        log.warning("parse: no call named %s in %s", api_name, os.fspath(pkl_path))
    print_report("\n\n".join(format_record(record) for record in records) or f"no call named {api_name}")
    return records


def _other_records(path: str, api_name: str) -> list[dict[str, Any]]:
    """Find the calls named ``api_name`` (or starting with it) in an msprobe or ptdbg_ascend dump."""
    from tscore.dump_compare.calls import DumpReadError
    from tscore.dump_compare.sources import as_records, read_dump
    from tscore.dump_format.names import canonical

    try:
        source = read_dump(path)
    except DumpReadError as exc:
        raise FileNotFoundError(str(exc)) from None
    wanted = canonical(api_name)
    return [r for r in as_records(source) if r["name"].startswith(wanted)]


def _session_folder(pkl_path: str | os.PathLike[str]) -> str | None:
    """Return the dump folder of a path given to :func:`set_dump_path` in this process, if it was given."""
    return _session.folders.get(os.path.abspath(os.fspath(pkl_path)))
