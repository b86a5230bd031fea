"""Reading the members of one big object of a JSON document a batch at a time, never the whole document.

msprobe writes a dump as one JSON document, ``{"task": ..., "data": {call: record, ...}}``,
whose ``data`` object grows with every call: 60 MB for 100,000 calls, which
Python holds as about 450 MB of dicts once parsed whole. :func:`read_members`
finds the structure of the document without parsing it (numpy over the bytes,
a few megabytes at a time: where strings are, how deep each bracket sits) and
then parses the big object's members a few megabytes at a time with orjson.
Memory stays that of one batch whatever the size of the document; the file is read
with ``os.pread``, never mapped, and :meth:`Members.values_at` reads a member again
from where :meth:`Members.with_spans` found it.

A document cut short (its writer was killed) gives every member that is
whole; a member that is not JSON is left out with a warning naming the file
and its byte offset, and the rest is read.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tscore.json_files import parse_json

log = logging.getLogger(__name__)

SCAN_BYTES = 1 << 22  # bytes looked at by numpy at a time: 4 MB, a few tens of MB of temporaries
BATCH_BYTES = 1 << 22  # member text parsed at a time

_TAIL_BYTES = 1 << 16  # what is looked at after the document's end, and after the big object's
_QUOTE, _BACKSLASH, _COLON, _COMMA = 34, 92, 58, 44
_OPENS, _CLOSES = (123, 91), (125, 93)  # { [ and } ]


class NotAnObjectDocument(ValueError):
    """The document is not a JSON object holding the member asked for as an object."""


class FileText:
    """A file's bytes by slice, read with ``os.pread`` when asked: nothing mapped, nothing kept."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self.size = os.fstat(self.fd).st_size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, where: slice) -> bytes:
        start, stop, _ = where.indices(self.size)
        return os.pread(self.fd, max(stop - start, 0), start) if stop > start else b""

    def close(self) -> None:
        """Close the file (again: nothing happens)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass
class _Structure:
    """Byte offsets of what matters in the document: the root's brackets, colons, commas; one level down."""

    root_open: int = -1
    root_close: int = -1
    colons: list[np.ndarray] = field(default_factory=list)  # the root's own colons
    commas: list[np.ndarray] = field(default_factory=list)  # between the root's members
    inner_opens: list[np.ndarray] = field(default_factory=list)  # a root member's value opening
    inner_closes: list[np.ndarray] = field(default_factory=list)
    inner_commas: list[np.ndarray] = field(default_factory=list)  # between the members of such a value
    inner_colons: list[np.ndarray] = field(default_factory=list)  # after the names of such members


def _escaped_runs(
    block: np.ndarray, data: np.ndarray, where: np.ndarray, carry: int
) -> tuple[np.ndarray, int]:
    """Return the indexes (into ``data``) of escaped quotes, and how many backslashes end the block.

    :param block: the bytes; ``data`` the structural ones among them, at ``where``.
    :param carry: how many backslashes ended the previous block (an odd count escapes this one's first byte).
    """
    at = np.flatnonzero(data == _BACKSLASH)
    first = np.array([0]) if carry % 2 and where.size and where[0] == 0 and data[0] == _QUOTE else at[:0]
    if at.size == 0:
        return first, 0
    slashes = where[at]
    breaks = np.flatnonzero(np.diff(slashes) != 1)
    run_starts, run_ends = np.r_[0, breaks + 1], np.r_[breaks, slashes.size - 1]  # indexes into slashes
    lengths = slashes[run_ends] - slashes[run_starts] + 1
    if slashes[0] == 0:
        lengths[0] += carry
        first = first[:0]
    following = at[run_ends] + 1  # the structural byte after each run, if it is the very next byte
    odd = (lengths % 2 == 1) & (following < data.size)
    candidates = following[odd]
    candidates = candidates[where[candidates] == slashes[run_ends][odd] + 1]
    escaped = np.concatenate([first, candidates[data[candidates] == _QUOTE]])
    left = int(lengths[-1]) if slashes[-1] == block.size - 1 else 0
    return escaped, left


