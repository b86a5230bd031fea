"""The rows and verdicts of a dump comparison, block by block: written out, tallied, kept or spooled.

A dump of a training step has hundreds of thousands of values. The comparison
makes its rows a block of calls at a time (:func:`tscore.dump_compare.compare.compare_sources`)
and hands each block here: it goes to the CSV as it is made, and the report
keeps every row only when the dumps are small (at most
:data:`tscore.compare.report.KEEP_ALL_ROWS` rows, the compare
engine's rule); beyond that it keeps the calls that differ and their rows
(at most :data:`KEPT_CALLS` calls and :data:`tscore.compare.report.MAX_FAILED_ROWS`
rows of calls whose error is inherited), while every block goes to a
temporary spool that :meth:`DumpCompareReport.iter_rows` reads back.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import pickle
from collections.abc import Sequence
from typing import Any

from tscore.compare.pairs import percent_cell, shape_cell
from tscore.compare.report import KEEP_ALL_ROWS, MAX_FAILED_ROWS
from tscore.compare.spool import Spool
from tscore.dump_compare.csv_helper import CsvHelper
from tscore.dump_compare.rows import Row
from tscore.dump_compare.verdicts import CallVerdict
from tscore.npy_files import AtomicFile

log = logging.getLogger(__name__)
HELPER_AFTER_ROWS: float = KEEP_ALL_ROWS  # a comparison this big renders its CSV in a helper process
KEPT_CALLS = 20_000  # beyond KEEP_ALL_ROWS: the calls that differ kept in the report, at most
_OWN = ("own", "weights")  # a call whose error is its own: always kept (up to KEPT_CALLS)
UNREAD = "tensor not read"  # the start of a row's message when a tensor file could not be read

Block = tuple[list[Row], list[CallVerdict]]  # rows, and verdicts whose ``rows`` index into them


class DumpRowStream:
    """Take the blocks of a comparison in call order: CSV lines out, counts up, rows kept or spooled."""

    def __init__(self, basis: str, csv_path: str | None, stack_mode: bool) -> None:
        self.keep_all = True  # until the rows pass KEEP_ALL_ROWS
        self.basis = basis
        self.stack_mode = stack_mode
        self.rows: list[Row] = []
        self.calls: list[CallVerdict] = []
        self.call_counts: dict[str, int] = {}
        self.total_rows = 0
        self.total_calls = 0
        self.unread = 0  # rows whose tensor file could not be read: the comparison cannot pass
        self.first_own: CallVerdict | None = None
        self.first_own_api: CallVerdict | None = None
        self.first_failure: CallVerdict | None = None
        self._inherited_rows = 0
        self.spool: Spool | None = None
        self._helper: CsvHelper | None = None  # renders the CSV of a big comparison (csv_helper)
        self._no_helper = not _helper_helps()
        self._csv_path = csv_path
        self._out = AtomicFile(csv_path) if csv_path else None
        if self._out is not None:
            self._out.write(csv_block([], [], basis, stack_mode, header=True))

    def add(self, rows: list[Row], verdicts: list[CallVerdict]) -> None:
        """Take the next block: ``verdicts`` in call order, their ``rows`` indexes into ``rows``."""
        if self._out is not None:
            text = csv_block(rows, verdicts, self.basis, self.stack_mode)
            self._helper.raw(text) if self._helper is not None else self._out.write(text)
        line = self.total_rows + 2  # the CSV's header is line 1
        for verdict in verdicts:
            line = self._tally(verdict, line)
        self._take(rows, verdicts, (rows, verdicts), len(rows), len(verdicts))

    def add_lane(self, block: Any) -> None:
        """Take the next block of :mod:`tscore.dump_compare.statistics_lane`: only some calls are objects.

        Its lane's calls all agree: once the report keeps only the calls that differ, they are
        counted and written, never made; before, they are made to be kept.
        """
        block.first_line = line = self.total_rows + 2
        if self.keep_all:
            self._write_lane(block)  # before its rows are made (which changes the block)
            rows, verdicts = block.materialize()
            for verdict in verdicts:
                line = self._tally(verdict, line)
            self._take(rows, verdicts, (rows, verdicts), len(rows), len(verdicts))
            return
        verdicts = []
        for entry in block.entries:
            if isinstance(entry, CallVerdict):
                verdicts.append(entry)
                line = self._tally(entry, line)
            else:
                self.call_counts["ok"] = self.call_counts.get("ok", 0) + 1
                line += block.row_count(entry)
        pickled = self._write_lane(block)  # with its verdicts' lines, before keeping changes them
        self._take(block.rows, verdicts, pickled or block, block.total_rows, len(block.entries))

    def _write_lane(self, block: Any) -> bytes | None:
        """Write a lane block's CSV lines, or have the helper write them; the block pickled, if it was."""
        if self._out is None:
            return None
        if self._helper is None and self.total_rows > HELPER_AFTER_ROWS and not self._no_helper:
            self._start_helper()
        if self._helper is None:
            self._out.write(block.csv(self.stack_mode))
            return None
        pickled = pickle.dumps(block, protocol=pickle.HIGHEST_PROTOCOL)
        self._helper.block(pickled)
        return pickled

    def _start_helper(self) -> None:
        assert self._out is not None
        self._out.stream.flush()  # the helper writes on at the file's offset
        try:
            self._helper = CsvHelper(self._out.stream.fileno(), self.stack_mode, str(self._csv_path))
        except OSError as exc:  # the CSV is rendered here instead
            log.warning("the CSV helper process could not start (%s); the CSV is rendered in this one", exc)
            self._no_helper = True

    def _tally(self, verdict: CallVerdict, line: int) -> int:
        """Count one verdict, give it its CSV line, note it if it is the first of its kind; the next line."""
        status = verdict.status
        self.call_counts[status] = self.call_counts.get(status, 0) + 1
        verdict.line = line if verdict.rows else None
        if status in _OWN:
            if self.first_own is None:
                self.first_own = verdict
            if self.first_own_api is None and not verdict.label.startswith("Module"):
                self.first_own_api = verdict
        if status in ("own", "weights", "inherited") and self.first_failure is None:
            self.first_failure = verdict
        return line + len(verdict.rows)

    def _take(
        self, rows: list[Row], verdicts: list[CallVerdict], spooled: Any, total_rows: int, calls: int
    ) -> None:
        """Spool a block, keep what the report keeps of ``verdicts`` and their ``rows``, and count it."""
        self.unread += sum(1 for r in rows if r.basis == "none" and r.message.startswith(UNREAD))
        if self.spool is not None:
            self.spool.add(spooled)
        for verdict in verdicts:
            local = verdict.rows
            if self.keep_all or self._keeps(verdict, rows):
                verdict.rows = list(range(len(self.rows), len(self.rows) + len(local)))
                self.rows.extend(rows[i] for i in local)
                self.calls.append(verdict)
            else:
                verdict.rows = []
        self.total_rows += total_rows
        self.total_calls += calls
        if self.keep_all and self.total_rows > KEEP_ALL_ROWS:
            self._stop_keeping_all()

    def _stop_keeping_all(self) -> None:
        """Spool what is kept so far as one block; keep only the calls that differ from now on."""
        self.keep_all = False
        self.spool = Spool("tscore-dump-rows-")
        self.spool.add((self.rows, self.calls))
        rows, calls = self.rows, self.calls
        self.rows, self.calls = [], []
        for verdict in calls:
            if self._keeps(verdict, rows):
                self.calls.append(verdict)
                kept = verdict.rows
                verdict.rows = list(range(len(self.rows), len(self.rows) + len(kept)))
                self.rows.extend(rows[i] for i in kept)
            else:
                verdict.rows = []

    @property
    def first_error(self) -> CallVerdict | None:
        """The first call whose error is its own: an API's before a module's.

        msprobe writes a module's record when the module starts, before the calls inside it,
        and the API says more.
        """
        return self.first_own_api or self.first_own

    def _keeps(self, verdict: CallVerdict, rows: list[Row]) -> bool:
        """Say whether a report too big to keep everything keeps this call and its rows."""
        if verdict is self.first_own or verdict is self.first_own_api or verdict is self.first_failure:
            return True  # what the summary and the advisor name, with its rows
        if len(self.calls) >= KEPT_CALLS:
            return False
        if verdict.status in _OWN:
            return True
        unread = any(rows[i].message.startswith(UNREAD) for i in verdict.rows)
        if verdict.status in ("inherited", "unpaired", "unknown") or unread:
            if self._inherited_rows + len(verdict.rows) > MAX_FAILED_ROWS:
                return False
            self._inherited_rows += len(verdict.rows)
            return True
        return False

    def finish(self) -> None:
        """Give the CSV its name; keep the spool for the report to read back.

        :raises CsvHelperError: when the helper process failed (the caller aborts).
        """
        if self._helper is not None:
            self._helper.close()  # raises if it did not write everything: abort() then stops it
            self._helper = None
        if self._out is not None:
            self._out.finish()

    def abort(self, error: BaseException) -> None:
        """Drop the half-written CSV and the spool (``error`` stopped the comparison).

        :raises TargetPathError: naming the CSV, when ``error`` is the disk failing to take it.
        """
        if self._helper is not None:
            self._helper.kill()
            self._helper = None
        if self.spool is not None:
            self.spool.close()
        if self._out is not None:
            self._out.abort(error)


