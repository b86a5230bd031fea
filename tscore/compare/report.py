"""The result of a comparison as data, and its renderings: table, CSV and JSON.

One :class:`CompareReport` holds a :class:`PairResult` per file pair. The
terminal table keeps TroubleShooter's title and columns; CSV and JSON carry
every field, numbers as numbers. Display values are rounded, never cut.
"""

from __future__ import annotations

import csv
import enum
import io
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field
from tabulate import tabulate

from tscore.compare.pairs import (
    PairResult,
    PairStatus,
    divergence_line,
    format_number,
    format_ratio,
    format_shape,
)
from tscore.compare.spool import Spool
from tscore.npy_files import AtomicFile, write_atomic
from tscore.terminal import fit_lines, terminal_width, two_line_header, wrap_name, wrap_text

if TYPE_CHECKING:
    from tscore.html_report.page import ReportPage

TITLE = "The list of comparison results"


def print_report(text: str) -> None:
    """Print a rendered report to standard output: the one place library code prints.

    Callers reach it only when the user asked for output (``print_level``,
    ``print_map``, ``print_conv_info``).
    """
    print(text, file=sys.stdout)


# What the "result of allclose" column shows for rows whose values were not judged.
_STATUS_LABELS = {
    PairStatus.SHAPE_MISMATCH: "Shape is inconsistent",
    PairStatus.MISSING: "Missing",
    PairStatus.UNREADABLE: "Unreadable",
}


def _allclose_cell(row: PairResult) -> str:
    return _STATUS_LABELS.get(row.status, str(row.allclose))


def boxed(title: str, body: str) -> str:
    """Put ``title`` in a box on top of a ``tabulate(..., tablefmt="pretty")`` table.

    Each line of ``title`` is centred on its own; one wider than the table wraps inside the box.
    """
    width = len(body.splitlines()[0])
    rule = "+" + "-" * (width - 2) + "+"
    lines = [
        wrapped
        for line in title.splitlines()
        for wrapped in ([line] if len(line) <= width - 2 else wrap_text(line, width - 4))
    ]
    return "\n".join([rule, *("|" + line.center(width - 2) + "|" for line in lines), body])


MIN_NAME = 10  # a name column fitted to the terminal is at least this wide (names wrap, nothing is cut)


def _table_width(body: str) -> int:
    return len(body.splitlines()[0])


