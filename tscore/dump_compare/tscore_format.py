"""Reading tscore's own dumps: ``dump.jsonl``, ``stack.jsonl`` and ``tensors/*.npy``."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from tscore.dump_compare.calls import (
    READ_AT_ONCE,
    Call,
    DumpSource,
    Item,
    file_inside,
    flag_of,
    number_of,
    rank_of,
    shape_of,
    split_entry_name,
)
from tscore.dump_format.files import TENSORS_FOLDER
from tscore.dump_format.names import CallName
from tscore.dump_format.reading import parse_line, read_info, read_lines_at, read_stacks, stack_of
from tscore.json_members import FileText

log = logging.getLogger(__name__)


def _tscore_item(call: str, entry: Mapping[str, Any], folder: str) -> Item:
    name = str(entry.get("name", ""))
    role, path = split_entry_name(call, name)
    if entry.get("parameter") and role == "input":  # a kernel's weight (tscore.dump.native): judged as one
        path = f"parameters.{path}"
    if entry.get("type") != "tensor":
        return Item(role, path, name, is_tensor=False, dtype=str(entry.get("type")), value=entry.get("value"))
    stats = tuple(number_of(entry.get(key)) for key in ("max", "min", "mean", "norm"))
    file, error = file_inside(folder, entry.get("file"))
    return Item(
        role,
        path,
        name,
        True,
        str(entry["dtype"]) if entry.get("dtype") is not None else None,
        shape_of(entry.get("shape")),
        stats if stats != (None, None, None, None) else None,  # type: ignore[arg-type]
        entry.get("md5") if isinstance(entry.get("md5"), str) else None,
        file,
        None,
        error or (str(entry["error"]) if entry.get("error") is not None else None),
        flag_of(entry.get("requires_grad")),
    )


def read_tscore(records_file: str, lazy: bool = False) -> DumpSource:
    """Read a tscore ``dump.jsonl``; with ``lazy``, the values of all but the first calls on demand."""
    folder = os.path.dirname(records_file)
    stacks = read_stacks(folder)
    calls: list[Call] = []
    for record, span in read_lines_at(records_file):
        try:
            call = tscore_call(record, len(calls), stacks)
            if lazy and len(calls) >= READ_AT_ONCE:
                call.span, call.record = span, str(record["name"])  # its values are read when compared
            else:
                fill_tscore_call(call, str(record["name"]), record, folder)
        except Exception as exc:
            log.warning("%s: a record could not be read and is left out: %r", records_file, exc)
            continue
        calls.append(call)
    source = tscore_source(folder, calls)
    if any(c.record is not None for c in calls):
        text = FileText(records_file)
        source.loader = functools.partial(_load_tscore, text, folder, records_file)
        source.closer = text.close
    return source


def tscore_call(record: dict[str, Any], order: int, stacks: dict[int, list[str]]) -> Call:
    """Make the call of one tscore record, without its values (``fill_tscore_call`` reads them).

    :raises KeyError, TypeError, ValueError: when the record lacks what names a call.
    """
    return Call(
        tscore_name(record),
        order,
        module=record.get("module"),
        key=record.get("key"),
        stack=stack_of(record, stacks),
    )


def tscore_name(record: dict[str, Any]) -> CallName:
    """Return the call a tscore record names.

    :raises KeyError, TypeError, ValueError: when the record lacks what names a call.
    """
    name = CallName(record["prefix"], record["api"], int(record["index"]), record["direction"])
    str(record["name"])  # every record names itself; one that does not is left out
    return name


def tscore_source(folder: str, calls: list[Call]) -> DumpSource:
    """Describe a tscore dump folder (task, rank, frameworks, from ``dump_info.json``) holding ``calls``."""
    info = read_info(folder)
    found = info.get("config")
    config: dict[str, Any] = found if isinstance(found, dict) else {}
    task = str(config.get("task", "statistics"))
    if task != "tensor" and config.get("summary_mode") == "md5":
        task = "md5"
    if task == "tensor" and not os.path.isdir(os.path.join(folder, TENSORS_FOLDER)):
        task = "statistics"
    recorded = info.get("recorded_frameworks") or list(info.get("frameworks") or {})[:1]
    rank = info.get("rank", rank_of(folder))
    return DumpSource(
        folder,
        "tscore",
        calls,
        task,
        rank=rank if isinstance(rank, int) else rank_of(folder),
        framework=" + ".join(str(f) for f in recorded) if isinstance(recorded, list) and recorded else None,
        devices=[str(d) for d in devices] if isinstance(devices := info.get("devices"), list) else (),
    )


def fill_tscore_call(call: Call, label: str, record: Mapping[str, Any], folder: str) -> None:
    """Read the values of one record of a tscore dump."""
    call.inputs = [_tscore_item(label, e, folder) for e in record.get("inputs", ())]
    call.outputs = [_tscore_item(label, e, folder) for e in record.get("outputs", ())]
    call.settle()


def _load_tscore(text: FileText, folder: str, records_file: str, calls: Sequence[Call]) -> None:
    """Read again the lines of ``calls`` (read on demand) and give them their values."""
    wanted = sorted((c for c in calls if c.record is not None and not c.inputs and not c.outputs), key=_at)
    start = 0
    while start < len(wanted):  # lines that follow each other are read in one go
        end = start + 1
        while end < len(wanted) and _at(wanted[end]) == sum(wanted[end - 1].span or (0, 0)):
            end += 1
        begin, last = _at(wanted[start]), wanted[end - 1].span
        assert last is not None
        run = text[begin : last[0] + last[1]]
        for call in wanted[start:end]:
            at, length = call.span or (0, 0)
            try:
                fill_tscore_call(
                    call, call.record or "", parse_line(run[at - begin : at - begin + length]), folder
                )
            except Exception as exc:  # the file changed since it was read
                log.warning("%s: the record of %s cannot be read again: %r", records_file, call.record, exc)
        start = end


def _at(call: Call) -> int:
    return call.span[0] if call.span is not None else -1
