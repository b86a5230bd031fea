"""Comparing the dumps of many ranks: ptdbg's ``compare_distributed``.

It pairs rank folders and compares each pair on a ``concurrent.futures``
executor: local threads by default, or a Dask cluster's
(``client=dask.distributed.Client(...)``), where each worker reads its rank's
tensors itself; only the paths go out and the reports come back.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import re
import time
from typing import Any

from tscore.dump_compare.calls import DumpReadError
from tscore.dump_compare.compare import compare_dumps
from tscore.dump_compare.report import DumpCompareReport
from tscore.errors import TargetPathError
from tscore.npy_files import write_atomic

log = logging.getLogger(__name__)

_RANK = re.compile(r"^rank(\d+)$")
_PROC = re.compile(r"^proc\d+$")  # msprobe's folder for a process with no torch.distributed rank


def _ranks_in(folder: str) -> list[str]:
    names = [d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d))]
    ranks = sorted((d for d in names if _RANK.match(d)), key=lambda d: int(d[4:]))
    if not ranks:
        ranks = (
            [d for d in names if _PROC.match(d)][:1] if len([d for d in names if _PROC.match(d)]) == 1 else []
        )
    return [os.path.join(folder, d) for d in ranks]


def rank_folders(path: str, role: str) -> list[str]:
    """List a dump's rank folders: ``rank{n}`` by number (or msprobe's one ``proc{pid}``), step by step.

    The folders may sit directly under ``path`` (ptdbg) or under its ``step{k}`` folders
    (tscore, msprobe): every step's, in step order.

    :raises DumpReadError: naming the path when it holds no rank folder.
    """
    if not os.path.isdir(path):
        raise DumpReadError(f"{role}: {path!r} is not a folder")
    found = _ranks_in(path)
    if found:
        return found
    steps = sorted((d for d in os.listdir(path) if re.fullmatch(r"step\d+", d)), key=lambda d: int(d[4:]))
    for step in steps:
        found += _ranks_in(os.path.join(path, step))
    if not found:
        raise DumpReadError(f"{role}: no rank folder (rank0, rank1 ... or msprobe's proc{{pid}}) in {path!r}")
    return found


def _label(folder: str, steps: bool) -> str:
    """``rank0``; ``step1_rank0`` when the dump holds several steps."""
    name = os.path.basename(folder)
    return f"{os.path.basename(os.path.dirname(folder))}_{name}" if steps else name


def _compare_rank(
    npu: str, bench: str, output_path: str, suffix: str, options: dict[str, Any]
) -> dict[str, Any]:
    """Compare one pair of rank folders where this runs (a thread, a process, a Dask worker)."""
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

    One ``compare_result_rank{a}-rank{b}_{timestamp}.csv`` (and advisor) per pair, and
    ``compare_summary_{timestamp}.csv`` (a line per pair) in ``output_path``. Pairs run on
    ``executor`` (any ``concurrent.futures.Executor``: a process pool, ``client.get_executor()``),
    on a ``dask.distributed.Client`` given as ``client`` (its workers write to ``output_path``:
    a folder they all see), or else on threads of this process. A pair that fails is a line of
    the summary saying why; the other pairs go on.

    :param kwargs: ``compare_dumps``'s options; ptdbg's ``shape_flag``, ``fuzzy_match`` and
        ``stack_mode`` are accepted, ``suffix`` comes before each pair's.
    :raises DumpReadError: when the two dumps have different numbers of ranks, naming both.
    """
    for ignored in ("shape_flag", "fuzzy_match", "auto_analyze_all"):
        kwargs.pop(ignored, None)
    user_suffix = str(kwargs.pop("suffix", ""))
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
    if executor is None:  # threads: the compare kernels and file reads release the GIL; any script works
        own = executor = cf.ThreadPoolExecutor(max_workers=max(1, min(len(npu_ranks), os.cpu_count() or 1)))
    pairs = list(zip(npu_ranks, bench_ranks, strict=True))
    steps = len({os.path.dirname(f) for f in npu_ranks}) > 1
    reports: list[DumpCompareReport] = []
    summary: list[list[Any]] = []
    try:
        futures = [
            executor.submit(
                _compare_rank,
                npu,
                bench,
                out,
                f"{user_suffix}_{_label(npu, steps)}-{_label(bench, steps)}",
                dict(kwargs),
            )
            for npu, bench in pairs
        ]
        for (npu, bench), future in zip(pairs, futures, strict=True):
            try:
                report = DumpCompareReport.model_validate(future.result())
            except Exception as exc:  # one rank's bad dump is its summary line; the others go on
                log.warning("compare_distributed: %s against %s failed: %s", npu, bench, exc)
                summary.append([npu, bench, "", "", "", "", f"{type(exc).__name__}: {exc}"])
                continue
            reports.append(report)
            first = report.first_error
            summary.append(
                [
                    npu,
                    bench,
                    "yes" if report.passed else "no",
                    first.label if first else "",
                    first.where or "" if first else "",
                    ";".join(report.files),
                    "",
                ]
            )
            log.info("%s against %s: %s", npu, bench, report.summary())
    finally:
        if own is not None:
            own.shutdown()
    _write_summary(out, summary)
    if not reports and summary:
        raise DumpReadError(f"compare_distributed: every pair failed; the first: {summary[0][-1]}")
    return reports


def _write_summary(folder: str, lines: list[list[Any]]) -> None:
    """Write ``compare_summary_{timestamp}.csv``: each pair of ranks, whether it agrees, its first error."""
    import csv
    import io

    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["NPU", "Bench", "Agrees", "First own error", "Where", "Result files", "Error"])
    writer.writerows(lines)
    data = text.getvalue().encode("utf-8")
    path = os.path.join(folder, f"compare_summary_{time.strftime('%Y%m%d%H%M%S')}.csv")
    write_atomic(path, lambda stream: stream.write(data))
