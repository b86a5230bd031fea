"""The comparison of two dumps as data, and its files: ptdbg's CSV, the advisor, JSON.

:class:`DumpCompareReport` carries every row (one per pair of values), every
call's verdict in execution order and the first call with an error of its own,
so that a picture of it needs nothing else. The CSV keeps ptdbg's and msprobe's
column names (``NPU Name``, ``Cosine``, ``MaxAbsErr``, ``Accuracy Reached or
Not`` ...) and adds tscore's verdict and the module path.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from pydantic import BaseModel, ConfigDict

from tscore.dump.recorder import OUTSIDE
from tscore.dump_compare.rows import Row
from tscore.dump_compare.verdicts import CallVerdict, first_failure
from tscore.npy_files import write_atomic

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
TAIL_COLUMNS = ["Accuracy Reached or Not", "Err_message", "Verdict", "Module"]
STACK_COLUMN = "NPU_Stack_Info"


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
    rows: list[Row]
    calls: list[CallVerdict]
    first_error: CallVerdict | None = None
    seconds: float = 0.0
    files: list[str] = []  # what was written: the CSV, the advisor

    @property
    def passed(self) -> bool:
        """True when every paired call agrees (calls only one run made are rows, not failures).

        A tensor that could be compared neither by its values nor by its statistics fails it too:
        agreement is not claimed for what was not seen.
        """
        if any(v.status in ("own", "weights", "inherited") for v in self.calls):
            return False
        return not any(r.basis == "none" and r.message.startswith("tensor not read") for r in self.rows)

    def counts(self) -> dict[str, int]:
        """How many calls got each verdict."""
        out: dict[str, int] = {}
        for verdict in self.calls:
            out[verdict.status] = out.get(verdict.status, 0) + 1
        return out

    def summary(self) -> str:
        """One line a person acts on: the first call with an error of its own, where, and what to do."""
        first = self.first_error
        tally = ", ".join(f"{n} {status}" for status, n in sorted(self.counts().items()))
        if first is None:
            failing = first_failure(self.calls)
            if failing is None:
                return f"no paired call differs ({tally})"
            return (
                f"no dumped call has an error of its own: the first that differs, {failing.label}, already "
                f"receives differing inputs; {tally}"
            )
        name = first.target_call or first.orig_call
        where = f" at {first.where}" if first.where else ""
        module = f" in module {first.module!r}" if first.module and first.module != OUTSIDE else ""
        certainty = " (from statistics: less certain)" if first.basis == "statistics" else ""
        return f"first call with its own error: {name}{module}{where}: {first.reason}{certainty}; {tally}"

    # ------------------------------------------------------------ files

    def columns(self, stack_mode: bool) -> list[str]:
        """Return the CSV header for this report's basis."""
        middle = {"tensor": TENSOR_COLUMNS, "md5": MD5_COLUMNS}.get(self.basis, STATISTICS_COLUMNS)
        return (
            BASIC_COLUMNS + middle + SUMMARY_COLUMNS + TAIL_COLUMNS + ([STACK_COLUMN] if stack_mode else [])
        )

    def csv_text(self, stack_mode: bool = False) -> str:
        """Render the rows as ptdbg's CSV, in execution order; the stack on each call's first row."""
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(self.columns(stack_mode))
        verdict_of: dict[int, CallVerdict] = {}
        first_row: set[int] = set()
        for verdict in self.calls:
            for index in verdict.rows:
                verdict_of[index] = verdict
            if verdict.rows:
                first_row.add(verdict.rows[0])
        na = "N/A"
        no_stats = (None,) * 4
        basis = self.basis
        rows = self.rows
        for index in sorted(verdict_of):
            row, verdict = rows[index], verdict_of[index]
            cells: list[Any] = [
                row.target_name or na,
                row.orig_name or na,
                row.target_dtype or na,
                row.orig_dtype or na,
                na if row.target_shape is None else str(list(row.target_shape)),
                na if row.orig_shape is None else str(list(row.orig_shape)),
            ]
            if basis == "tensor":
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
            elif basis == "md5":
                cells += [row.target_md5 or na, row.orig_md5 or na]
            else:
                cells += [na if v is None else v for v in (row.stat_diff or no_stats)]
                cells += [_percent(v) for v in (row.stat_rel or no_stats)]
            cells += [na if v is None else v for v in (row.target_stats or no_stats)]
            cells += [na if v is None else v for v in (row.orig_stats or no_stats)]
            cells += [row.accuracy, row.message, verdict.status, verdict.module or ""]
            if stack_mode:
                cells.append("\n".join(verdict.stack) if index in first_row else "")
            writer.writerow(cells)
        return out.getvalue()

    def advisor_text(self) -> str:
        """Ptdbg's three lines (``Line:``, ``Suspect Nodes:``, ``Expert Advice:``) and tscore's verdict."""
        first = self.first_error or first_failure(self.calls)
        if first is None:
            return (
                "Line: NA\nSuspect Nodes: NA\n"
                "Expert Advice: All data in comparison result meets the accuracy requirements.\n"
                f"Verdict: {self.summary()}\n"
            )
        failing = [i for i in first.rows if self.rows[i].accuracy == "No"]
        line = self._csv_line(failing[0] if failing else first.rows[0]) if first.rows else "NA"
        return (
            f"Line: {line}\nSuspect Nodes: {first.label}\nExpert Advice: {_advice(first)}\n"
            f"Verdict: {self.summary()}\n"
        )

    def _csv_line(self, row: int) -> int:
        """Return the CSV line that shows row ``row`` (the header is line 1; rows of calls in order)."""
        shown = sorted(i for verdict in self.calls for i in verdict.rows)
        return shown.index(row) + 2

    def write_csv(self, path: str, stack_mode: bool = False) -> None:
        """Write the CSV atomically."""
        data = self.csv_text(stack_mode).encode("utf-8")
        write_atomic(path, lambda stream: stream.write(data))

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


def _percent(value: float | None) -> str:
    if value is None:
        return "N/A"
    if value == 0.0:  # most rows of two runs that agree
        return "0%"
    if not math.isfinite(value):
        return "inf" if value > 0 else "nan"
    return f"{value * 100:.6g}%"
