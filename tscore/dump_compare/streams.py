"""Two dumps read call by call in step, when both runs made the same calls: nothing held but a block.

When the two runs' call names agree, one after the other (the usual case:
the same script on two devices or frameworks), no pairing is needed and
nothing about the calls has to be kept: :func:`stream_dump` reads a tscore
``dump.jsonl`` or msprobe ``dump.json`` twice, first its names only (to check
that they agree), then its calls with their values, a block at a time, for
:func:`tscore.dump_compare.compare.compare_dumps` to compare in step. Memory
is that of one block whatever the number of calls. ptdbg's ``.pkl`` (a line
per tensor, in no call order) is read whole instead (:func:`read_dump`).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tscore.dump_compare.calls import READ_AT_ONCE, Call, DumpSource
from tscore.dump_compare.msprobe_format import (
    fill_msprobe_record,
    msprobe_call,
    msprobe_document,
    msprobe_source,
    msprobe_stacks,
    msprobe_tensors,
)
from tscore.dump_compare.sources import detect
from tscore.dump_compare.tscore_format import fill_tscore_call, tscore_call, tscore_name, tscore_source
from tscore.dump_format.names import MODULE_PREFIX, CallName, parse_name
from tscore.dump_format.reading import read_lines_at, read_stacks, stack_of

log = logging.getLogger(__name__)


@dataclass
class Records:
    """A dump's records as they are written, for a comparison that reads them as columns.

    :mod:`tscore.dump_compare.statistics_lane` reads most records itself and asks ``call``
    for the :class:`Call` of any other, made exactly as :attr:`DumpStream.calls` makes it.
    """

    format: str  # "msprobe" or "tscore": how a record holds its values
    each: Callable[[], Iterator[tuple[str, Any]]]  # (record name, record) in order, every record
    name: Callable[[str, Any], CallName | None]  # the call a record names; None: not a call (left out)
    call: Callable[[str, CallName, Any, int], Call]  # the call of one record, at its position
    stack: Callable[[str, Any], list[str]]  # a record's stack lines
    module: Callable[[CallName, Any], str | None]  # the module a record's call sits in, when known


@dataclass
class DumpStream:
    """A dump read in order as often as asked: its call names, or its calls with their values."""

    source: DumpSource  # what the dump is (format, task, rank, framework); its calls list stays empty
    labels: Callable[[], Iterator[str]]  # each call's name (ptdbg's spelling), in order: a light pass
    # every record's name as its format spells it, those that name no call too: a lighter pass
    names: Callable[[], Iterator[str]]
    calls: Callable[[], Iterator[Call]]  # each call with its values, in the same order
    close: Callable[[], None]
    records: Records | None = None  # msprobe's records as written (None: another format)
    # every record's name as its bytes are written (None: not every one has one): the lightest pass
    raw_names: Callable[[], Iterator[Any] | None] | None = None


def stream_dump(path: str) -> DumpStream | None:
    """Open the tscore or msprobe dump at ``path`` to be read call by call; None for another layout.

    A call whose record cannot be read comes with no values (logged), so that both passes
    give the same calls.

    :raises DumpReadError: naming the path when no dump is there.
    """
    kind, records = detect(os.fspath(path))
    if kind == "tscore":
        return _stream_tscore(records)
    if kind == "msprobe":
        return _stream_msprobe(records)
    return None


def names_agree(target: DumpStream, orig: DumpStream, as_written: bool = True) -> bool:
    """Say whether two dumps hold calls of the same names in the same order (stopping at the first not).

    Two dumps of one format compare their names as written; of two formats, in ptdbg's spelling.

    :param as_written: first compare the names' bytes, without reading the records (a record that
        is not whole still has its name: the comparison in step then finds the difference,
        :class:`tscore.dump_compare.compare.NamesDiffer`, and asks again with False).
    """
    same = target.source.format == orig.source.format
    missing = object()
    if as_written and same and target.raw_names is not None and orig.raw_names is not None:
        mine, theirs = target.raw_names(), orig.raw_names()
        if mine is not None and theirs is not None:
            if all(x == y for x, y in itertools.zip_longest(mine, theirs, fillvalue=missing)):
                return True  # the same as written: the same names (else they may differ only in spelling)
    a, b = (target.names(), orig.names()) if same else (target.labels(), orig.labels())
    return all(x == y for x, y in itertools.zip_longest(a, b, fillvalue=missing))


def _stream_tscore(records_file: str) -> DumpStream:
    folder = os.path.dirname(records_file)
    stacks = read_stacks(folder)

    def each() -> Iterator[tuple[str, Any]]:
        for record, _ in read_lines_at(records_file):
            yield (str(record.get("name", "")) if isinstance(record, dict) else ""), record

    def name(label: str, record: Any) -> CallName | None:
        try:  # what read_dump requires of a record; it is left out the same way (read_dump logs it)
            return tscore_name(record)
        except Exception:
            return None

    def call(label: str, named: CallName, record: Any, order: int) -> Call:
        made = tscore_call(record, order, stacks)
        try:
            fill_tscore_call(made, str(record["name"]), record, folder)
        except Exception as exc:
            log.warning("%s: the values of %s could not be read: %r", records_file, made.label, exc)
            made.inputs, made.outputs = [], []
        return made

    def calls() -> Iterator[Call]:
        named = ((label, name(label, record), record) for label, record in each())
        return itertools.starmap(call, ((*r, order) for order, r in enumerate(r for r in named if r[1])))

    def labels() -> Iterator[str]:
        named = (name(label, record) for label, record in each())
        return (n.ptdbg for n in named if n is not None)

    def raw_names() -> Iterator[Any]:
        with open(records_file, "rb") as stream:
            for line in stream:
                if line.strip():
                    found = _TSCORE_NAME.match(line)
                    yield found.group(1) if found else object()  # equal to nothing: decoded names decide

    records = Records(
        "tscore",
        each,
        name,
        call,
        lambda label, record: stack_of(record, stacks),
        lambda named, record: record.get("module"),
    )
    return DumpStream(tscore_source(folder, []), labels, labels, calls, lambda: None, records, raw_names)


_TSCORE_NAME = re.compile(rb'\s*\{"name":\s*"((?:[^"\\]|\\.)*)"')  # the writer puts a record's name first


def _stream_msprobe(records_file: str) -> DumpStream | None:
    folder = os.path.dirname(records_file)
    head, _, members = msprobe_document(records_file)
    if members is None:  # not laid out as msprobe's (parsed whole): read_dump says what is wrong
        return None
    try:
        tensors = msprobe_tensors(folder, head)
        stacks = msprobe_stacks(folder)
    except BaseException:
        members.close()
        raise

    def labels() -> Iterator[str]:
        return (name.ptdbg for name in map(parse_name, members.keys()) if name is not None)

    def each() -> Iterator[tuple[str, Any]]:
        return ((label, body) for label, body, _ in members.with_spans(keep_damaged=True))

    def module(name: CallName, body: Any) -> str | None:
        return name.api.rpartition(".")[0] if name.prefix == MODULE_PREFIX else None  # as msprobe_call

    def call(label: str, name: CallName, body: Any, order: int) -> Call:
        made = msprobe_call(name, label, order, stacks)
        fill_msprobe_record(made, label, body, tensors, records_file)  # False: logged, no values
        return made

    def calls() -> Iterator[Call]:  # the members labels() names
        named = ((label, parse_name(label), body) for label, body in each())
        return itertools.starmap(call, ((*r, order) for order, r in enumerate(r for r in named if r[1])))

    try:
        md5 = any(item.md5 for made in itertools.islice(calls(), READ_AT_ONCE) for item in made.items)
    except BaseException:
        members.close()
        raise
    source = msprobe_source(folder, head, [], md5)
    records = Records(
        "msprobe",
        each,
        lambda label, body: parse_name(label),
        call,
        lambda label, body: stacks.get(label, []),
        module,
    )
    return DumpStream(source, labels, members.keys, calls, members.close, records, members.raw_keys)