def pair_table(
    pairs: list[PairResult],
    *,
    title: str = TITLE,
    name_headers: tuple[str, str] = ("orig array name", "target array name"),
    compare_shape: bool = False,
    only_failed: bool = False,
    footer: list[str] | None = None,
) -> str:
    """Render value comparisons as TroubleShooter's table, with numbered notes and footer lines below.

    At a terminal (:func:`~tscore.terminal.terminal_width`) a table wider than the terminal gets
    headers and the two differences on two lines, then names wrapped after ``_``, ``.`` or ``/``
    (at least :data:`MIN_NAME` wide); the notes and footer wrap at spaces. Nothing is cut.

    :param name_headers: the two name columns' titles.
    :param only_failed: leave out the rows that passed.
    """
    headers = list(name_headers)
    if compare_shape:
        headers += ["shape of orig", "shape of target"]
    headers += ["result of allclose", "ratio of allclose", "cosine similarity", "mean & max diffs"]
    names: list[tuple[str, str, str]] = []  # orig name, its note's mark, target name
    cells: list[list[str]] = []
    notes: list[str] = []
    for pair in pairs:
        if only_failed and pair.passed:
            continue
        row = [format_shape(pair.orig_shape), format_shape(pair.target_shape)] if compare_shape else []
        row += [
            _allclose_cell(pair),
            format_ratio(pair.ratio_close),
            format_number(pair.cosine),
            f"{format_number(pair.mean_abs_diff)}, {format_number(pair.max_abs_diff)}",
        ]
        mark = ""
        if pair.message:
            notes.append(f"[{len(notes) + 1}] {pair.orig_name} / {pair.target_name}: {pair.message}")
            mark = f" [{len(notes)}]"
        names.append((str(pair.orig_name), mark, str(pair.target_name)))
        cells.append(row)

    def render(limit: int | None) -> str:
        rows = [
            [o + mark, t, *row] if limit is None else [wrap_name(o, limit) + mark, wrap_name(t, limit), *row]
            for (o, mark, t), row in zip(names, cells, strict=True)
        ]
        return tabulate(rows, headers=headers, tablefmt="pretty")

    width = terminal_width()
    body = render(None)
    if width is not None and _table_width(body) > width:
        headers = [two_line_header(header) for header in headers]
        cells = [[*row[:-1], row[-1].replace(", ", ",\n")] for row in cells]
        body = render(None)
        limit = max((max(len(o), len(t)) for o, _, t in names), default=0)
        while _table_width(body) > width and limit > MIN_NAME:
            limit = max(MIN_NAME, limit - max(1, (_table_width(body) - width + 1) // 2))
            body = render(limit)
    below = fit_lines("\n".join([*notes, *(footer or [])]), width)
    return "\n".join([boxed(title, body), *([below] if below else [])])


KEEP_ALL_ROWS = 20_000  # a report of at most this many pairs keeps every row in memory
MAX_FAILED_ROWS = 2_000  # a bigger one keeps at most this many failing rows (iter_pairs() gives all)


def _tally() -> dict[str, int]:
    return {**{status.value: 0 for status in PairStatus}, "passed": 0, "failed": 0}


@dataclass
class RenderedRows:
    """The rows of one block of pairs, rendered where they were computed (maybe a worker process)."""

    csv: bytes  # CSV lines, no header
    json: bytes | None  # the rows as JSON objects joined by commas, when the output is JSON
    counts: dict[str, int]
    kept: list[PairResult]  # every row, or only the failing ones (at most MAX_FAILED_ROWS)


def render_rows(rows: list[PairResult], want_json: bool, keep_all: bool) -> RenderedRows:
    """Count and render ``rows``; keep all of them or only the failing ones."""
    counts = _tally()
    kept: list[PairResult] = []
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    want_csv = not want_json or not keep_all  # the CSV output, or the spool of a report too big to keep
    for row in rows:
        passed = row.passed
        counts[row.status.value] += 1
        counts["passed" if passed else "failed"] += 1
        if keep_all or (not passed and len(kept) < MAX_FAILED_ROWS):
            kept.append(row)
        if want_csv:
            writer.writerow(csv_row(row))
    json_text = b",".join(_row_json(row) for row in rows) if want_json else None
    # surrogateescape: a file name that is not UTF-8 (bytes the file system allows) goes through as is
    return RenderedRows(buffer.getvalue().encode("utf-8", "surrogateescape"), json_text, counts, kept)


def _row_json(row: PairResult) -> bytes:
    """Return one row as JSON; a name that is not UTF-8 is written with its bytes escaped."""
    try:
        return row.model_dump_json().encode()
    except ValueError:  # pydantic refuses the lone surrogates of an undecodable file name
        data = row.model_dump(mode="json")
        for key in ("orig_name", "target_name"):
            if isinstance(data.get(key), str):
                data[key] = data[key].encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return json.dumps(data).encode()


class RowStream:
    """The rows of a comparison, block by block in pair order: counted, kept or spooled, written out.

    Memory stays bounded whatever the number of rows: beyond
    :data:`KEEP_ALL_ROWS` pairs only failing rows are kept (at most
    :data:`MAX_FAILED_ROWS`), every row goes to a temporary CSV spool file
    that :meth:`CompareReport.iter_pairs` reads back, and to the output
    file (CSV or JSON) as it is made.
    """

    def __init__(self, total: int, out_path: str | None) -> None:
        self.keep_all = total <= KEEP_ALL_ROWS
        self.want_json = bool(out_path and out_path.lower().endswith(".json"))
        self.kept: list[PairResult] = []
        self.counts = _tally()
        self.spool = None if self.keep_all else Spool("tscore-rows-")
        self._out = AtomicFile(out_path) if out_path else None
        if self._out is not None:
            self._out.write(b'{"pairs": [' if self.want_json else _CSV_HEADER)
        self._json_started = False  # a comma goes before every block of JSON rows but the first

    def add(self, block: RenderedRows) -> None:
        """Count, keep or spool, and write the rows of the next block."""
        for key, value in block.counts.items():
            self.counts[key] += value
        room = len(block.kept) if self.keep_all else MAX_FAILED_ROWS - len(self.kept)
        self.kept.extend(block.kept[: max(room, 0)])
        if self.spool is not None:
            self.spool.write(block.csv)
        if self._out is not None:
            if self.want_json and block.json:
                self._out.write((b"," if self._json_started else b"") + block.json)
                self._json_started = True
            elif not self.want_json:
                self._out.write(block.csv)

    def finish(self, report: CompareReport) -> None:
        """Complete the output file with the report's other fields and give it its name."""
        if self.spool is not None:
            report._spool = self.spool
        if self._out is None:
            return
        if self.want_json:  # the file holds every pair, whatever the report in memory keeps
            rest = report.model_copy(update={"pairs_complete": True}).model_dump_json(exclude={"pairs"})
            self._out.write(b"], " + rest[1:].encode())
        self._out.finish()

    def abort(self) -> None:
        """Drop the half-written output file (an error or Ctrl-C stopped the comparison)."""
        if self._out is not None:
            self._out.abort(RuntimeError("comparison stopped"))
        if self.spool is not None:
            self.spool.close()


class CompareReport(BaseModel):
    """The pairs compared between two folders, with the settings used and the count of every outcome."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    orig_dir: str
    target_dir: str
    rtol: float
    atol: float
    equal_nan: bool
    match: str = Field(description="how files were paired: name, number, shape or custom")
    kernel: str = Field(description="the compare kernel used: c, numpy or numba")
    total: int = Field(description="the number of pairs compared")
    counts: dict[str, int] = Field(description="pairs per status, plus passed and failed")
    pairs: list[PairResult] = Field(
        description=f"every pair when there are at most {KEEP_ALL_ROWS:,} (pairs_complete), otherwise "
        f"the failing ones, at most {MAX_FAILED_ROWS:,}; iter_pairs() gives every row"
    )
    pairs_complete: bool = True
    ignored_files: dict[str, list[str]] = Field(
        default_factory=dict, description="non-.npy files left out, per side ('orig', 'target')"
    )
    skipped_files: dict[str, list[str]] = Field(
        default_factory=dict,
        description="temporary files of saves that never finished (their process is gone), per side; "
        "never read, removed by the next save or `tscore clean`",
    )
    paired_by_key: int = Field(
        default=0,
        description="pairs (match 'name') of files whose names differ but that saved the same name and key "
        "(TroubleShooter 1.0.18's numbering against spec 003's, or ids shifted by a save one run made)",
    )
    _spool: Spool | None = PrivateAttr(default=None)  # every row as CSV, beyond KEEP_ALL_ROWS

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """True when every pair passed."""
        return self.counts.get("failed", 0) == 0

    @property
    def first_divergence(self) -> PairResult | None:
        """The first pair, in pair order, that is out of tolerance, missing or of another shape.

        An unreadable file is no divergence of the runs: it is counted and named apart (exit 3).
        """
        return next((p for p in self.pairs if not p.passed and p.status is not PairStatus.UNREADABLE), None)

    def iter_pairs(self) -> Iterator[PairResult]:
        """Yield every row in pair order, kept or not (read back from the spool file).

        :raises ValueError: for a report that keeps only its failing rows and came from elsewhere
            (JSON, another process): the other rows are in the CSV or JSON file it was written to.
        """
        if self.pairs_complete:
            yield from self.pairs
            return
        if self._spool is None:
            raise ValueError(
                f"this report of {self.orig_dir} and {self.target_dir} keeps {len(self.pairs):,} of its "
                f"{self.total:,} pairs and was made in another process or read from JSON: every pair is "
                "in the CSV or JSON file it was written to; compare the folders again to have them all"
            )
        with open(self._spool.path(), encoding="utf-8", errors="surrogateescape", newline="") as text:
            for cells in csv.reader(text):  # each iteration reads with its own handle
                yield row_from_csv(cells)

    def summary(self) -> str:
        """One line: how many pairs passed, failed, and why; ignored files."""
        counts = self.counts
        parts = [f"{self.total} pairs: {counts['passed']} within tolerance"]
        parts.extend(
            f"{counts[s.value]} {s.value.replace('_', ' ')}"
            for s in PairStatus
            if s is not PairStatus.OK and counts[s.value]
        )
        ignored = sum(len(v) for v in self.ignored_files.values())
        line = ", ".join(parts)
        if ignored:
            per_side = ", ".join(f"{side} {len(v)}" for side, v in self.ignored_files.items() if v)
            line += f"; {ignored} non-.npy file(s) ignored ({per_side})"
        if self.paired_by_key:
            line += (
                f"; {self.paired_by_key} pair(s) by the name and key they saved, their ids differ "
                "(TroubleShooter 1.0.18's numbering, or a save that one run made)"
            )
        skipped = sum(len(v) for v in self.skipped_files.values())
        if skipped:
            line += f"; {skipped} unfinished save(s) skipped (`tscore clean FOLDER` removes them)"
        if not self.pairs_complete:
            which = (
                "every" if len(self.pairs) == counts["failed"] else f"the first {len(self.pairs):,} of the"
            )
            line += f"; the report keeps {which} failing pair(s), iter_pairs() reads back all {self.total:,}"
        return line

    def table(self, *, compare_shape: bool = False, only_failed: bool = False) -> str:
        """Render the spec's terminal table: title, names, [shapes], allclose, ratio, cosine, diffs.

        Under the title, the two folders. Rows with something to explain (missing files, dtypes,
        NaN counts) get a numbered note below the table, then the summary line and the first
        divergence. A report too big to keep every row shows its failing rows.
        """
        return pair_table(
            self.pairs,
            title=f"{TITLE}\norig: {self.orig_dir}\ntarget: {self.target_dir}",
            compare_shape=compare_shape,
            only_failed=only_failed,
            footer=self.headline().splitlines(),
        )

    def headline(self) -> str:
        """Return the summary line and, when a pair differs, the line naming the first divergence."""
        first = self.first_divergence
        return self.summary() + (f"\n{divergence_line(first)}" if first is not None else "")

    def to_csv(self) -> str:
        """Every pair as one CSV row; numeric columns hold plain numbers, empty when undefined."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        writer.writerows(csv_row(pair) for pair in self.iter_pairs())
        return buffer.getvalue()

    def to_json(self, indent: int | None = 2) -> str:
        """Render the whole report, every pair included, as JSON (inf written as ``"Infinity"``)."""
        data = json.loads(self.model_copy(update={"pairs_complete": True}).model_dump_json(exclude={"pairs"}))
        data["pairs"] = [json.loads(_row_json(pair)) for pair in self.iter_pairs()]
        return json.dumps(data, indent=indent)

    def to_html(self, path: str | os.PathLike[str], metric: str | None = None) -> str:
        """Write this report as one self-contained HTML page (:mod:`tscore.html_report`); return the path.

        :param metric: the error metric charted first (``max_rel``, ``cosine_distance``, ``max_abs``).
        :raises TargetPathError: naming the path, when its folder is missing or not writable.
        """
        from tscore.html_report import write_html

        return write_html(self, path, metric)

    def to_page(self) -> ReportPage:
        """Return this report's page data, which :mod:`tscore.html_report` renders."""
        from tscore.compare.pair_page import compare_page

        return compare_page(self)

    def write(self, path: str | os.PathLike[str]) -> str:
        """Write the report to ``path``: JSON for ``.json``, CSV otherwise, replacing any old file.

        The file is written under a temporary name and renamed, so a reader
        never sees half a report. Returns the path.

        :raises TargetPathError: naming the path when it cannot be written.
        """
        target = os.fspath(path)
        text = self.to_json() if target.lower().endswith(".json") else self.to_csv()
        write_atomic(target, lambda stream: stream.write(text.encode("utf-8", "surrogateescape")))
        return target


CSV_COLUMNS = [*PairResult.model_fields, "passed"]


def csv_row(pair: PairResult) -> list[Any]:
    """Return the CSV cells of one row, in :data:`CSV_COLUMNS` order."""
    values = pair.__dict__
    cells = [values[column] for column in _STORED_COLUMNS]
    for position, value in enumerate(cells):
        if value is None:
            cells[position] = ""
        elif type(value) is tuple or isinstance(value, enum.Enum):
            cells[position] = _csv_cell(value)
    cells.append(pair.passed)
    return cells


_STORED_COLUMNS = list(PairResult.model_fields)
_CSV_HEADER = (",".join(CSV_COLUMNS) + "\n").encode()
_SHAPE_COLUMNS = {"orig_shape", "target_shape"}


def row_from_csv(cells: list[str]) -> PairResult:
    """Read back one row that :func:`csv_row` wrote."""
    values: dict[str, Any] = {"orig_name": None, "target_name": None}
    for column, cell in zip(_STORED_COLUMNS, cells, strict=False):
        if cell == "":
            continue
        values[column] = json.loads(cell) if column in _SHAPE_COLUMNS else cell
    return PairResult.model_validate(values)


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return "[" + ", ".join(str(int(n)) for n in value) + "]"  # what json.dumps writes for a shape
    return value
