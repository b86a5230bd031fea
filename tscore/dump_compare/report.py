"""The comparison of two dumps as data, and its files: ptdbg's CSV, the advisor, JSON.

:class:`DumpCompareReport` carries the rows (one per pair of values), the
calls' verdicts in execution order and the first call with an error of its
own, so that a picture of it needs nothing else; beyond
:data:`tscore.compare.report.KEEP_ALL_ROWS` rows it keeps the calls
that differ and reads every row back with :meth:`~DumpCompareReport.iter_rows`
(:mod:`tscore.dump_compare.row_stream`). The CSV keeps ptdbg's and msprobe's
column names (``NPU Name``, ``Cosine``, ``MaxAbsErr``, ``Accuracy Reached or
Not`` ...) and adds tscore's verdict and the module path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, PrivateAttr, model_validator

from tscore.compare.spool import Spool
from tscore.dump_compare.row_stream import UNREAD, Block, columns, csv_block
from tscore.dump_compare.rows import Row
from tscore.dump_compare.verdicts import CallVerdict
from tscore.dump_format.files import OUTSIDE
from tscore.npy_files import atomic_stream, write_atomic
from tscore.run_settings import SettingDifference

if TYPE_CHECKING:
    from tscore.html_report.page import ReportPage


class DumpCompareReport(BaseModel):
    """Two dumps compared: rows, per-call verdicts, and the first call that goes wrong on its own."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    target_path: str
    orig_path: str
    target_format: str
    orig_format: str
    target_label: str = ""  # what made each side's dump, with its framework: for people to read
    orig_label: str = ""
    basis: str  # "tensor", "statistics" or "md5": what the rows mostly compare
    tolerance: float
    rows: list[Row]  # every row when complete; else the rows of the calls kept
    calls: list[CallVerdict]  # every call's verdict when complete; else the calls that differ
    rows_complete: bool = True  # False: iter_rows() and iter_calls() read every one back
    total_rows: int = 0
    total_calls: int = 0
    call_counts: dict[str, int] = {}  # calls per verdict, all of them
    unread_tensors: int = 0  # rows whose tensor file could not be read
    first_error: CallVerdict | None = None
    first_failure: CallVerdict | None = None  # the first paired call whose outputs differ, for any reason
    seconds: float = 0.0
    files: list[str] = []  # what was written: the CSV, the advisor
    # the settings that change numbers (TF32, autocast ...) whose values differ between the two runs
    settings_differences: list[SettingDifference] = []
    settings_note: str = ""  # whether those settings explain the largest difference found
    _spool: Spool | None = PrivateAttr(default=None)  # every block of rows and verdicts, when not complete

    @property
    def passed(self) -> bool:
        """True when every paired call agrees (calls only one run made are rows, not failures).

        A tensor that could be compared neither by its values nor by its statistics fails it too:
        agreement is not claimed for what was not seen.
        """
        if any(self.call_counts.get(status) for status in ("own", "weights", "inherited")):
            return False
        return self.unread_tensors == 0

    def counts(self) -> dict[str, int]:
        """How many calls got each verdict."""
        return dict(self.call_counts)

    @model_validator(mode="after")
    def _count_calls(self) -> DumpCompareReport:
        """Count what a report built by hand (or read from older JSON) holds but does not count."""
        if self.rows_complete and self.calls and not self.call_counts:
            for verdict in self.calls:
                self.call_counts[verdict.status] = self.call_counts.get(verdict.status, 0) + 1
            self.total_rows, self.total_calls = len(self.rows), len(self.calls)
            self.unread_tensors = sum(r.basis == "none" and r.message.startswith(UNREAD) for r in self.rows)
            differ = ("own", "weights", "inherited")
            self.first_failure = next((v for v in self.calls if v.status in differ), None)
        return self

    def blocks(self) -> Iterator[Block]:
        """Yield every row and verdict, a block of calls at a time (the verdicts' rows index the block's).

        :raises ValueError: for a report that keeps part of its rows and came from elsewhere (JSON,
            another process): the rest is in its CSV file.
        """
        if self.rows_complete:
            yield self.rows, self.calls
            return
        if self._spool is None:
            raise ValueError(
                f"this report keeps {len(self.calls):,} of {self.total_calls:,} calls and was made in "
                "another process or read from JSON: every row is in its CSV file "
                f"({', '.join(self.files) or 'none written'})"
            )
        for block in self._spool.blocks():
            materialize = getattr(block, "materialize", None)  # a statistics_lane.LaneBlock
            yield materialize() if materialize is not None else block

    def iter_rows(self) -> Iterator[Row]:
        """Yield every row in call order, kept in the report or not."""
        for rows, verdicts in self.blocks():
            for verdict in verdicts:
                yield from (rows[i] for i in verdict.rows)

    def iter_calls(self) -> Iterator[CallVerdict]:
        """Yield every call's verdict in execution order, kept in the report or not."""
        for _, verdicts in self.blocks():
            yield from verdicts

    def summary(self) -> str:
        """One line a person acts on: the first call with an error of its own, where, and what to do."""
        first = self.first_error
        tally = ", ".join(f"{n} {status}" for status, n in sorted(self.counts().items()))
        if not self.rows_complete:
            tally += f"; the report keeps {len(self.calls):,} of {self.total_calls:,} calls"
            tally += ", iter_rows() reads all" if self._spool is not None else ", the CSV holds all"
        settings = f"; {self.settings_note}" if self.settings_note else ""
        if first is None:
            failing = self.first_failure
            if failing is None:
                return f"no paired call differs ({tally}){settings}"
            return (
                f"no dumped call has an error of its own: the first that differs, {failing.label}, already "
                f"receives differing inputs; {tally}{settings}"
            )
        name = first.target_call or first.orig_call
        where = f" at {first.where}" if first.where else ""
        module = f" in module {first.module!r}" if first.module and first.module != OUTSIDE else ""
        certainty = " (from statistics: less certain)" if first.basis == "statistics" else ""
        found = f"{name}{module}{where}: {first.reason}{certainty}"
        return f"first call with its own error: {found}; {tally}{settings}"

    # ------------------------------------------------------------ files

    def columns(self, stack_mode: bool) -> list[str]:
        """Return the CSV header for this report's basis."""
        return columns(self.basis, stack_mode)

    def csv_text(self, stack_mode: bool = False) -> str:
        """Render every row as ptdbg's CSV, in execution order; the stack on each call's first row."""
        parts = [csv_block([], [], self.basis, stack_mode, header=True)]
        parts += [csv_block(rows, verdicts, self.basis, stack_mode) for rows, verdicts in self.blocks()]
        return b"".join(parts).decode("utf-8", "surrogateescape")

    def advisor_text(self) -> str:
        """Ptdbg's three lines (``Line:``, ``Suspect Nodes:``, ``Expert Advice:``) and tscore's verdict."""
        first = self.first_error or self.first_failure
        if first is None:
            return (
                "Line: NA\nSuspect Nodes: NA\n"
                "Expert Advice: All data in comparison result meets the accuracy requirements.\n"
                f"Verdict: {self.summary()}\n"
            )
        failing = [n for n, i in enumerate(first.rows) if self.rows[i].accuracy == "No"]
        line = "NA" if first.line is None else first.line + (failing[0] if failing else 0)
        return (
            f"Line: {line}\nSuspect Nodes: {first.label}\nExpert Advice: {_advice(first)}\n"
            f"Verdict: {self.summary()}\n"
        )

    def to_html(self, path: str | os.PathLike[str], metric: str | None = None) -> str:
        """Write this report as one self-contained HTML page (:mod:`tscore.html_report`); return the path.

        :param metric: the error metric charted first (``max_rel``, ``cosine_distance``, ``max_abs``).
        :raises TargetPathError: naming the path, when its folder is missing or not writable.
        """
        from tscore.html_report import write_html

        return write_html(self, path, metric)

    def to_page(self) -> ReportPage:
        """Return this report's page data, which :mod:`tscore.html_report` renders."""
        from tscore.dump_compare.report_page import dump_page

        return dump_page(self)

    def write_csv(self, path: str, stack_mode: bool = False) -> None:
        """Write the CSV atomically, block by block."""
        with atomic_stream(path) as stream:
            stream.write(csv_block([], [], self.basis, stack_mode, header=True))
            for rows, verdicts in self.blocks():
                stream.write(csv_block(rows, verdicts, self.basis, stack_mode))

    def write_advisor(self, path: str) -> None:
        """Write the advisor file atomically."""
        data = self.advisor_text().encode("utf-8")
        write_atomic(path, lambda stream: stream.write(data))


def _advice(verdict: CallVerdict) -> str:
    where = f" ({verdict.where})" if verdict.where else ""
    if verdict.status == "weights":
        return (
            "The two runs do not hold the same weights at this call: load the same checkpoint on both "
            "sides (ts.migrator.convert_weight), then compare again."
        )
    if verdict.status == "inherited":
        return (
            "No dumped call has an error of its own: the inputs of the first differing call already differ. "
            "Check what feeds it: the data, the weights loaded, or a call made before the dump started."
        )
    if verdict.reason.startswith("an argument differs"):
        return f"This call is made with other options in the two runs: {verdict.reason}{where}."
    kind = "backward" if verdict.direction == "backward" else "forward"
    cause = (
        "its outputs differ far more than its inputs explain"
        if verdict.amplified
        else "its inputs agree and its outputs do not"
    )
    return (
        f"This is a {kind} API computation error: {cause}. Check the computation implementation{where}: "
        "dtype, an option of the API, or the operator on this device."
    )
