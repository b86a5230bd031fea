"""Comparing two dumps: ``compare_dumps`` and ptdbg's ``compare``.

Any two of tscore's, msprobe's and ptdbg_ascend's dumps compare with each
other; many ranks at once is :mod:`tscore.dump_compare.distributed`.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import gc
import itertools
import logging
import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tscore.dump_compare.api_names import api_table, neutral_calls
from tscore.dump_compare.calls import Call, DumpReadError, DumpSource
from tscore.dump_compare.pairing import CallPair, fill_composite, pair_calls, pair_items
from tscore.dump_compare.report import DumpCompareReport
from tscore.dump_compare.row_stream import DumpRowStream
from tscore.dump_compare.rows import Row, compare_items, statistics_errors
from tscore.dump_compare.sources import read_dump
from tscore.dump_compare.statistics_lane import Record, compare_block
from tscore.dump_compare.streams import DumpStream, Records, names_agree, stream_dump
from tscore.dump_compare.verdicts import ForwardErrors, judge_in_order
from tscore.dump_format.reading import read_info
from tscore.errors import TargetPathError
from tscore.run_settings import explanation, settings_differences

log = logging.getLogger(__name__)

DEFAULT_TOLERANCE = 1e-3
_RECORD_FILES = ("dump.jsonl", "dump.json")


def _dump_folder(path: str, role: str) -> str:
    """Find the one dump folder at or under ``path`` (a step/rank folder, a records file, or a dump root)."""
    if os.path.isfile(path) or any(os.path.isfile(os.path.join(path, f)) for f in _RECORD_FILES):
        return path
    if os.path.isdir(path) and any(f.endswith(".pkl") for f in os.listdir(path)):
        return path
    found = []
    for root, _, files in os.walk(path):
        if any(f in _RECORD_FILES or f.endswith(".pkl") for f in files):
            found.append(root)
    if not found:
        raise DumpReadError(
            f"{role}: no dump in {path!r} (no dump.jsonl, dump.json or .pkl at or under it); "
            "pass the dump_path of a dump or one of its step/rank folders"
        )
    if len(found) > 1:
        shown = ", ".join(sorted(found)[:4])
        raise DumpReadError(
            f"{role}: {path!r} holds {len(found)} dumps ({shown}...): pass one step/rank folder, or compare "
            "every rank with compare_distributed"
        )
    return found[0]


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a dump's records are read and compared.

    Hundreds of thousands of small objects that all stay alive make each collection walk
    them all again: a third of the time for 100,000 records. Nothing here makes cycles;
    reference counting frees what is dropped. The collector is back on afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


BLOCK_CALLS = 2048  # calls compared, judged and written out at a time


def compare_sources(
    target: DumpSource,
    orig: DumpSource,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    api_map: Mapping[str, str] | None = None,
    kernel: str | None = None,
    workers: int | None = None,
    csv_path: str | None = None,
    stack_mode: bool = False,
) -> DumpCompareReport:
    """Pair, compare and judge two dumps already read, a block of calls at a time.

    :param workers: threads comparing tensor files (default: one a core, at most 4; 1: none).
    :param csv_path: write ptdbg's CSV here as the rows are made (atomically: the name appears at
        the end); ``stack_mode`` adds the stack column.
    """
    began = time.perf_counter()
    if [c.label for c in target.calls] != [c.label for c in orig.calls]:
        for source in (target, orig):  # pairing by alignment weighs the input shapes of every call
            for start in range(0, len(source.calls), BLOCK_CALLS):
                chunk = source.calls[start : start + BLOCK_CALLS]
                source.load(chunk)
                source.release(chunk)
    pairs = pair_calls(target.calls, orig.calls, api_map)

    def blocks() -> Iterator[list[CallPair]]:
        for start in range(0, len(pairs), BLOCK_CALLS):
            block = pairs[start : start + BLOCK_CALLS]
            for source, side in ((target, "target"), (orig, "orig")):
                source.load(_calls_of(block, side))
            yield [fill_composite(pair) for pair in block]
            for source, side in ((target, "target"), (orig, "orig")):
                source.release(_calls_of(block, side))

    report = _compare_blocks(
        target, orig, blocks(), csv_path, stack_mode, tolerance=tolerance, kernel=kernel, workers=workers
    )
    report.seconds = time.perf_counter() - began
    return report


def _calls_of(block: list[CallPair], side: str) -> list[Call]:
    """Return one side's calls of a block of pairs, a composite's several calls among them."""
    calls = [call for pair in block if (call := getattr(pair, side)) is not None]
    seen = {id(call) for call in calls}
    return calls + [c for pair in block if pair.parts_of == side for c in pair.parts if id(c) not in seen]


def compare_streams(
    target: DumpStream,
    orig: DumpStream,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    kernel: str | None = None,
    workers: int | None = None,
    csv_path: str | None = None,
    stack_mode: bool = False,
) -> DumpCompareReport:
    """Compare two dumps whose calls have the same names in the same order, in step, a block at a time.

    Nothing is held but the block being compared (:mod:`tscore.dump_compare.streams`).
    """
    began = time.perf_counter()
    blocks: Iterator[list[CallPair]] | Iterator[_RecordBlock]
    if (
        target.records is not None
        and orig.records is not None
        and _basis(target.source, orig.source) == "statistics"
    ):
        blocks = _record_blocks(target, orig)
    else:
        blocks = _call_blocks(target, orig)
    report = _compare_blocks(
        target.source,
        orig.source,
        blocks,
        csv_path,
        stack_mode,
        tolerance=tolerance,
        kernel=kernel,
        workers=workers,
    )
    report.seconds = time.perf_counter() - began
    return report


class NamesDiffer(DumpReadError):
    """Two dumps compared in step whose calls stopped agreeing: they changed, or agreed only as written."""


def _changed(target: DumpStream, orig: DumpStream, label: str) -> NamesDiffer:
    return NamesDiffer(
        f"{target.source.path} or {orig.source.path} changed while it was compared (the calls no longer "
        f"agree at {label}); compare again once the runs are done"
    )


def _call_blocks(target: DumpStream, orig: DumpStream) -> Iterator[list[CallPair]]:
    """Pair two dumps' calls in step, a block at a time."""
    both = itertools.zip_longest(target.calls(), orig.calls())
    while True:
        block = []
        for a, b in itertools.islice(both, BLOCK_CALLS):
            if a is None or b is None or a.label != b.label:
                raise _changed(target, orig, (a or b).label)
            block.append(CallPair(a, b, "name"))
        if not block:
            return
        yield block