_GRAD_CELLS = {
    (a, b): (
        "N/A" if a is None else str(a),
        "N/A" if b is None else str(b),
        "N/A" if a is None or b is None else str(a == b),
    )
    for a in (True, False, None)
    for b in (True, False, None)
}


def requires_grad_cells(target: bool | None, orig: bool | None) -> tuple[str, str, str]:
    """Spell msprobe's requires_grad cells: each side's (``True``, ``False``, ``N/A``), and do they agree."""
    return _GRAD_CELLS[(target, orig)]


def _helper_helps() -> bool:
    """Say whether a CSV helper process can help: on POSIX (it is handed a descriptor), with 2+ cores."""
    if os.name != "posix":
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores > 1


def csv_block(
    rows: Sequence[Row], verdicts: Sequence[CallVerdict], basis: str, stack_mode: bool, header: bool = False
) -> bytes:
    """Render ptdbg's CSV lines of a block of calls, in call order; the stack on each call's first row.

    :param header: render the header line (``rows`` and ``verdicts`` are then empty).
    """
    out = io.StringIO()
    writer = csv.writer(out)
    if header:
        writer.writerow(columns(basis, stack_mode))
    na = "N/A"
    no_stats = (None,) * 4
    tensor = basis == "tensor"
    md5 = basis == "md5"
    for verdict in verdicts:
        tail = [verdict.status, verdict.module or ""]
        for position, index in enumerate(verdict.rows):
            row = rows[index]
            cells: list[Any] = [
                row.target_name or na,
                row.orig_name or na,
                row.target_dtype or na,
                row.orig_dtype or na,
                na if row.target_shape is None else shape_cell(row.target_shape),
                na if row.orig_shape is None else shape_cell(row.orig_shape),
            ]
            if tensor:
                cells += [
                    na if v is None else v  # csv writes inf, -inf and nan as such
                    for v in (
                        row.cosine,
                        row.euc_dist,
                        row.max_abs_err,
                        row.max_relative_err,
                        row.one_thousandth,
                        row.five_thousandths,
                    )
                ]
            elif md5:
                cells += [row.target_md5 or na, row.orig_md5 or na]
            else:
                cells += _numbers(row.stat_diff)
                relative = row.stat_rel
                cells += (
                    _NO_DIFFERENCE if relative == _ZEROS else [percent_cell(v) for v in relative or no_stats]
                )
            cells += _numbers(row.target_stats)
            cells += _numbers(row.orig_stats)
            cells += [
                row.accuracy,
                row.message,
                *requires_grad_cells(row.target_requires_grad, row.orig_requires_grad),
            ]
            cells += tail
            if stack_mode:
                cells.append("\n".join(verdict.stack) if position == 0 else "")
            writer.writerow(cells)
    return out.getvalue().encode("utf-8", "surrogateescape")