_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[[_QUOTE, _BACKSLASH, _COLON, _COMMA, *_OPENS, *_CLOSES]] = True


def _scan(text: FileText) -> _Structure:
    """Find the document's structure, :data:`SCAN_BYTES` at a time.

    Only the bytes that can matter (quotes, backslashes, brackets, colons, commas: a fifth
    of a dump) are looked at after the first pass.
    """
    found = _Structure()
    inside, depth, carry = 0, 0, 0
    for begin in range(0, len(text), SCAN_BYTES):
        block = np.frombuffer(text[begin : begin + SCAN_BYTES], dtype=np.uint8)
        where = np.flatnonzero(_STRUCTURAL[block])
        data = block[where]
        quotes = data == _QUOTE
        escaped, carry = _escaped_runs(block, data, where, carry)
        quotes[escaped] = False
        strings = np.cumsum(quotes, dtype=np.int32)
        strings += inside
        outside = (
            strings & 1
        ) == 0  # a closing quote counts as outside, an opening one inside: neither matters
        inside = int(strings[-1] & 1) if strings.size else inside
        opens = ((data == _OPENS[0]) | (data == _OPENS[1])) & outside
        closes = ((data == _CLOSES[0]) | (data == _CLOSES[1])) & outside
        after = np.cumsum(opens.view(np.int8) - closes.view(np.int8), dtype=np.int32)
        after += depth
        depth = int(after[-1]) if after.size else depth
        level1 = after == 1
        level2 = after == 2
        colons = outside & (data == _COLON)
        commas = outside & (data == _COMMA)
        where = where + begin
        if found.root_open < 0:
            first = np.flatnonzero(opens & level1)
            if first.size:
                found.root_open = int(where[first[0]])
        found.colons.append(where[colons & level1])
        found.commas.append(where[commas & level1])
        found.inner_opens.append(where[opens & level2])
        found.inner_closes.append(where[closes & level1])
        found.inner_commas.append(where[commas & level2])
        found.inner_colons.append(where[colons & level2])
        if found.root_close < 0:
            last = np.flatnonzero(closes & (after == 0))
            if last.size:
                found.root_close = int(where[last[0]])
                break  # anything after the root's end is not the document
    return found


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.intp)


Span = tuple[int, int]  # a member's bytes in the file: from its key's quote to before its comma
DAMAGED = object()  # the value of a member that is not JSON, with_spans(keep_damaged=True)
_KEY = re.compile(rb'\s*"((?:[^"\\]|\\.)*)"\s*:', re.DOTALL)


def _member_key(text: bytes, offset: int) -> str | None:
    """Return the key of the member that starts at ``offset`` of ``text``; None if it cannot be read."""
    found = _KEY.match(text, offset)
    if found is None:
        return None
    raw = found.group(1)
    if b"\\" not in raw:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        key = parse_json(b'"' + raw + b'"')
    except ValueError:
        return None
    return key if isinstance(key, str) else None