@dataclass
class _RecordBlock:
    """A block of two dumps' records, in step, for :mod:`tscore.dump_compare.statistics_lane`."""

    records: list[Record]
    start: int  # the position of its first call in each dump
    target: Records
    orig: Records


def _record_blocks(target: DumpStream, orig: DumpStream) -> Iterator[_RecordBlock]:
    """Read two dumps' records in step (msprobe's or tscore's, both of one format), a block at a time."""
    assert target.records is not None and orig.records is not None
    mine, theirs = target.records, orig.records
    both = itertools.zip_longest(mine.each(), theirs.each())
    start = 0
    while True:
        block = []
        for a, b in both:
            if a is None or b is None or a[0] != b[0]:
                raise _changed(target, orig, (a or b)[0])
            name = mine.name(*a)
            if theirs.format == "tscore" and theirs.name(*b) != name:  # named by its fields, not its name
                raise _changed(target, orig, a[0])
            if name is not None:  # msprobe's: the same name on both sides, taken apart once
                block.append((a[0], name, a[1], b[1]))
                if len(block) == BLOCK_CALLS:
                    break
        if not block:
            return
        yield _RecordBlock(block, start, mine, theirs)
        start += len(block)


def _basis(target: DumpSource, orig: DumpSource) -> str:
    """Say what two dumps' rows mostly compare: ``tensor`` (both hold tensors), ``md5`` or ``statistics``."""
    if target.has_tensors and orig.has_tensors:
        return "tensor"
    return "md5" if target.task == orig.task == "md5" else "statistics"


