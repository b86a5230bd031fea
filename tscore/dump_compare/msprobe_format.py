"""Reading msprobe's dumps.

``dump.json`` (``{"task", "level", "data": {call: {...}}}``), ``stack.json``, and
tensors in ``dump_tensor_data/`` as ``.pt`` (read through the torch plugin,
weights only) or ``.npy``.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tscore.dump_compare.calls import (
    READ_AT_ONCE,
    Call,
    DumpReadError,
    DumpSource,
    Item,
    file_inside,
    flag_of,
    neutral_dtype_of,
    number_of,
    rank_of,
    shape_of,
)
from tscore.dump_format.names import MODULE_PREFIX, CallName, parse_name
from tscore.json_files import read_side_json
from tscore.json_members import DAMAGED, Members, NotAnObjectDocument, read_members

log = logging.getLogger(__name__)


MSPROBE_FILE = "dump.json"


MSPROBE_STACKS = "stack.json"


MSPROBE_TENSORS = "dump_tensor_data"


_NO_STATS = (None, None, None, None)


_PATHS: dict[tuple[str, ...], str] = {}


def _joined_path(path: tuple[str, ...]) -> str:
    """Join a value's path (``("0", "1")`` gives ``"0.1"``), one string for each path a dump repeats."""
    joined = _PATHS.get(path)
    if joined is None:
        joined = ".".join(path)
        if len(_PATHS) < 4096:
            _PATHS[path] = joined
    return joined


def _msprobe_items(
    role: str, path: tuple[str, ...], value: Any, call: str, tensors: str, out: list[Item]
) -> None:
    """Flatten one msprobe value (a tensor dict, a plain value dict, None, or a list of them)."""
    if value.__class__ is list:
        for index, inner in enumerate(value):
            _msprobe_items(role, (*path, str(index)), inner, call, tensors, out)
        return
    joined = _joined_path(path)
    name = f"{call}.{role}.{joined}" if joined else f"{call}.{role}"
    if value.__class__ is dict and "Max" in value and "dtype" in value and "shape" in value:
        out.append(_msprobe_tensor(role, joined, name, value, tensors))  # the bulk of every dump
        return
    if value is None:
        out.append(Item(role, joined, name, is_tensor=False, dtype="None"))
        return
    if not isinstance(value, dict):  # JSON gives dicts: no abstract Mapping check per value
        out.append(Item(role, joined, name, is_tensor=False, dtype=type(value).__name__, value=value))
        return
    kind = str(value.get("type", ""))
    if "dtype" in value and "shape" in value and ("Tensor" in kind or "ndarray" in kind):
        out.append(_msprobe_tensor(role, joined, name, value, tensors))
        return
    if "value" in value or kind:
        out.append(Item(role, joined, name, is_tensor=False, dtype=kind or None, value=value.get("value")))
        return
    for key, inner in value.items():  # a dict argument: one item per key
        _msprobe_items(role, (*path, str(key)), inner, call, tensors, out)


def _msprobe_tensor(role: str, path: str, name: str, value: dict[str, Any], tensors: str) -> Item:
    """Read one tensor of an msprobe record: dtype, shape, statistics, md5 and file."""
    get = value.get
    high, low, mean, norm = get("Max"), get("Min"), get("Mean"), get("Norm")
    stats: tuple[float | None, ...] | None
    if high.__class__ is low.__class__ is mean.__class__ is norm.__class__ is float:
        stats = (high, low, mean, norm)  # the bulk of a dump: four floats as JSON gave them
    else:
        stats = (number_of(high), number_of(low), number_of(mean), number_of(norm))
        if stats == _NO_STATS:
            stats = None
    data_name = get("data_name")
    file, error = file_inside(tensors, data_name) if data_name and data_name != "-1" else (None, None)
    md5 = get("md5")
    return Item(
        role,
        path,
        name,
        True,
        neutral_dtype_of(str(get("dtype"))),
        shape_of(get("shape") or []),
        stats,  # type: ignore[arg-type]
        md5 if md5.__class__ is str else None,
        file,
        None,
        error,
        flag_of(get("requires_grad")),
    )


def msprobe_stacks(folder: str) -> dict[str, list[str]]:
    """``{call name: stack lines}`` from msprobe's ``stack.json`` (26.x: numbered groups; older: by name)."""
    raw = read_side_json(os.path.join(folder, MSPROBE_STACKS)) or {}
    stacks: dict[str, list[str]] = {}
    for key, value in raw.items() if isinstance(raw, Mapping) else ():
        if isinstance(value, list) and len(value) == 2 and isinstance(value[0], list):
            names, lines = value
            ordered = [str(line) for line in reversed(lines)]  # msprobe: innermost first; tscore's order
            for name in names:
                stacks[str(name)] = ordered
        elif isinstance(value, list):
            stacks[str(key)] = [str(line) for line in value]
    return stacks


def msprobe_document(records_file: str) -> tuple[Mapping[str, Any], Iterable[tuple[str, Any]], Any]:
    """Open an msprobe ``dump.json``: its small members, its calls as they are read, what to close.

    The calls are parsed a few megabytes at a time (:mod:`tscore.json_members`); a document that
    is not laid out as msprobe's is parsed whole, for a clear error.
    """
    try:
        members = read_members(records_file, "data")
        return members.head, members, members
    except NotAnObjectDocument:
        pass
    except OSError as exc:
        raise DumpReadError(f"{records_file}: cannot be read ({exc})") from None
    document = read_side_json(records_file)
    if not isinstance(document, Mapping) or not isinstance(document.get("data"), Mapping):
        raise DumpReadError(
            f"{records_file}: not an msprobe dump.json (no 'data' object); the file may be cut short"
        )
    return document, document["data"].items(), None