@dataclass
class Members:
    """The document's small members (``head``) and the big object's members, read as they are iterated."""

    path: str
    head: dict[str, Any]
    _text: FileText
    _start: int  # first byte of the big object's members
    _end: int  # its closing brace (or the end of the file, cut short)
    _separators: np.ndarray  # the commas between its members
    complete: bool = True  # False when the document was cut short
    _colons: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.intp))  # after members' names

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        """Yield ``(key, value)`` in document order, :data:`BATCH_BYTES` of text parsed at a time."""
        for key, value, _ in self.with_spans():
            yield key, value

    def with_spans(self, keep_damaged: bool = False) -> Iterator[tuple[str, Any, Span]]:
        """Yield ``(key, value, span)`` in document order; :meth:`values_at` reads a span again later.

        :param keep_damaged: a member whose value is not JSON but whose key can be read is
            yielded with :data:`DAMAGED` as its value (warned), so that the keys are those
            of :meth:`keys`; by default it is left out.
        """
        for start, cut, inner in self._batches():
            yield from self._parse(start, cut, inner, keep_damaged)

    def keys(self) -> Iterator[str]:
        """Yield each member's key in document order without parsing its value: a light pass.

        A member whose key cannot be read is left out, as :meth:`with_spans` leaves it out.
        """
        for start, cut, inner in self._batches():
            text = self._text[start:cut]
            for offset in (0, *(inner - start + 1).tolist()):
                key = _member_key(text, offset)
                if key is not None:
                    yield key

    def raw_keys(self) -> Iterator[bytes] | None:
        """Yield each member's name as written (its quoted bytes), without decoding it: the lightest pass.

        Two documents whose members have the same raw names in the same order have the same
        :meth:`keys`. None when a member has no name of its own (a document cut short, a
        member that is not JSON): use :meth:`keys`.
        """
        colons = self._colons
        if not self.complete or colons.size != self._separators.size + 1:
            return None
        starts = np.r_[self._start, self._separators + 1]
        ends = np.r_[self._separators, self._end]
        if not ((colons > starts) & (colons < ends)).all():
            return None
        return self._raw_keys(starts, colons)

    def _raw_keys(self, starts: np.ndarray, colons: np.ndarray) -> Iterator[bytes]:
        first = 0
        for start, cut, inner in self._batches():
            text = self._text[start:cut]
            last = first + inner.size + 1
            for left, colon in zip(
                (starts[first:last] - start).tolist(), (colons[first:last] - start).tolist(), strict=True
            ):
                yield text[left:colon].strip()
            first = last

    def _batches(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield ``(start, end, commas)``: about :data:`BATCH_BYTES` of whole members at a time."""
        start, seps = self._start, self._separators
        while start < self._end:
            at = int(np.searchsorted(seps, start + BATCH_BYTES))
            cut = int(seps[at]) if at < seps.size else self._end
            yield start, cut, seps[int(np.searchsorted(seps, start)) : at]
            start = cut + 1

    def _parse(
        self, start: int, end: int, inner: np.ndarray, keep_damaged: bool
    ) -> Iterator[tuple[str, Any, Span]]:
        text = self._text[start:end]
        bounds = [start, *(int(s) + 1 for s in inner), end + 1]
        spans = list(itertools.pairwise(bounds))
        try:
            batch = parse_json(b"{" + text + b"}")
        except ValueError:
            batch = None
        if isinstance(batch, dict) and len(batch) == len(spans):
            for (key, value), (left, right) in zip(batch.items(), spans, strict=True):
                yield key, value, (left, right - 1)
            return
        if not text.strip():
            return
        # a damaged member (one cut short at the end, a key twice): one by one, leaving out the bad ones
        for left, right in spans:
            try:
                member = parse_json(b"{" + self._text[left : right - 1] + b"}")
            except ValueError as exc:
                where = "cut short" if right - 1 >= self._end and not self.complete else "not JSON"
                key = _member_key(text, left - start) if keep_damaged else None
                log.warning(
                    "%s: the member %sat byte %d is %s (%s); %s",
                    self.path,
                    "" if key is None else f"{key!r} ",
                    left,
                    where,
                    exc,
                    "left out" if key is None else "read with no value",
                )
                if key is not None:
                    yield key, DAMAGED, (left, right - 1)
                continue
            if isinstance(member, dict):
                for key, value in member.items():
                    yield key, value, (left, right - 1)

    def values_at(self, spans: list[Span]) -> list[Any]:
        """Parse the members at ``spans`` again (given by :meth:`with_spans`); their values in that order.

        Spans that follow each other in the file are read and parsed together.
        """
        order = sorted(range(len(spans)), key=lambda i: spans[i][0])
        values: list[Any] = [None] * len(spans)
        run: list[int] = []
        for index in [*order, -1]:
            if run and (index < 0 or spans[index][0] != spans[run[-1]][1] + 1):
                self._parse_run([spans[i] for i in run], run, values)
                run = []
            if index >= 0:
                run.append(index)
        return values

    def _parse_run(self, spans: list[Span], slots: list[int], values: list[Any]) -> None:
        batch = parse_json(b"{" + self._text[spans[0][0] : spans[-1][1]] + b"}")
        if isinstance(batch, dict) and len(batch) == len(spans):
            for slot, value in zip(slots, batch.values(), strict=True):
                values[slot] = value
            return
        for slot, (left, right) in zip(slots, spans, strict=True):  # a key twice: one at a time
            member = parse_json(b"{" + self._text[left:right] + b"}")
            values[slot] = next(iter(member.values())) if isinstance(member, dict) and member else None

    def close(self) -> None:
        """Close the file."""
        self._text.close()

    def __enter__(self) -> Members:
        """Use as a context manager: the file is closed at the end."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the file."""
        self.close()


def read_members(path: str, key: str) -> Members:
    """Open the JSON object document at ``path`` and get ready to read its ``key`` object member by member.

    The document's other members are parsed at once (``head``); those of ``key`` as the result is
    iterated. Call ``close()`` when done (or use it as a context manager).

    :raises NotAnObjectDocument: when the document is not an object with ``key`` holding an object
        (the caller may then parse it whole for a clear error).
    :raises OSError: when the file cannot be read.
    """
    text = FileText(path)
    try:
        if len(text) == 0:
            raise NotAnObjectDocument(f"{path}: empty")
        return _members(path, key, text)
    except BaseException:
        text.close()
        raise


def _members(path: str, key: str, text: FileText) -> Members:
    found = _scan(text)
    if found.root_open < 0 or text[: found.root_open].strip():
        raise NotAnObjectDocument(f"{path}: not a JSON object")
    colons, commas = _joined(found.colons), _joined(found.commas)
    opens, closes = _joined(found.inner_opens), _joined(found.inner_closes)
    end_of_root = found.root_close if found.root_close >= 0 else len(text)
    bounds = [found.root_open, *commas[commas < end_of_root].tolist(), end_of_root]
    head: dict[str, Any] = {}
    target: tuple[int, int] | None = None
    for left, right in itertools.pairwise(bounds):
        at = int(np.searchsorted(colons, left))
        if at >= colons.size or colons[at] >= right:
            continue  # nothing but blanks (an empty root) or a member cut short before its colon
        colon = int(colons[at])
        try:
            name = parse_json(bytes(text[left + 1 : colon]).strip())
        except ValueError:
            raise NotAnObjectDocument(f"{path}: a member name at byte {left + 1} is not JSON") from None
        if name == key:
            value = bytes(text[colon + 1 : colon + 65]).lstrip()
            if not value.startswith(b"{"):
                raise NotAnObjectDocument(f"{path}: {key!r} is not an object")
            at = int(np.searchsorted(opens, colon))
            if at >= opens.size or opens[at] >= right:
                raise NotAnObjectDocument(f"{path}: {key!r} is cut short")
            inner_open = int(opens[at])
            shut = int(np.searchsorted(closes, inner_open))
            inner_close = int(closes[shut]) if shut < closes.size and closes[shut] <= right else right
            target = (inner_open, inner_close)
            continue
        try:
            head[str(name)] = parse_json(bytes(text[colon + 1 : right]))
        except ValueError:
            log.warning("%s: the member %r is not JSON; left out", path, name)
    if target is None:
        raise NotAnObjectDocument(f"{path}: no {key!r} object")
    if found.root_close >= 0 and text[found.root_close + 1 : found.root_close + 1 + _TAIL_BYTES].strip():
        raise NotAnObjectDocument(f"{path}: something follows the document's end (a bracket too many?)")
    after = text[target[1] + 1 : target[1] + 1 + _TAIL_BYTES].lstrip()[:1]
    if target[1] < len(text) and after not in (b",", b"}", b""):
        raise NotAnObjectDocument(f"{path}: {key!r} ends where it cannot (a bracket too many?)")
    separators = _joined(found.inner_commas)
    inside = separators[(separators > target[0]) & (separators < target[1])]
    colons = _joined(found.inner_colons)
    names = colons[(colons > target[0]) & (colons < target[1])]
    complete = found.root_close >= 0
    return Members(path, head, text, target[0] + 1, target[1], inside, complete, names)