def _compare_blocks(
    target: DumpSource,
    orig: DumpSource,
    blocks: Iterator[list[CallPair]] | Iterator[_RecordBlock],
    csv_path: str | None,
    stack_mode: bool,
    *,
    tolerance: float,
    kernel: str | None,
    workers: int | None,
) -> DumpCompareReport:
    """Compare, judge and write out the pairs of calls block by block; the report of it all."""
    basis = _basis(target, orig)
    use_tensors = basis == "tensor"
    forward_errors = ForwardErrors()  # what each forward call saw and made

    def one(value: tuple[Any, Any]) -> Row:
        return compare_items(*value, use_tensors=use_tensors, tolerance=tolerance, kernel=kernel)

    # reading a tensor file and the compare kernels (C, numba, numpy) release the GIL: threads overlap
    threads = use_tensors and workers != 1
    pool = cf.ThreadPoolExecutor(max_workers=workers or min(4, os.cpu_count() or 1)) if threads else None
    stream = DumpRowStream(basis, csv_path, stack_mode)
    try:
        for block in blocks:
            if isinstance(block, _RecordBlock):  # the calls that agree as columns (statistics_lane)
                stream.add_lane(
                    compare_block(
                        block.records, block.start, block.target, block.orig, tolerance, forward_errors
                    )
                )
                continue
            values: list[tuple[Any, Any]] = []
            spans = []
            for pair in block:
                items = pair_items(pair.target, pair.orig)
                spans.append(range(len(values), len(values) + len(items)))
                values += items
            rows = list(pool.map(one, values, chunksize=8)) if pool else [one(v) for v in values]
            statistics_errors(rows, tolerance)
            verdicts = []
            for pair, indexes in zip(block, spans, strict=True):
                verdicts.append(judge_in_order(pair, rows, list(indexes), tolerance, forward_errors))
            stream.add(rows, verdicts)
        stream.finish()
    except BaseException as exc:
        stream.abort(exc)
        raise
    finally:
        if pool is not None:
            pool.shutdown()
    report = DumpCompareReport.model_construct(  # rows and verdicts are built here: nothing to validate
        target_path=target.path,
        orig_path=orig.path,
        target_format=target.format,
        orig_format=orig.format,
        target_label=target.label,
        orig_label=orig.label,
        basis=basis,
        tolerance=tolerance,
        rows=stream.rows,
        calls=stream.calls,
        rows_complete=stream.keep_all,
        total_rows=stream.total_rows,
        total_calls=stream.total_calls,
        call_counts=stream.call_counts,
        unread_tensors=stream.unread,
        first_error=stream.first_error,
        first_failure=stream.first_failure,
        seconds=0.0,
        files=[csv_path] if csv_path else [],
    )
    report._spool = stream.spool
    return report


def compare_dumps(
    target_path: str | os.PathLike[str],
    orig_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str] | None = None,
    *,
    stack_mode: bool = False,
    auto_analyze: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
    api_map: Mapping[str, str] | None = None,
    suffix: str = "",
    print_level: int = 0,
    kernel: str | None = None,
    target_data_dir: str | None = None,
    orig_data_dir: str | None = None,
) -> DumpCompareReport:
    """Compare two dumps of any format (tscore, msprobe, ptdbg_ascend); write ptdbg's files when asked.

    :param target_path: the run to check: a dump folder of one step and rank, its records file, or a
        dump_path holding exactly one such folder.
    :param orig_path: the run it is checked against.
    :param output_path: an existing folder for ``compare_result{suffix}_{timestamp}.csv`` and, with
        ``auto_analyze``, ``advisor{suffix}_{timestamp}.txt``; None writes nothing.
    :param stack_mode: add the NPU_Stack_Info column.
    :param tolerance: the scale-free error (relative L2, or relative statistics) above which a
        value differs.
    :param print_level: 0 prints nothing, 1 the summary line.
    :param target_data_dir: for a ptdbg ``.pkl``, its folder of ``.npy`` files when not beside it
        under the ``.pkl``'s name (``orig_data_dir`` likewise).
    :raises DumpReadError: naming a path that holds no dump.
    :raises TargetPathError: naming ``output_path`` when it is not an existing folder.
    """
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    out_folder = None if output_path is None else os.fspath(output_path)
    if out_folder is not None and not os.path.isdir(out_folder):
        raise TargetPathError(f"output_path {out_folder!r} is not an existing folder; create it first")
    stamp = time.strftime("%Y%m%d%H%M%S")
    csv_path = None if out_folder is None else os.path.join(out_folder, f"compare_result{suffix}_{stamp}.csv")
    options: dict[str, Any] = {"tolerance": tolerance, "kernel": kernel, "csv_path": csv_path}
    target_folder = _dump_folder(os.fspath(target_path), "target")
    orig_folder = _dump_folder(os.fspath(orig_path), "orig")
    with _no_cyclic_gc():
        report = _compare_folders(
            (target_folder, target_data_dir), (orig_folder, orig_data_dir), api_map, stack_mode, options
        )
    _note_settings(report, target_folder, orig_folder)
    if out_folder is not None and auto_analyze:
        advisor = os.path.join(out_folder, f"advisor{suffix}_{stamp}.txt")
        report.write_advisor(advisor)
        report.files.append(advisor)
    if auto_analyze:
        log.warning("dump compare: %s", report.summary()) if not report.passed else log.info(
            "dump compare: %s", report.summary()
        )
    if print_level:
        print(report.summary())
    return report