def read_msprobe(records_file: str, lazy: bool = False) -> DumpSource:
    """Read an msprobe ``dump.json``; with ``lazy``, the values of all but the first calls on demand."""
    folder = os.path.dirname(records_file)
    head, records, opened = msprobe_document(records_file)
    calls: list[Call] = []
    md5 = False
    try:
        tensors = msprobe_tensors(folder, head)
        stacks = msprobe_stacks(folder)
        # a record that is not JSON comes under its key, as the in-step reading gives it (streams.py)
        spans = (
            opened.with_spans(keep_damaged=True) if opened is not None else ((k, v, None) for k, v in records)
        )
        for label, body, span in spans:
            name = parse_name(str(label))
            if name is None:
                log.warning("%s: %r is not a call msprobe names; left out", records_file, label)
                continue
            call = msprobe_call(name, str(label), len(calls), stacks)
            calls.append(call)
            if lazy and span is not None and len(calls) > READ_AT_ONCE and isinstance(body, Mapping):
                call.span, call.record = span, str(label)  # its values are read when compared
            elif fill_msprobe_record(call, str(label), body, tensors, records_file):  # False: logged
                md5 = md5 or any(item.md5 for item in call.items)  # md5 summaries: the first calls say
    except BaseException:
        if opened is not None:
            opened.close()
        raise
    source = msprobe_source(folder, head, calls, md5)
    if opened is not None and any(c.span is not None for c in calls):
        source.loader = functools.partial(_load_msprobe, opened, tensors, records_file)
        source.closer = opened.close
    elif opened is not None:
        opened.close()
    return source


def msprobe_source(folder: str, head: Mapping[str, Any], calls: list[Call], md5: bool) -> DumpSource:
    """Describe an msprobe dump folder (task, rank, framework, from ``dump.json``'s head) holding ``calls``.

    :param md5: its first calls hold md5 (CRC32) summaries instead of statistics.
    """
    task = str(head.get("task", "statistics"))
    if task != "tensor" and md5:
        task = "md5"
    framework = head.get("framework")
    return DumpSource(
        folder,
        "msprobe",
        calls,
        task,
        rank=rank_of(folder),
        framework=framework if isinstance(framework, str) else None,
    )


def msprobe_call(name: CallName, label: str, order: int, stacks: Mapping[str, list[str]]) -> Call:
    """Make the call of one msprobe record, without its values (``_fill_msprobe_call`` reads them)."""
    call = Call(name, order, stack=stacks.get(label, _NO_STACK))
    if name.prefix == MODULE_PREFIX:
        call.module = name.api.rpartition(".")[0]
    return call


_NO_STACK: list[str] = []  # shared by every call with no stack: never changed


def msprobe_tensors(folder: str, head: Mapping[str, Any]) -> str:
    """Return the folder of an msprobe dump's tensor files: beside ``dump.json``, where msprobe looks."""
    tensors = os.path.join(folder, MSPROBE_TENSORS)
    if not os.path.isdir(tensors) and isinstance(head.get("dump_data_dir"), str):
        tensors = str(head["dump_data_dir"])
    return tensors


def _load_msprobe(members: Members, tensors: str, records_file: str, calls: Sequence[Call]) -> None:
    """Read again the records of ``calls`` (read on demand) and give them their values."""
    wanted = [c for c in calls if not c.inputs and not c.outputs and c.record is not None]
    if not wanted:
        return
    try:
        bodies = members.values_at([c.span for c in wanted])  # type: ignore[misc]
    except ValueError as exc:  # the file changed since it was read
        raise DumpReadError(f"{records_file}: changed while it was compared ({exc})") from None
    for call, body in zip(wanted, bodies, strict=True):
        if isinstance(body, Mapping):
            _fill_msprobe_call(call, call.record or "", body, tensors, records_file)


def fill_msprobe_record(call: Call, label: str, body: Any, tensors: str, records_file: str) -> bool:
    """Give ``call`` the values of its record; False (logged) leaves it a call with no values.

    A record that is not JSON (:data:`DAMAGED`, already warned of) or not an object is such a
    call, in the whole reading and the in-step one alike.
    """
    if isinstance(body, Mapping):
        return _fill_msprobe_call(call, label, body, tensors, records_file)
    if body is not DAMAGED:
        log.warning("%s: the record of %r is not an object; read with no values", records_file, label)
    return False


def _fill_msprobe_call(
    call: Call, label: str, body: Mapping[str, Any], tensors: str, records_file: str
) -> bool:
    """Read the values of one call of an msprobe ``dump.json``; False (logged) when its record is bad."""
    inputs: list[Item] = []
    outputs: list[Item] = []
    try:
        for key, value in body.items():
            if key in ("input_args", "input"):
                _msprobe_items("input", (), value, label, tensors, inputs)
            elif key == "input_kwargs" and isinstance(value, Mapping):
                for kwarg, inner in value.items():
                    _msprobe_items("input", (str(kwarg),), inner, label, tensors, inputs)
            elif key == "output":
                _msprobe_items("output", (), value, label, tensors, outputs)
            elif key == "parameters" and isinstance(value, Mapping):  # a module's own (L0, mix)
                for param, inner in value.items():
                    _msprobe_items("input", ("parameters", str(param)), inner, label, tensors, inputs)
            elif call.name.direction == "parameters_grad":  # {"weight": [grad], "bias": [grad]}
                _msprobe_items("output", (str(key),), value, label, tensors, outputs)
    except Exception as exc:
        log.warning("%s: the record of %r could not be read and is left out: %r", records_file, label, exc)
        return False
    call.inputs, call.outputs = inputs, outputs
    call.settle()
    return True
