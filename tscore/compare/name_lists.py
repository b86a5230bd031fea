"""File names and their side-file records held compactly, so a folder of a million files costs megabytes.

A Python list of a million names costs about 70 MB and a dict of their
``tscore_meta.jsonl`` records a gigabyte; here names are one numpy bytes
array (a few bytes each) and the records keep only what the comparison
reads: the order they were written in and the dtype before saving.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np

from tscore.json_files import parse_json
from tscore.npy_files import META_FILE_NAME

_BLOCK = 1 << 16  # names gathered per numpy conversion while a folder is listed
_NUMBER = re.compile(rb"\d+")
_NUMBER_CAP = (1 << 62) - 1  # longer digit runs (timestamps) sort as this


def to_array(names: Iterable[str]) -> np.ndarray:
    """Return ``names`` as a numpy bytes array (file-system encoding), built a block at a time."""
    blocks: list[np.ndarray] = []
    block: list[bytes] = []
    encoding = sys.getfilesystemencoding()
    for name in names:
        block.append(name.encode(encoding, "surrogateescape"))  # os.fsencode, without its checks
        if len(block) == _BLOCK:
            blocks.append(np.array(block, dtype=np.bytes_))
            block = []
    blocks.append(np.array(block, dtype=np.bytes_) if block else np.empty(0, dtype="S1"))
    return np.concatenate(blocks) if len(blocks) > 1 else blocks[0]


class NameList(Sequence[str]):
    """A read-only list of file names stored as one numpy bytes array."""

    def __init__(self, names: np.ndarray) -> None:
        self.array = names

    def __len__(self) -> int:
        return int(self.array.size)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [os.fsdecode(n) for n in self.array[index].tolist()]
        return os.fsdecode(self.array[index].tolist())

    def __iter__(self) -> Iterator[str]:
        for start in range(0, self.array.size, _BLOCK):
            yield from (os.fsdecode(n) for n in self.array[start : start + _BLOCK].tolist())

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NameList({len(self)} names)"


class MetaIndex:
    """The ``tscore_meta.jsonl`` records of a folder (and its rank folders): write order and source dtype."""

    def __init__(self) -> None:
        self._names: list[np.ndarray] = []
        self._codes: list[np.ndarray] = []
        self._table: dict[tuple[str | None, str | None], int] = {}  # (stored, source dtype) -> code
        self._keys: list[tuple[str | None, str | None]] = []  # code -> (stored, source dtype)
        self._sorted: np.ndarray | None = None
        self._order = np.empty(0, dtype=np.int64)
        self._code = np.empty(0, dtype=np.int32)
        self._records = 0

    def read(self, folder: str, prefix: str = "") -> None:
        """Add the records of ``folder``'s side file, names prefixed (``rank0/``); skip damaged lines."""
        path = os.path.join(folder, META_FILE_NAME)
        try:
            stream = open(path, "rb")
        except OSError:
            return
        names: list[str] = []
        codes: list[int] = []
        with stream:
            for line in stream:
                try:
                    record = parse_json(line)
                except ValueError:  # a line cut short by a crash
                    continue
                if not isinstance(record, dict) or not isinstance(record.get("file"), str):
                    continue
                stored = record.get("stored_dtype")
                shown = record.get("native_dtype") or record.get("dtype")  # the framework's spelling
                key = (stored if isinstance(stored, str) else None, shown if isinstance(shown, str) else None)
                try:
                    os.fsencode(record["file"])
                except UnicodeEncodeError:  # a name no file can have (a lone surrogate): a damaged line
                    continue
                names.append(prefix + record["file"])
                if key not in self._table:
                    self._table[key] = len(self._keys)
                    self._keys.append(key)
                codes.append(self._table[key])
        if names:
            self._names.append(to_array(names))
            self._codes.append(np.array(codes, dtype=np.int32))
            self._records += len(names)
        self._sorted = None

    def _index(self) -> np.ndarray:
        """Sort the names once, keeping for each name its last record (the last record of a name wins)."""
        if self._sorted is None:
            names = np.concatenate(self._names) if self._names else np.empty(0, dtype="S1")
            codes = np.concatenate(self._codes) if self._codes else np.empty(0, dtype=np.int32)
            written = np.arange(names.size, dtype=np.int64)
            order = np.lexsort((written, names))
            last = np.ones(order.size, dtype=bool)
            if order.size > 1:
                last[:-1] = names[order[:-1]] != names[order[1:]]
            keep = order[last]
            self._sorted, self._order, self._code = names[keep], written[keep], codes[keep]
            self._names, self._codes = [self._sorted], [self._code]
        return self._sorted

    def positions(self, names: np.ndarray) -> np.ndarray:
        """Return, for each name, the index of its record in :meth:`_index`'s order, -1 for none."""
        index = self._index()
        if index.size == 0 or names.size == 0:
            return np.full(names.size, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(index, names), index.size - 1)
        return np.where(index[pos] == names, pos, -1)

    def write_order(self, names: np.ndarray) -> np.ndarray:
        """Return the line number of each name's record, or the record count for names without one."""
        pos = self.positions(names)
        if not self._order.size:
            return np.full(names.size, self._records, dtype=np.int64)
        return np.where(pos >= 0, self._order[np.maximum(pos, 0)], self._records)

    def dtypes(self, name: str) -> tuple[str | None, str | None] | None:
        """Return ``(stored dtype, source dtype)`` recorded for ``name``, None when no record names it."""
        pos = int(self.positions(np.array([os.fsencode(name)], dtype=np.bytes_))[0])
        if pos < 0:
            return None
        return self._keys[int(self._code[pos])]

    def __len__(self) -> int:
        self._index()
        return int(self._order.size)