_ZEROS = [0.0, 0.0, 0.0, 0.0]
_NO_DIFFERENCE = ["0%"] * 4
_NONE = ["N/A"] * 4


def _numbers(values: Sequence[float | None] | None) -> Sequence[Any]:
    """Give four statistics as cells: ``N/A`` where one is missing (most rows have all four)."""
    if values is None:
        return _NONE
    if None in values:
        return ["N/A" if v is None else v for v in values]
    return values


BASIC_COLUMNS = [
    "NPU Name",
    "Bench Name",
    "NPU Tensor Dtype",
    "Bench Tensor Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
]
TENSOR_COLUMNS = [
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
]
STATISTICS_COLUMNS = [
    "Max diff",
    "Min diff",
    "Mean diff",
    "L2norm diff",
    "MaxRelativeErr",
    "MinRelativeErr",
    "MeanRelativeErr",
    "NormRelativeErr",
]
MD5_COLUMNS = ["NPU MD5", "BENCH MD5"]
SUMMARY_COLUMNS = [f"{side} {stat}" for side in ("NPU", "Bench") for stat in ("max", "min", "mean", "l2norm")]
GRAD_COLUMNS = ["NPU Requires_grad", "Bench Requires_grad", "Requires_grad Consistent"]  # msprobe 26's
TAIL_COLUMNS = ["Accuracy Reached or Not", "Err_message", *GRAD_COLUMNS, "Verdict", "Module"]
STACK_COLUMN = "NPU_Stack_Info"


def columns(basis: str, stack_mode: bool) -> list[str]:
    """Return the CSV header for a comparison's basis (``tensor``, ``md5``, ``statistics``)."""
    middle = {"tensor": TENSOR_COLUMNS, "md5": MD5_COLUMNS}.get(basis, STATISTICS_COLUMNS)
    return BASIC_COLUMNS + middle + SUMMARY_COLUMNS + TAIL_COLUMNS + ([STACK_COLUMN] if stack_mode else [])
