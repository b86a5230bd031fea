"""JSON-lines files, read and written one way across tscore: dump records, stacks, ``tscore_meta.jsonl``.

Each record is one line. A writer appends whole lines (one ``write`` per
call, so lines of several threads or processes never interleave); a reader
skips a line a crash cut short, with a note, and reads on. So a run that
dies keeps every record written before it died.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import orjson

from tscore.errors import TargetPathError
from tscore.json_files import parse_json

log = logging.getLogger(__name__)


def json_line(record: Mapping[str, Any] | list[Any]) -> bytes:
    """Return ``record`` as one line of compact JSON, newline included.

    orjson writes it, except where orjson refuses a string (a file name with a lone surrogate,
    as ``os.fsdecode`` gives for bytes that are not UTF-8): there Python's json escapes it.
    """
    try:
        return orjson.dumps(record, default=str, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return (json.dumps(record, default=str, separators=(",", ":")) + "\n").encode("ascii")


def append_lines(path: str, records: Iterable[Mapping[str, Any]]) -> None:
    """Append one line per record to ``path`` in a single ``write`` (created when missing).

    :raises TargetPathError: naming the file, when it cannot be written.
    """
    payload = b"".join(json_line(dict(r)) for r in records)
    if not payload:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            os.write(fd, payload)
        finally:
            os.close(fd)
    except OSError as exc:
        raise TargetPathError(f"cannot write {path!r}: {exc.strerror or exc}") from exc


def read_lines_at(
    file: str, parse: Callable[[bytes], Any] = parse_json
) -> Iterator[tuple[Any, tuple[int, int]]]:
    """Yield each record (an object, or a list as ptdbg writes) of a JSON-lines file with its line's span.

    A missing file yields nothing. A line cut short by a crash, or damaged in any way (not
    JSON, nested too deep, a bare number), is skipped with a note: the rest is read.

    :param parse: reads one line (``bytes``); raises ``ValueError`` for one that is not JSON.
    :return: ``(record, (offset, length))``: ``parse`` reads the same line again from there.
    """
    if not os.path.exists(file):
        return
    offset = 0
    with open(file, "rb") as stream:
        for number, line in enumerate(stream, 1):
            at = offset
            offset += len(line)
            if not line.strip():
                continue
            try:
                found = parse(line)
            except ValueError:  # JSONDecodeError, UnicodeDecodeError
                log.warning(
                    "%s: line %d is incomplete (the run stopped while writing it); skipped", file, number
                )
                continue
            if not isinstance(found, (dict, list)):
                log.warning("%s: line %d is not a record; skipped", file, number)
                continue
            yield found, (at, len(line))


def read_lines(file: str, parse: Callable[[bytes], Any] = parse_json) -> Iterator[Any]:
    """Yield the records of a JSON-lines file, as :func:`read_lines_at` does, without their spans."""
    for value, _ in read_lines_at(file, parse):
        yield value