def _note_settings(report: DumpCompareReport, target_folder: str, orig_folder: str) -> None:
    """Name the settings that change numbers and differ between the runs, and what they explain."""
    found = [read_info(folder).get("settings") for folder in (target_folder, orig_folder)]
    if not all(isinstance(f, dict) and f for f in found):
        return
    differences = settings_differences(found[0], found[1])  # type: ignore[arg-type]
    if not differences:
        return
    errors = [r.error for r in report.iter_rows() if r.error is not None and math.isfinite(r.error)]
    report.settings_differences = differences
    report.settings_note = explanation(differences, max(errors) if errors else None)
    log.info("dump compare: %s", report.settings_note)


def _compare_folders(
    target_at: tuple[str, str | None],
    orig_at: tuple[str, str | None],
    api_map: Mapping[str, str] | None,
    stack_mode: bool,
    options: dict[str, Any],
) -> DumpCompareReport:
    """Compare two dump folders the cheapest way they allow: in step, read on demand, or whole.

    :raises DumpReadError: naming a dump that cannot be read.
    """
    with contextlib.ExitStack() as opened:
        streams = []
        if target_at[1] is None and orig_at[1] is None:  # a ptdbg data folder: read whole
            # each dump's structure is found with numpy, which lets the other thread run
            pool = cf.ThreadPoolExecutor(max_workers=2)
            futures = [pool.submit(_opened, stream_dump, folder) for folder, _ in (target_at, orig_at)]
            try:
                cf.wait(futures)
            except BaseException:  # a Ctrl-C: what opens after it is closed as it does
                for future in futures:
                    future.add_done_callback(_close_stream)
                raise
            finally:
                pool.shutdown(wait=False)
            for future in futures:
                if future.exception() is None and future.result() is not None:
                    opened.callback(future.result().close)
            for future in futures:
                found = future.result()  # the first error, once every dump opened is set to close
                if found is not None:
                    streams.append(found)
        if len(streams) == 2 and _opened(names_agree, *streams):  # the same calls: in step, nothing held
            try:
                return compare_streams(*streams, stack_mode=stack_mode, **options)
            except NamesDiffer:  # names the same as written, but one record was not whole (cut short)
                if _opened(names_agree, *streams, False):
                    raise  # the same calls, read whole: a dump changed while it was compared
                log.info("dump compare: the calls differ once read; paired instead of compared in step")
    target = read_dump(*target_at, lazy=True)
    try:
        orig = read_dump(*orig_at, lazy=True)
    except BaseException:
        target.close()
        raise
    with contextlib.ExitStack() as opened:
        opened.callback(target.close)
        opened.callback(orig.close)
        if target.framework_name != orig.framework_name:
            tables = [api_table(s.framework_name) for s in (target, orig)]
            if all(tables):  # two frameworks: every value read, named by neutral slots, bias_add folded
                opened.close()
                del target, orig  # the lazy index goes before the whole dumps come
                target, orig = read_dump(*target_at), read_dump(*orig_at)
                target.calls = neutral_calls(target.calls, tables[0])
                orig.calls = neutral_calls(orig.calls, tables[1])
            elif _named_alike(target, orig):  # mindtorch's dump against torch's: torch's names on both
                log.info(
                    "dump compare: %s against %s, their APIs named alike: calls pair by name",
                    target.framework,
                    orig.framework,
                )
            else:
                missing = [s.framework for s, t in zip((target, orig), tables, strict=True) if not t]
                log.warning(
                    "dump compare: %s against %s, but no installed plugin names the APIs of %s: API "
                    "records pair by name only (install the plugin and its framework)",
                    target.framework,
                    orig.framework,
                    ", ".join(str(m) for m in missing),
                )
        return compare_sources(target, orig, api_map=api_map, stack_mode=stack_mode, **options)


