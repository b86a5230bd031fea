"""Comparing two dumps: ``compare_dumps``, ptdbg's ``compare`` and ``compare_distributed``.

Any two of tscore's, msprobe's and ptdbg_ascend's dumps compare with each
other. ``compare_distributed`` pairs rank folders and compares each pair on a
``concurrent.futures`` executor: local processes by default, or a Dask
cluster's (``client=dask.distributed.Client(...)``), where each worker reads
its rank's tensors itself; only the paths go out and the reports come back.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import gc
import logging
import multiprocessing
import os
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

from tscore.dump_compare.pairing import pair_calls, pair_items
from tscore.dump_compare.report import DumpCompareReport
from tscore.dump_compare.rows import Row, compare_items, statistics_errors
from tscore.dump_compare.sources import DumpReadError, DumpSource, read_dump
from tscore.dump_compare.verdicts import CallVerdict, first_own_error, judge_call
from tscore.errors import TargetPathError

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


def compare_sources(
    npu: DumpSource,
    bench: DumpSource,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    api_map: Mapping[str, str] | None = None,
    kernel: str | None = None,
    workers: int | None = None,
) -> DumpCompareReport:
    """Pair, compare and judge two dumps already read.

    :param workers: threads comparing tensor files (default: one a core, at most 4; 1: none).
    """
    began = time.perf_counter()
    use_tensors = npu.has_tensors and bench.has_tensors
    basis = "tensor" if use_tensors else ("md5" if npu.task == bench.task == "md5" else "statistics")
    verdicts: list[CallVerdict] = []
    pairs = pair_calls(npu.calls, bench.calls, api_map)
    rows_of = []
    values: list[tuple[Any, Any]] = []
    for pair in pairs:
        items = pair_items(pair.npu, pair.bench)
        rows_of.append(list(range(len(values), len(values) + len(items))))
        values += items

    def one(value: tuple[Any, Any]) -> Row:
        return compare_items(*value, use_tensors=use_tensors, tolerance=tolerance, kernel=kernel)

    if use_tensors and len(values) > 1 and workers != 1:
        # reading a tensor file and the compare kernel (numba, numpy) release the GIL: threads overlap
        with cf.ThreadPoolExecutor(max_workers=workers or min(4, os.cpu_count() or 1)) as pool:
            rows = list(pool.map(one, values, chunksize=8))
    else:
        rows = [one(value) for value in values]
    statistics_errors(rows, tolerance)
    forward_errors: dict[tuple[str, str, int], float | None] = {}  # what each forward call saw and made
    for pair, indexes in zip(pairs, rows_of, strict=True):
        call = pair.npu or pair.bench
        assert call is not None
        identity = (call.name.prefix, call.name.api, call.name.index)
        saved = forward_errors.get(identity) if call.name.direction == "backward" else None
        verdict = judge_call(pair, rows, indexes, tolerance, saved_error=saved)
        if call.name.direction == "forward":
            known = [e for e in (verdict.input_error, verdict.output_error) if e is not None]
            forward_errors[identity] = max(known) if known else None
        verdicts.append(verdict)
    report = DumpCompareReport.model_construct(  # rows and verdicts are built here: nothing to validate
        npu_path=npu.path,
        bench_path=bench.path,
        npu_format=npu.format,
        bench_format=bench.format,
        basis=basis,
        tolerance=tolerance,
        rows=rows,
        calls=verdicts,
        first_error=first_own_error(verdicts),
    )
    report.seconds = time.perf_counter() - began
    return report


def compare_dumps(
    npu_path: str | os.PathLike[str],
    bench_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str] | None = None,
    *,
    stack_mode: bool = False,
    auto_analyze: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
    api_map: Mapping[str, str] | None = None,
    suffix: str = "",
    print_level: int = 0,
    kernel: str | None = None,
) -> DumpCompareReport:
    """Compare two dumps of any format (tscore, msprobe, ptdbg_ascend); write ptdbg's files when asked.

    :param npu_path: the run to check: a dump folder of one step and rank, its records file, or a
        dump_path holding exactly one such folder.
    :param bench_path: the run it is checked against.
    :param output_path: an existing folder for ``compare_result{suffix}_{timestamp}.csv`` and, with
        ``auto_analyze``, ``advisor{suffix}_{timestamp}.txt``; None writes nothing.
    :param stack_mode: add the NPU_Stack_Info column.
    :param tolerance: the scale-free error (relative L2, or relative statistics) above which a
        value differs.
    :param print_level: 0 prints nothing, 1 the summary line.
    :raises DumpReadError: naming a path that holds no dump.
    :raises TargetPathError: naming ``output_path`` when it is not an existing folder.
    """
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    out_folder = None if output_path is None else os.fspath(output_path)
    if out_folder is not None and not os.path.isdir(out_folder):
        raise TargetPathError(f"output_path {out_folder!r} is not an existing folder; create it first")
    with _no_cyclic_gc():
        npu = read_dump(_dump_folder(os.fspath(npu_path), "npu"))
        bench = read_dump(_dump_folder(os.fspath(bench_path), "bench"))
        report = compare_sources(npu, bench, tolerance=tolerance, api_map=api_map, kernel=kernel)
    if out_folder is not None:
        stamp = time.strftime("%Y%m%d%H%M%S")
        csv_path = os.path.join(out_folder, f"compare_result{suffix}_{stamp}.csv")
        report.write_csv(csv_path, stack_mode)
        report.files.append(csv_path)
        if auto_analyze:
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
        raise TypeError(f"compare: dump_result_param must be a dict, got {type(dump_result_param).__name__}")
    sides = {}
    for side in ("npu", "bench"):
        keys = (f"{side}_pkl_path", f"{side}_json_path", f"{side}_path", f"{side}_dump_data_dir")
        given = next((dump_result_param[k] for k in keys if dump_result_param.get(k)), None)
        if given is None:
            raise ValueError(
                f"compare: dump_result_param names no {side} dump; give one of {', '.join(keys)}"
            )
        sides[side] = os.fspath(given)
    stack_mode = stack_mode or bool(dump_result_param.get("stack_json_path"))
    return compare_dumps(
        sides["npu"],
        sides["bench"],
        output_path,
        stack_mode=stack_mode,
        auto_analyze=auto_analyze,
        print_level=1 if dump_result_param.get("is_print_compare_log") else 0,
        **kwargs,
    )


# ---------------------------------------------------------------- ranks

_RANK = re.compile(r"^rank(\d+)$")


def rank_folders(path: str, role: str) -> list[str]:
    """List the ``rank{n}`` folders of a dump by rank number (directly under ``path``, or under its one step).

    :raises DumpReadError: naming the path when it holds no rank folder.
    """
    if not os.path.isdir(path):
        raise DumpReadError(f"{role}: {path!r} is not a folder")
    for folder in (path, *(os.path.join(path, d) for d in sorted(os.listdir(path)) if d.startswith("step"))):
        ranks = [d for d in os.listdir(folder) if _RANK.match(d) and os.path.isdir(os.path.join(folder, d))]
        if ranks:
            ranks.sort(key=lambda d: int(_RANK.match(d).group(1)))  # type: ignore[union-attr]
            return [os.path.join(folder, d) for d in ranks]
    raise DumpReadError(f"{role}: no rank folder (rank0, rank1 ...) in {path!r}")


def _compare_rank(
    npu: str, bench: str, output_path: str, suffix: str, options: dict[str, Any]
) -> dict[str, Any]:
    """Compare one pair of rank folders where this runs (a local process, a Dask worker)."""
    report = compare_dumps(npu, bench, output_path, suffix=suffix, **options)
    return report.model_dump(mode="json")


def compare_distributed(
    npu_dump_dir: str | os.PathLike[str],
    bench_dump_dir: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    *,
    executor: cf.Executor | None = None,
    client: Any = None,
    **kwargs: Any,
) -> list[DumpCompareReport]:
    """Compare every rank of two multi-rank dumps, rank folder against rank folder in rank order.

    One ``compare_result_rank{a}-rank{b}_{timestamp}.csv`` (and advisor) per pair in
    ``output_path``. Pairs run on ``executor`` (any ``concurrent.futures.Executor``), on
    ``client.get_executor()`` for a ``dask.distributed.Client``, or else on local processes.

    :raises DumpReadError: when the two dumps have different numbers of ranks, naming both.
    """
    npu_ranks = rank_folders(os.fspath(npu_dump_dir), "npu_dump_dir")
    bench_ranks = rank_folders(os.fspath(bench_dump_dir), "bench_dump_dir")
    if len(npu_ranks) != len(bench_ranks):
        raise DumpReadError(
            f"compare_distributed: {len(npu_ranks)} rank folders in {os.fspath(npu_dump_dir)!r} but "
            f"{len(bench_ranks)} in {os.fspath(bench_dump_dir)!r}; the runs must have as many ranks"
        )
    out = os.fspath(output_path)
    if not os.path.isdir(out):
        raise TargetPathError(f"output_path {out!r} is not an existing folder; create it first")
    own = None
    if executor is None and client is not None:
        executor = client.get_executor()
    if executor is None:
        # spawned, not forked: the caller may hold threads (a dump's writer, torch's pools) that a fork copies
        own = executor = cf.ProcessPoolExecutor(
            max_workers=max(1, min(len(npu_ranks), os.cpu_count() or 1)),
            mp_context=multiprocessing.get_context("spawn"),
        )
    try:
        futures = [
            executor.submit(
                _compare_rank,
                npu,
                bench,
                out,
                f"_{os.path.basename(npu)}-{os.path.basename(bench)}",
                dict(kwargs),
            )
            for npu, bench in zip(npu_ranks, bench_ranks, strict=True)
        ]
        reports = [DumpCompareReport.model_validate(f.result()) for f in futures]
    finally:
        if own is not None:
            own.shutdown()
    for (npu, bench), report in zip(zip(npu_ranks, bench_ranks, strict=True), reports, strict=True):
        log.info("%s against %s: %s", npu, bench, report.summary())
    return reports
