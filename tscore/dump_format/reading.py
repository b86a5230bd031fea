"""Reading a dump back: its folders, its records (a truncated last line is skipped), stacks, a summary.

Used by ``parse``, ``tscore dump-info`` and the dump comparison. A run killed
while writing leaves at most its last line incomplete; every line before it
reads.
"""

from __future__ import annotations

import glob
import logging
import math
import os
from collections.abc import Iterator
from typing import Any

from tscore import json_lines
from tscore.dump_format.files import INFO_FILE, RECORDS_FILE, STACKS_FILE, TENSORS_FOLDER
from tscore.dump_format.names import canonical
from tscore.json_files import parse_json, read_side_json

log = logging.getLogger(__name__)


def dump_folders(path: str) -> list[str]:
    """Every ``step{k}/rank{r}`` folder at or under ``path`` (a dump folder, a ``dump.jsonl``, a dump root).

    :raises FileNotFoundError: naming the path when no dump is there.
    """
    if os.path.isfile(path) and os.path.basename(path) == RECORDS_FILE:
        return [os.path.dirname(path) or "."]
    if os.path.isfile(os.path.join(path, RECORDS_FILE)):
        return [path]
    found = sorted(
        os.path.dirname(p)
        for p in glob.glob(os.path.join(glob.escape(path), "**", RECORDS_FILE), recursive=True)
    )
    if not found:
        raise FileNotFoundError(
            f"no dump in {path!r}: it holds no {RECORDS_FILE}; pass the dump_path of a dump"
        )
    return found


def read_lines(file: str) -> Iterator[Any]:
    """Yield the records of a dump's JSON-lines file (objects, or ptdbg's lists), numbers as numbers.

    A line cut short by a crash, or damaged in any way, is skipped with a note: the rest is read
    (:func:`tscore.json_lines.read_lines`).
    """
    return json_lines.read_lines(file, parse_line)


def read_lines_at(file: str) -> Iterator[tuple[Any, tuple[int, int]]]:
    """Yield each record as :func:`read_lines` does, with its line's (offset, length).

    :func:`parse_line` reads such a line again.
    """
    return json_lines.read_lines_at(file, parse_line)


def parse_line(line: bytes) -> Any:
    """Parse one line of a dump's records; numbers the writer spelled as strings (``"inf"``) as floats.

    :raises ValueError: when the line is not JSON.
    """
    found = parse_json(line)
    return _with_numbers(found) if b'"inf"' in line or b'"nan"' in line or b'"-inf"' in line else found


_NOT_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_NUMBER_KEYS = ("max", "min", "mean", "norm", "value")


def _with_numbers(record: Any) -> Any:
    """Give back as floats the numbers the writer spelled as strings (``"inf"``, ``"-inf"``, ``"nan"``)."""
    if not isinstance(record, dict):
        return record
    for side in ("inputs", "outputs"):
        entries = record.get(side)
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, dict):
                continue
            for key in _NUMBER_KEYS:
                value = entry.get(key)
                if isinstance(value, str) and value in _NOT_FINITE and entry.get("type") != "str":
                    entry[key] = _NOT_FINITE[value]
    return record


def read_stacks(folder: str) -> dict[int, list[str]]:
    """Return ``{stack id: lines}`` of one dump folder; a damaged entry is left out."""
    stacks: dict[int, list[str]] = {}
    for entry in read_lines(os.path.join(folder, STACKS_FILE)):
        if (
            isinstance(entry, dict)
            and isinstance(entry.get("id"), int)
            and isinstance(entry.get("stack"), list)
        ):
            stacks[entry["id"]] = [str(line) for line in entry["stack"]]
    return stacks


def stack_of(record: dict[str, Any], stacks: dict[int, list[str]]) -> list[str]:
    """Return the stack lines a record refers to (none when it refers to none, or to a damaged one)."""
    stack = record.get("stack")
    return stacks.get(stack, []) if isinstance(stack, int) and not isinstance(stack, bool) else []


def read_info(folder: str) -> dict[str, Any]:
    """Return a dump folder's ``dump_info.json`` as a dict; ``{}`` when it is missing or damaged."""
    info = read_side_json(os.path.join(folder, INFO_FILE))
    return info if isinstance(info, dict) else {}


def find_records(
    path: str, name: str | None = None, *, session_path: str | None = None
) -> list[dict[str, Any]]:
    """Read the records at ``path`` (or the dump a ptdbg session wrote for it), with their stacks.

    :param name: keep the calls whose name starts with it, in ptdbg's or msprobe's spelling
        (``Torch_relu_1_forward``, ``Torch.relu.1.forward``, ``Torch_relu``).
    """
    root = session_path if session_path is not None else path
    wanted = None if name is None else canonical(name)
    out = []
    for folder in dump_folders(root):
        stacks = read_stacks(folder)
        for record in read_lines(os.path.join(folder, RECORDS_FILE)):
            if not isinstance(record, dict) or not isinstance(record.get("name"), str):
                continue
            if wanted is not None and not (
                record["name"].startswith(wanted) or str(record.get("call", "")).startswith(name or "")
            ):
                continue
            record["stack_lines"] = stack_of(record, stacks)
            record["folder"] = folder
            out.append(record)
    return out


def format_record(record: dict[str, Any]) -> str:
    """Show one call as ptdbg's ``parse`` does: its stack, then one line of statistics per tensor."""
    lines = [f"Trace back({record['name']}):"]
    lines += [f"  {line}" for line in record.get("stack_lines", [])]
    lines.append("Statistic Info:")
    for side in ("inputs", "outputs"):
        for entry in record.get(side, ()):
            if entry.get("type") != "tensor":
                lines.append(f"  [{entry['name']}][{entry.get('type')}: {entry.get('value', '')}]")
            elif "error" in entry:
                lines.append(f"  [{entry['name']}][not read: {entry['error']}]")
            else:
                lines.append(
                    f"  [{entry['name']}][dtype: {entry['dtype']}][shape: {entry['shape']}]"
                    f"[max: {entry.get('max')}][min: {entry.get('min')}][mean: {entry.get('mean')}]"
                    f"[norm: {entry.get('norm')}]"
                )
    return "\n".join(lines)


def summarise(path: str) -> dict[str, Any]:
    """Say what a dump holds: per folder its step, rank, records, distinct APIs, tensor files and bytes."""
    folders = []
    for folder in dump_folders(path):
        records = [r for r in read_lines(os.path.join(folder, RECORDS_FILE)) if isinstance(r, dict)]
        apis = {f"{r.get('prefix')}.{r.get('api')}" for r in records if r.get("prefix") != "Module"}
        modules = {str(r.get("api")) for r in records if r.get("prefix") == "Module"}
        tensor_dir = os.path.join(folder, TENSORS_FOLDER)
        files = (
            [os.path.join(tensor_dir, f) for f in os.listdir(tensor_dir)] if os.path.isdir(tensor_dir) else []
        )
        info = read_info(folder)
        folders.append(
            {
                "folder": folder,
                "step": info.get("step"),
                "rank": info.get("rank"),
                "frameworks": info.get("frameworks", {}),
                "records": len(records),
                "forward": sum(r.get("direction") == "forward" for r in records),
                "backward": sum(r.get("direction") == "backward" for r in records),
                "apis": len(apis),
                "modules": len(modules),
                "tensor_files": len(files),
                "bytes": sum(os.path.getsize(f) for f in files)
                + sum(
                    os.path.getsize(os.path.join(folder, f))
                    for f in os.listdir(folder)
                    if f.endswith(".jsonl")
                ),
            }
        )
    return {"path": path, "folders": folders}