def _named_alike(target: DumpSource, orig: DumpSource) -> bool:
    """Say whether two dumps name most of their APIs alike (``Functional.conv2d`` on both sides).

    A framework that runs another's API (mindtorch runs torch's on MindSpore) dumps its calls
    under that framework's names: its calls pair with the other's by name, no table needed.
    """
    apis = [
        {f"{c.name.prefix}.{c.name.api}" for c in source.calls if c.name.prefix != "Module"}
        for source in (target, orig)
    ]
    smaller = min(len(apis[0]), len(apis[1]))
    return smaller > 0 and len(apis[0] & apis[1]) >= 0.8 * smaller


def _close_stream(future: cf.Future[DumpStream | None]) -> None:
    found = None if future.cancelled() or future.exception() is not None else future.result()
    if found is not None:
        found.close()


def _opened(read: Any, *args: Any) -> Any:
    """Run a first reading step of the in-step comparison; a file that cannot be read is a DumpReadError."""
    try:
        return read(*args)
    except OSError as exc:
        raise DumpReadError(f"a dump cannot be read: {exc}") from exc


def compare(
    dump_result_param: Mapping[str, Any],
    output_path: str | os.PathLike[str],
    shape_flag: bool = False,
    stack_mode: bool = False,
    auto_analyze: bool = True,
    fuzzy_match: bool = False,
    **kwargs: Any,
) -> DumpCompareReport:
    """ptdbg_ascend's ``compare``: two dumps named by ``dump_result_param``, results in ``output_path``.

    :param dump_result_param: ptdbg's keys (``npu_pkl_path``, ``bench_pkl_path``,
        ``npu_dump_data_dir``, ``bench_dump_data_dir``, ``is_print_compare_log``), msprobe's
        (``npu_json_path``/``npu_path``, ``bench_json_path``/``bench_path``, ``stack_json_path``),
        or simply two dump folders as ``npu_path`` and ``bench_path``.
    :param shape_flag: accepted for ptdbg's callers: tscore always pairs calls by what they are
        and their shapes, not only by name.
    :param fuzzy_match: accepted: one extra or missing call never shifts the others, fuzzy or not.
    """
    del shape_flag, fuzzy_match  # what they switched on in ptdbg, tscore always does
    if not isinstance(dump_result_param, Mapping):
        raise DumpReadError(
            f"compare: dump_result_param must be a dict, got {type(dump_result_param).__name__}"
        )
    sides = {}
    data_dirs: dict[str, str | None] = {}
    for side in ("npu", "bench"):
        keys = (f"{side}_pkl_path", f"{side}_json_path", f"{side}_path", f"{side}_dump_data_dir")
        given = next((dump_result_param[k] for k in keys if dump_result_param.get(k)), None)
        if given is None:
            raise DumpReadError(
                f"compare: dump_result_param names no {side} dump; give one of {', '.join(keys)}"
            )
        sides[side] = os.fspath(given)
        data = dump_result_param.get(f"{side}_dump_data_dir")
        data_dirs[side] = os.fspath(data) if data and os.fspath(data) != sides[side] else None
    stack_mode = stack_mode or bool(dump_result_param.get("stack_json_path"))
    return compare_dumps(
        sides["npu"],  # ptdbg's NPU run is the one checked: the target
        sides["bench"],
        output_path,
        stack_mode=stack_mode,
        auto_analyze=auto_analyze,
        print_level=1 if dump_result_param.get("is_print_compare_log") else 0,
        target_data_dir=data_dirs["npu"],
        orig_data_dir=data_dirs["bench"],
        **kwargs,
    )


# ---------------------------------------------------------------- ranks
