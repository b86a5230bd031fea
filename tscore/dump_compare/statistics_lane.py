"""The bulk of two big statistics dumps compared as columns: no Python object per value for calls that agree.

Two msprobe statistics dumps of 100,000 calls hold 300,000 values a side. Read
the usual way, each value becomes an :class:`~tscore.dump_compare.calls.Item`,
each pair a :class:`~tscore.dump_compare.rows.Row`, each call a
:class:`~tscore.dump_compare.verdicts.CallVerdict`, and the CSV module formats
every number: most of the time goes to objects. This lane reads the records
of the calls that agree straight into columns (names, dtypes, shapes, an
(n, 4) array of max, min, mean and norm a side), computes the statistics'
differences with numpy (the same
:func:`~tscore.dump_compare.rows.statistics_differences` as every comparison)
and renders their CSV lines in one pass. While a report keeps every row (up to
:data:`tscore.compare.report.KEEP_ALL_ROWS`) their rows and verdicts are made
to be kept (:meth:`LaneBlock.materialize`); past that, the calls that agree
are kept nowhere but in the CSV and the spool, which holds the columns and
makes rows and verdicts only when it is read back.

A call whose outputs differ, or whose record holds anything else (a module's
parameters, an md5, a tensor file, a nested argument, a tensor with no or
integer statistics, dtypes or shapes that differ between the runs) goes the
usual way, objects and all, in its place. The lane gives the same CSV bytes,
counts, verdicts and rows as that way; the tests compare the two.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tscore.compare.pairs import percent_cell, shape_cell
from tscore.dump_compare.calls import neutral_dtype_of, shape_of, split_entry_name
from tscore.dump_compare.pairing import CallPair, pair_items
from tscore.dump_compare.row_stream import csv_block, requires_grad_cells
from tscore.dump_compare.rows import (
    Row,
    compare_items,
    fill_values,
    same_value,
    statistics_differences,
    statistics_errors,
)
from tscore.dump_compare.streams import Records
from tscore.dump_compare.verdicts import (
    CallVerdict,
    ForwardErrors,
    judge_in_order,
    largest,
)
from tscore.dump_format.names import CallName
from tscore.dump_format.stacks import where_in_user_code

Record = tuple[str, CallName, Any, Any]  # a call's record name, its name taken apart, both runs' bodies

_TENSOR = object()  # the value of a tensor row (a plain argument's row holds its value)
_NAN4 = (float("nan"),) * 4
_INDEXES = tuple(str(i) for i in range(256))


@dataclass(slots=True)
class _Side:
    """One run's values of a block's calls, a row each, in call order (inputs, then outputs)."""

    names: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    dtypes: list[str | None] = field(default_factory=list)
    shapes: list[tuple[int, ...] | None] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    stats: list[float] = field(default_factory=list)  # four a row (NaN for a plain argument)
    grads: list[bool | None] = field(default_factory=list)  # requires_grad, when the dump says

    def cut(self, rows: int) -> None:
        """Drop every row after the first ``rows`` (a record that is not plain was half read)."""
        for column in (self.names, self.paths, self.dtypes, self.shapes, self.values, self.grads):
            del column[rows:]
        del self.stats[rows * 4 :]

    def add(self, name: str, path: str, value: Any) -> bool:
        """Append one value of a record; False when it is not a plain tensor or argument."""
        if value.__class__ is dict and "Max" in value and "dtype" in value and "shape" in value:
            get = value.get
            high, low, mean, norm = get("Max"), get("Min"), get("Mean"), get("Norm")
            if not high.__class__ is low.__class__ is mean.__class__ is norm.__class__ is float:
                return False  # an integer tensor's, or one missing: the usual way says what it is
            data = get("data_name")
            if get("md5").__class__ is str or (data and data != "-1"):
                return False
            self.stats += (high, low, mean, norm)
            self.dtypes.append(neutral_dtype_of(str(get("dtype"))))
            self.shapes.append(shape_of(get("shape") or []))
            self.values.append(_TENSOR)
            grad = get("requires_grad")
            self.grads.append(grad if grad.__class__ is bool else None)
        elif value is None:
            self._plain("None", None)
        elif value.__class__ is list:
            return False  # a list argument: rows named by nested paths
        elif value.__class__ is not dict:
            self._plain(type(value).__name__, value)
        else:
            kind = str(value.get("type", ""))
            if "dtype" in value and "shape" in value and ("Tensor" in kind or "ndarray" in kind):
                return False  # a tensor with no statistics
            if "value" not in value and not kind:
                return False  # a dict argument: a row per key
            self._plain(kind or None, value.get("value"))
        self.names.append(name)
        self.paths.append(path)
        return True

    def _plain(self, dtype: str | None, value: Any) -> None:
        self.stats += _NAN4
        self.dtypes.append(dtype)
        self.shapes.append(None)
        self.values.append(value)
        self.grads.append(None)

    def msprobe_record(self, label: str, direction: str, body: Any) -> int:
        """Append the values of one msprobe record; return how many are inputs, -1 when it is not plain.

        The rows are those the usual reading gives (``_fill_msprobe_call``): positional inputs
        ``{label}.input.{i}``, keyword ones ``{label}.input.{key}``, outputs ``{label}.output.{i}``
        (a sole output's path is ``""``), inputs first.
        """
        if body.__class__ is not dict or direction == "parameters_grad":
            return -1
        start = len(self.names)
        outputs: Any = None
        seen_inputs = False
        prefix = f"{label}.input."
        for key, value in body.items():
            if key == "input_args" or key == "input":
                if seen_inputs or value.__class__ is not list:
                    return self._failed(start)
                seen_inputs = True
                for index, inner in enumerate(value):
                    path = _INDEXES[index] if index < 256 else str(index)
                    if not self.add(prefix + path, path, inner):
                        return self._failed(start)
            elif key == "input_kwargs":
                if isinstance(value, Mapping):
                    for kwarg, inner in value.items():
                        path = str(kwarg)
                        if not path or path.isdigit():  # named "" or like a position: the usual way
                            return self._failed(start)
                        if not self.add(prefix + path, path, inner):
                            return self._failed(start)
            elif key == "output":
                outputs = value
            elif key == "parameters" and isinstance(value, Mapping):
                return self._failed(start)  # a module's parameters: judged as weights
        inputs = len(self.names) - start
        if outputs is None:
            return inputs
        if outputs.__class__ is not list:
            return self._failed(start)
        prefix = f"{label}.output."
        for index, inner in enumerate(outputs):
            path = _INDEXES[index] if index < 256 else str(index)
            if not self.add(prefix + path, path, inner):
                return self._failed(start)
        if len(outputs) == 1:
            self.paths[-1] = ""
        return inputs

    def tscore_record(self, label: str, direction: str, body: Any) -> int:
        """Append the values of one tscore record; return how many are inputs, -1 when it is not plain.

        The rows are those the usual reading gives (``fill_tscore_call``): each entry named as the
        dump names it, its side and path taken from its name; a sole output's path is ``""``.
        """
        if body.__class__ is not dict:
            return -1
        start = len(self.names)
        inputs, outputs = body.get("inputs", ()), body.get("outputs", ())
        if inputs.__class__ not in (list, tuple) or outputs.__class__ not in (list, tuple):
            return -1
        for entries, role in ((inputs, "input"), (outputs, "output")):
            for entry in entries:
                if not self._tscore_entry(label, entry, role):
                    return self._failed(start)
        if len(outputs) == 1:
            self.paths[-1] = ""
        return len(inputs)

    def _tscore_entry(self, label: str, entry: Any, role: str) -> bool:
        if entry.__class__ is not dict:
            return False
        get = entry.get
        name = get("name", "")
        if name.__class__ is not str or get("parameter"):  # a kernel's weight: judged as a parameter
            return False
        side, path = split_entry_name(label, name)
        if side != role:
            return False
        if get("type") != "tensor":
            self._plain(str(get("type")), get("value"))
        else:
            high, low, mean, norm = get("max"), get("min"), get("mean"), get("norm")
            if not high.__class__ is low.__class__ is mean.__class__ is norm.__class__ is float:
                return False
            if get("file") or get("md5").__class__ is str or get("error") is not None:
                return False
            dtype = get("dtype")
            self.stats += (high, low, mean, norm)
            self.dtypes.append(None if dtype is None else str(dtype))
            self.shapes.append(shape_of(get("shape")))
            self.values.append(_TENSOR)
            grad = get("requires_grad")
            self.grads.append(grad if grad.__class__ is bool else None)
        self.names.append(name)
        self.paths.append(path)
        return True

    def _failed(self, start: int) -> int:
        self.cut(start)
        return -1


@dataclass
class LaneBlock:
    """A block of calls compared: those that agree as columns, the others as rows and verdicts."""

    entries: list[int | CallVerdict]  # in call order: a lane call's index, or another call's verdict
    rows: list[Row]  # the other calls' rows (their verdicts index these)
    # the lane's calls (all agree: status ok)
    names: list[CallName] = field(default_factory=list)
    modules: list[str | None] = field(default_factory=list)
    stacks: list[list[str]] = field(default_factory=list)
    spans: list[tuple[int, int, int]] = field(default_factory=list)  # first row, first output row, end
    input_errors: list[float | None] = field(default_factory=list)
    output_errors: list[float] = field(default_factory=list)
    # the lane's rows (a row of a call that went the usual way is left here unused)
    row_names: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    dtypes: list[str | None] = field(default_factory=list)
    shapes: list[tuple[int, ...] | None] = field(default_factory=list)
    tensors: list[bool] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    target_grads: list[bool | None] = field(default_factory=list)
    orig_grads: list[bool | None] = field(default_factory=list)
    target_stats: np.ndarray = field(default_factory=lambda: np.empty((0, 4)))
    orig_stats: np.ndarray = field(default_factory=lambda: np.empty((0, 4)))
    diffs: np.ndarray = field(default_factory=lambda: np.empty((0, 4)))
    ratios: np.ndarray = field(default_factory=lambda: np.empty((0, 4)))
    tolerance: float = 0.0
    first_line: int = 0  # the CSV line of its first row, set as it is written
    total_rows: int = 0

    def row_count(self, entry: int | CallVerdict) -> int:
        """Return how many rows one entry has."""
        if isinstance(entry, CallVerdict):
            return len(entry.rows)
        start, _, end = self.spans[entry]
        return end - start

    def materialize(self) -> tuple[list[Row], list[CallVerdict]]:
        """Make every row and verdict, as the usual way makes them; verdicts index the rows."""
        rows: list[Row] = []
        verdicts: list[CallVerdict] = []
        target, orig = self.target_stats.tolist(), self.orig_stats.tolist()
        diffs, ratios = self.diffs.tolist(), self.ratios.tolist()
        line = self.first_line
        for entry in self.entries:
            if isinstance(entry, CallVerdict):
                own = entry.rows
                entry.rows = list(range(len(rows), len(rows) + len(own)))
                rows.extend(self.rows[i] for i in own)
                verdicts.append(entry)
                line += len(own)
                continue
            start, middle, end = self.spans[entry]
            indexes = list(range(len(rows), len(rows) + end - start))
            for i in range(start, end):
                role = "input" if i < middle else "output"
                name, dtype, shape, error = self.row_names[i], self.dtypes[i], self.shapes[i], self.errors[i]
                accuracy = "No" if error > self.tolerance else "Yes"
                if self.tensors[i]:
                    rows.append(
                        Row(
                            name,
                            name,
                            role,
                            self.paths[i],
                            dtype,
                            dtype,
                            shape,
                            shape,
                            target_stats=tuple(target[i]),
                            orig_stats=tuple(orig[i]),
                            basis="statistics",
                            error=error,
                            accuracy=accuracy,
                            stat_diff=diffs[i],
                            stat_rel=ratios[i],
                            target_requires_grad=self.target_grads[i],
                            orig_requires_grad=self.orig_grads[i],
                        )
                    )
                else:
                    rows.append(
                        Row(name, name, role, self.paths[i], dtype, dtype, basis="value", error=error)
                    )  # a plain argument: requires_grad not recorded
                    rows[-1].accuracy, rows[-1].message = accuracy, self.messages[i]
            stack = self.stacks[entry]
            verdicts.append(
                CallVerdict(
                    self.names[entry].ptdbg,
                    self.names[entry].ptdbg,
                    self.names[entry].direction,
                    "name",
                    "ok",
                    module=self.modules[entry],
                    input_error=self.input_errors[entry],
                    output_error=self.output_errors[entry],
                    basis="statistics",
                    rows=indexes,
                    stack=stack,
                    where=where_in_user_code(stack) if stack else None,
                    line=line,
                )
            )
            line += end - start
        return rows, verdicts

    def csv(self, stack_mode: bool) -> bytes:
        """Render the block's CSV lines, byte for byte as :func:`tscore.dump_compare.row_stream.csv_block`.

        The lane's lines are made column by column (every number spelled once a block), then
        laid out in call order between the other calls' lines.
        """
        lines = self._lane_lines(stack_mode)
        parts: list[bytes] = []
        run: list[str] = []
        for entry in self.entries:
            if isinstance(entry, CallVerdict):
                if run:
                    parts.append("".join(run).encode("utf-8", "surrogateescape"))
                    run = []
                parts.append(csv_block(self.rows, [entry], "statistics", stack_mode))
            else:
                start, _, end = self.spans[entry]
                run += lines[start:end]
        if run:
            parts.append("".join(run).encode("utf-8", "surrogateescape"))
        return b"".join(parts)

    def _lane_lines(self, stack_mode: bool) -> list[str]:
        """Render a CSV line for each of the lane's rows (those of calls that went the usual way: unused)."""
        count = len(self.row_names)
        if not count:
            return []
        tails = ["ok,\r\n"] * count
        for entry, (start, _, end) in enumerate(self.spans):
            module = self.modules[entry]
            tail = "ok," + _cell(module) if module else "ok,"
            if stack_mode:
                stack = _cell("\n".join(self.stacks[entry]))
                first = f"{tail},{stack}\r\n"
                tails[start:end] = [first] + [tail + ",\r\n"] * (end - start - 1)
            elif module:
                tails[start:end] = [tail + "\r\n"] * (end - start)
        names = list(map(_cell, self.row_names))
        dtypes = [_DTYPES.get(d) or _dtype(d) for d in self.dtypes]
        shapes = [_SHAPE_CELLS.get(s) or _shape(s) for s in self.shapes]
        spell = _Numbers()
        cells = spell.numbers(np.hstack([self.diffs, self.target_stats, self.orig_stats]))
        ratios = spell.percents(self.ratios)
        relative = list(map(",".join, zip(*(ratios[k::4] for k in range(4)), strict=True)))
        accuracy = ["No" if e > self.tolerance else "Yes" for e in self.errors]
        messages = [_cell(m) if m else "" for m in self.messages]
        grads = [
            ",".join(requires_grad_cells(*pair))
            for pair in zip(self.target_grads, self.orig_grads, strict=True)
        ]
        columns = [names, names, dtypes, dtypes, shapes, shapes, *(cells[k::12] for k in range(4)), relative]
        columns += [*(cells[k::12] for k in range(4, 12)), accuracy, messages, grads, tails]
        lines = list(map(",".join, zip(*columns, strict=True)))
        na16 = ",".join(["N/A"] * 16)
        for i in [i for i, tensor in enumerate(self.tensors) if not tensor]:
            lines[i] = (
                f"{names[i]},{names[i]},{dtypes[i]},{dtypes[i]},N/A,N/A,{na16},{accuracy[i]},{messages[i]},"
                f"{grads[i]},{tails[i]}"
            )
        return lines


class _Numbers:
    """Spell numbers as the CSV module does (``repr``), and relative differences as percentages.

    Each distinct number is spelled once a block: a dump repeats many (a call's output is
    the next call's input; differences of 0).
    """

    def __init__(self) -> None:
        self._numbers: dict[float, str] = {0.0: "0.0"}  # -0.0 is the same key: mended after
        self._percents: dict[float, str] = {0.0: "0%"}

    def numbers(self, values: np.ndarray) -> list[str]:
        """Return ``repr`` of each value, in the order of ``values.ravel()``."""
        flat = values.ravel()
        known = self._numbers.get
        cells = [known(v) or self._spell(v) for v in flat.tolist()]
        for i in np.flatnonzero((flat == 0) & np.signbit(flat)).tolist():
            cells[i] = "-0.0"
        return cells

    def _spell(self, value: float) -> str:
        text = self._numbers[value] = repr(value)
        return text

    def percents(self, values: np.ndarray) -> list[str]:
        """Return each relative difference as the CSV spells it (``0%``, ``1.5e-05%``, ``inf``)."""
        known = self._percents.get
        return [known(v) or self._percent(v) for v in values.ravel().tolist()]

    def _percent(self, value: float) -> str:
        text = self._percents[value] = percent_cell(value)
        return text


_QUOTED: dict[str, str] = {}
_SPECIAL = re.compile(r'[,"\r\n]')
_DTYPES: dict[str | None, str] = {}


def _dtype(dtype: str | None) -> str:
    text = _cell(dtype or "N/A")
    if len(_DTYPES) < 4096:
        _DTYPES[dtype] = text
    return text


def _cell(text: str) -> str:
    """Return a text cell as the CSV module writes it (quoted when it holds a comma, quote or line break)."""
    if _SPECIAL.search(text) is None:
        return text
    quoted = _QUOTED.get(text)
    if quoted is None:
        out = io.StringIO()
        csv.writer(out).writerow([text])
        quoted = out.getvalue()[:-2]  # without the line end
        if len(_QUOTED) < 4096:
            _QUOTED[text] = quoted
    return quoted


_SHAPE_CELLS: dict[tuple[int, ...] | None, str] = {None: "N/A"}


def _shape(shape: tuple[int, ...] | None) -> str:
    text = "N/A" if shape is None else _cell(shape_cell(shape))
    if len(_SHAPE_CELLS) < 4096:
        _SHAPE_CELLS[shape] = text
    return text


def compare_block(
    records: Sequence[Record],
    start: int,
    target: Records,
    orig: Records,
    tolerance: float,
    forward_errors: ForwardErrors,
) -> LaneBlock:
    """Compare a block of records of two statistics dumps of one format whose calls have the same names.

    :param start: the position of the block's first call in its dump.
    :param forward_errors: what each forward call saw and made, kept across blocks (updated).
    """
    mine, theirs = _Side(), _Side()
    read = _Side.msprobe_record if target.format == "msprobe" else _Side.tscore_record
    lane: list[tuple[int, int, int, int]] = []  # a lane call's record index, first row, first output, end
    other: list[int] = []  # records that go the usual way
    for index, (label, name, target_body, orig_body) in enumerate(records):
        first = len(mine.names)
        inputs = read(mine, label, name.direction, target_body)
        if (
            inputs >= 0
            and read(theirs, label, name.direction, orig_body) == inputs
            and len(theirs.names) == len(mine.names) > first + inputs  # an output to judge by
        ):
            lane.append((index, first, first + inputs, len(mine.names)))
            continue
        mine.cut(first)
        theirs.cut(first)
        other.append(index)
    tensors = [v is _TENSOR for v in mine.values]
    if not (
        mine.names == theirs.names
        and mine.dtypes == theirs.dtypes
        and mine.shapes == theirs.shapes
        and tensors == [v is _TENSOR for v in theirs.values]
    ):  # some call's values differ in name, dtype, shape or kind: it goes the usual way
        alike = []
        for entry in lane:
            _, first, _, end = entry
            if (
                mine.names[first:end] == theirs.names[first:end]
                and mine.dtypes[first:end] == theirs.dtypes[first:end]
                and mine.shapes[first:end] == theirs.shapes[first:end]
                and [v is _TENSOR for v in theirs.values[first:end]] == tensors[first:end]
            ):
                alike.append(entry)
            else:
                other.append(entry[0])
        lane = alike
    block = _lane_errors(mine, theirs, tensors, tolerance)
    errors = block.errors
    agree: dict[int, tuple[int, int, int]] = {}
    for index, first, middle, end in lane:
        if max(errors[middle:end]) <= tolerance:
            agree[index] = (first, middle, end)
        else:
            other.append(index)  # a call that differs: judged with its rows, the usual way
    made = _usual_rows(records, sorted(other), start, target, orig, tolerance)
    block.rows = made.rows
    for index, (label, name, body, _) in enumerate(records):
        spans = agree.get(index)
        if spans is None:
            pair, indexes = made.calls[index]
            block.entries.append(judge_in_order(pair, made.rows, indexes, tolerance, forward_errors))
            continue
        first, middle, end = spans
        input_error = largest([*errors[first:middle], forward_errors.saved("target", name)])
        output_error = max(errors[middle:end])
        forward_errors.keep("target", name, input_error, output_error)
        if name.direction == "forward":
            forward_errors.agreed = True  # a call of the lane agrees, as judge_in_order notes for the others
            forward_errors.alone.clear()
        block.entries.append(len(block.names))
        block.names.append(name)
        block.modules.append(target.module(name, body))
        block.stacks.append(target.stack(label, body))
        block.spans.append(spans)
        block.input_errors.append(input_error)
        block.output_errors.append(output_error)
    block.total_rows = len(made.rows) + sum(end - first for first, _, end in agree.values())
    return block


def _lane_errors(target: _Side, orig: _Side, tensors: list[bool], tolerance: float) -> LaneBlock:
    """Compare the lane's rows: the statistics' differences, and each row's error and message."""
    a = np.array(target.stats, dtype=np.float64).reshape(-1, 4)
    b = np.array(orig.stats, dtype=np.float64).reshape(-1, 4)
    worst, diffs, ratios = statistics_differences(a, b, np.ones(a.shape, dtype=bool))
    worst[fill_values(a, target.dtypes) & fill_values(b, orig.dtypes)] = (
        np.inf
    )  # judged row by row (rows.FILLED)
    errors = worst.tolist()
    messages = [""] * len(errors)
    for i in [i for i, tensor in enumerate(tensors) if not tensor]:
        mine, theirs = target.values[i], orig.values[i]
        if same_value(mine, theirs):
            errors[i] = 0.0
        else:
            errors[i] = float("inf")
            messages[i] = f"argument differs: {mine!r} vs {theirs!r}"
    return LaneBlock(
        [],
        [],
        row_names=target.names,
        paths=target.paths,
        dtypes=target.dtypes,
        shapes=target.shapes,
        tensors=tensors,
        errors=errors,
        messages=messages,
        target_grads=target.grads,
        orig_grads=orig.grads,
        target_stats=a,
        orig_stats=b,
        diffs=diffs,
        ratios=ratios,
        tolerance=tolerance,
    )


@dataclass
class _Made:
    rows: list[Row]
    calls: dict[int, tuple[CallPair, list[int]]]  # record index: its pair and its rows' indexes


def _usual_rows(
    records: Sequence[Record],
    indexes: list[int],
    start: int,
    target: Records,
    orig: Records,
    tolerance: float,
) -> _Made:
    """Make the calls, pairs and rows of the records that go the usual way (statistics, no tensors)."""
    made = _Made([], {})
    for index in indexes:
        label, name, target_body, orig_body = records[index]
        pair = CallPair(
            target.call(label, name, target_body, start + index),
            orig.call(label, name, orig_body, start + index),
            "name",
        )
        items = pair_items(pair.target, pair.orig)
        first = len(made.rows)
        made.rows += [compare_items(a, b, use_tensors=False, tolerance=tolerance) for a, b in items]
        made.calls[index] = (pair, list(range(first, len(made.rows))))
    statistics_errors(made.rows, tolerance)
    return made