def compare_order(names: np.ndarray, meta: MetaIndex) -> np.ndarray:
    """Return the permutation that puts ``names`` in compare order.

    By rank folder, then names with digits before names without, then the
    first number in the name, the last, the order the side file recorded,
    the name.
    """
    count = names.size
    rank = np.full(count, -1, dtype=np.int64)
    plain = np.zeros(count, dtype=np.int8)
    first = np.zeros(count, dtype=np.int64)
    last = np.zeros(count, dtype=np.int64)
    cap = _NUMBER_CAP
    for start in range(0, count, _BLOCK):  # a block of Python bytes at a time, not a million
        for i, raw in enumerate(names[start : start + _BLOCK].tolist(), start):
            if b"/" in raw:
                folder, _, raw = raw.rpartition(b"/")
                rank[i] = int(folder[4:])
            numbers = _NUMBER.findall(raw)
            if numbers:
                head, tail = int(numbers[0]), int(numbers[-1])
                first[i] = head if head < cap else cap
                last[i] = tail if tail < cap else cap
            else:
                plain[i] = 1
    written = meta.write_order(names)
    written[plain == 1] = 0
    return np.lexsort((names, written, last, first, plain, rank))


class PairIndex(Sequence[tuple[str | None, str | None]]):
    """Pairs of files as two index arrays into two name lists (-1: no partner)."""

    def __init__(
        self, orig: NameList, target: NameList, orig_index: np.ndarray, target_index: np.ndarray
    ) -> None:
        self.orig, self.target = orig, target
        self.orig_index, self.target_index = orig_index, target_index
        self.by_key = 0  # pairs of files with different names that saved the same name and key

    def __len__(self) -> int:
        return int(self.orig_index.size)

    def _names(self, start: int, stop: int) -> list[tuple[str | None, str | None]]:
        o = self.orig_index[start:stop].tolist()
        t = self.target_index[start:stop].tolist()
        return [
            (self.orig[a] if a >= 0 else None, self.target[b] if b >= 0 else None)
            for a, b in zip(o, t, strict=True)
        ]

    @overload
    def __getitem__(self, index: int) -> tuple[str | None, str | None]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[str | None, str | None]]: ...

    def __getitem__(
        self, index: int | slice
    ) -> tuple[str | None, str | None] | list[tuple[str | None, str | None]]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return self._names(start, stop)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._names(index, index + 1)[0]

    def __iter__(self) -> Iterator[tuple[str | None, str | None]]:
        for start in range(0, len(self), _BLOCK):
            yield from self._names(start, start + _BLOCK)

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None  # type: ignore[assignment]


def pair_by_name(orig: NameList, target: NameList) -> PairIndex:
    """Pair equal names, in ``orig``'s order; unpaired target files follow, in their order."""
    o, t = orig.array, target.array
    if o.size == t.size and np.array_equal(o, t):  # the usual case: the same files on both sides
        index = np.arange(o.size, dtype=np.int64)
        return PairIndex(orig, target, index, index)
    orig_to_target = np.full(o.size, -1, dtype=np.int64)
    if t.size and o.size:
        by_name = np.argsort(t, kind="stable")
        sorted_t = t[by_name]
        pos = np.minimum(np.searchsorted(sorted_t, o), t.size - 1)
        found = sorted_t[pos] == o
        orig_to_target[found] = by_name[pos[found]]
    taken = np.zeros(t.size, dtype=bool)
    taken[orig_to_target[orig_to_target >= 0]] = True
    rest = np.flatnonzero(~taken)
    return PairIndex(
        orig,
        target,
        np.concatenate([np.arange(o.size, dtype=np.int64), np.full(rest.size, -1, dtype=np.int64)]),
        np.concatenate([orig_to_target, rest]),
    )


def pair_by_number(orig: NameList, target: NameList) -> PairIndex:
    """Pair the i-th file of each ordered list; the longer list's extra files get no partner."""
    length = max(len(orig), len(target))
    index = np.arange(length, dtype=np.int64)
    return PairIndex(
        orig, target, np.where(index < len(orig), index, -1), np.where(index < len(target), index, -1)
    )
