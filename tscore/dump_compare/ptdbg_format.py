"""Reading ptdbg_ascend's dumps.

A ``.pkl`` of JSON lines ``[name, step, [], dtype, shape, [max, min, mean]]`` and a
folder named after it holding one ``{name}.npy`` per tensor.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

from tscore.dtypes import neutral_dtype
from tscore.dump_compare.calls import Call, DumpSource, Item, file_inside, number_of, rank_of, shape_of
from tscore.dump_format.names import parse_name
from tscore.dump_format.reading import read_lines

log = logging.getLogger(__name__)


_PTDBG_TENSOR = re.compile(
    r"^(?P<call>.+?_(?:forward|backward))_(?P<role>input|output)(?P<path>(?:\.[^.]+)*)$"
)


def _ptdbg_lines(pkl: str) -> Iterator[list[Any]]:
    """Yield the lists of a ptdbg ``.pkl`` (JSON lines; a line cut short by a crash is skipped)."""
    for value in read_lines(pkl):
        if isinstance(value, list) and value:
            yield value


def _ptdbg_stack(lines: Iterable[Any]) -> list[str]:
    out = []
    for frame in lines:
        if isinstance(frame, list) and len(frame) >= 4:
            out.append(f"File {frame[0]}, line {frame[1]}, in {frame[2]}\n  {frame[3]}")
        else:
            out.append(str(frame))
    return out


def read_ptdbg(pkl: str, data_dir: str | None = None) -> DumpSource:
    """Read a ptdbg ``.pkl`` and its tensor folder (``data_dir``, else the folder named after it)."""
    folder = os.path.dirname(pkl)
    data_folder = data_dir or os.path.join(folder, os.path.splitext(os.path.basename(pkl))[0])
    by_call: dict[str, Call] = {}
    stacks: dict[str, list[str]] = {}
    for line in _ptdbg_lines(pkl):
        try:
            _ptdbg_line(pkl, line, data_folder, by_call, stacks)
        except Exception as exc:
            log.warning("%s: a line could not be read and is left out: %r", pkl, exc)
    for label, call in by_call.items():
        call.stack = stacks.get(label, [])
        call.settle()
    calls = sorted(by_call.values(), key=lambda c: c.order)
    has_files = os.path.isdir(data_folder) and any(i.file for c in calls for i in c.items)
    rank_folder = rank_of(folder)
    return DumpSource(folder, "ptdbg", calls, "tensor" if has_files else "statistics", rank=rank_folder)


def _ptdbg_line(
    pkl: str, line: list[Any], data_folder: str, by_call: dict[str, Call], stacks: dict[str, list[str]]
) -> None:
    """Read one line of a ptdbg ``.pkl`` into ``by_call`` (a tensor) or ``stacks`` (a stack)."""
    if len(line) == 2 and str(line[0]).endswith("stack_info"):
        frames = line[1] if isinstance(line[1], list) else []
        stacks[str(line[0]).removesuffix("_stack_info")] = _ptdbg_stack(reversed(frames))  # innermost first
        return
    if len(line) < 6:
        log.warning("%s: a line of %d fields is not a ptdbg record; skipped", pkl, len(line))
        return
    tensor_name = str(line[0])
    found = _PTDBG_TENSOR.match(tensor_name)
    parsed = parse_name(found["call"]) if found else None
    if found is None or parsed is None:
        log.warning("%s: %r is not a tensor name ptdbg writes; skipped", pkl, tensor_name)
        return
    call = by_call.get(found["call"])
    if call is None:
        call = by_call[found["call"]] = Call(parsed, len(by_call))
    summary = line[5] if isinstance(line[5], list) else []
    stats = tuple((number_of(v) if not isinstance(v, list) else None) for v in [*summary, None, None][:4])
    dtype = str(line[3])
    file, _ = file_inside(data_folder, f"{tensor_name}.npy")
    item = Item(
        found["role"],
        found["path"].lstrip("."),
        tensor_name,
        is_tensor=not dtype.startswith("<class"),
        dtype=neutral_dtype(dtype),
        shape=shape_of(line[4]),
        stats=stats if any(v is not None for v in stats) else None,  # type: ignore[arg-type]
        file=file if file and os.path.exists(file) else None,
    )
    if not item.is_tensor:
        item.value = stats[0]
    (call.inputs if item.role == "input" else call.outputs).append(item)
