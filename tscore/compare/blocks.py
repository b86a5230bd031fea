"""Comparing a block of file pairs: reading, judging, and the workers that share the work.

A comparison runs block by block (:data:`PLAN_PAIRS` pairs), so memory
stays bounded whatever the number of files. Planning a block reads each
file once: small files whole (compared in one batch, see
:func:`~tscore.compare.pair_stats.batch_stats`), big files by their
header only, cut into segments that are computed in chunks, in worker
processes when the data are big enough to pay for them. Judging turns the
statistics into report rows; a block's rows are rendered (CSV, JSON) where
they were computed. Folders of many blocks share the blocks among forked
worker processes, and their rows are written in order.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import functools
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tscore.compare import name_maps, segments
from tscore.compare.kernels import THREADED_KERNELS, reads, resolve_kernel
from tscore.compare.npy_layout import NpyLayout, NpyMissingError, NpyReadError, array_from_bytes, read_npy
from tscore.compare.pair_stats import PairStats, batch_stats
from tscore.compare.pairs import PairResult, PairStatus
from tscore.compare.report import RenderedRows, render_rows
from tscore.dtypes import neutral_dtype

# Below this many bytes (both sides) one process is faster than starting workers.
PARALLEL_MIN_BYTES = 64 << 20
# The same for threads, which the compiled kernels use: two ran 64 MB in 12.9 ms against 16.8 ms
# for one, and 16 MB in the same time as one (C kernel, 2 cores)
THREADS_MIN_BYTES = 32 << 20


# ---------------------------------------------------------------- judging


def judge(
    orig_name: str | None,
    target_name: str | None,
    orig_shape: tuple[int, ...],
    target_shape: tuple[int, ...],
    orig_dtype: str,
    target_dtype: str,
    stats: PairStats | None,
) -> PairResult:
    """Turn the statistics of a compared pair into a report row.

    ``stats`` is None when the shapes differ in size, so no value was compared.
    """
    row: dict[str, Any] = {
        "orig_name": orig_name,
        "target_name": target_name,
        "orig_shape": orig_shape,
        "target_shape": target_shape,
        "orig_dtype": orig_dtype,
        "target_dtype": target_dtype,
    }
    messages: list[str] = []
    dtypes_differ = neutral_dtype(orig_dtype) != neutral_dtype(target_dtype)
    if orig_shape != target_shape:
        status = PairStatus.SHAPE_MISMATCH
        if stats is None:
            messages.append(f"shapes differ: {orig_shape} vs {target_shape}; values not compared")
        else:
            messages.append(
                f"shapes differ ({orig_shape} vs {target_shape}) but both hold {stats.elements} elements; "
                "the metrics compare the flattened arrays"
            )
    elif stats is not None and stats.allclose:
        status = PairStatus.DTYPE_MISMATCH if dtypes_differ else PairStatus.OK
    else:
        status = PairStatus.DTYPE_MISMATCH if dtypes_differ else PairStatus.MISMATCH
    if dtypes_differ:
        messages.append(f"dtypes differ: {orig_dtype} vs {target_dtype}; values compared in float64")
    if stats is not None:
        # no position finite on both sides, yet every one the same infinity: the arrays are equal, as
        # TroubleShooter reads them (cosine 1, no difference); with a NaN nothing is defined, as there
        same = stats.finite == 0 and stats.elements > 0 and stats.allclose and not stats.orig_nan
        same = same and not stats.target_nan
        row.update(
            elements=stats.elements,
            allclose=stats.allclose and orig_shape == target_shape,
            ratio_close=stats.ratio_close,
            cosine=1.0 if same else stats.cosine,
            mean_abs_diff=0.0 if same else stats.mean_abs_diff,
            max_abs_diff=0.0 if same else stats.max_abs_diff,
            max_rel_diff=0.0 if same else stats.max_rel_diff,
            orig_nan=stats.orig_nan,
            orig_inf=stats.orig_inf,
            target_nan=stats.target_nan,
            target_inf=stats.target_inf,
        )
        if stats.finite < stats.elements and not same:  # the same infinities: a pair like any equal one
            messages.append(
                f"orig has {stats.orig_nan} NaN and {stats.orig_inf} inf, target {stats.target_nan} NaN "
                f"and {stats.target_inf} inf; statistics cover the {stats.finite} positions finite on "
                "both sides"
            )
    # Every value is already a Python number, tuple or string: no validation needed (a third of the cost).
    return PairResult.model_construct(status=status, message="; ".join(messages), **row)


# ---------------------------------------------------------------- planning

# Pairs read, planned and compared together: memory stays bounded whatever the folder size.
PLAN_PAIRS = 4096
# Files up to this size are read whole in one call and compared in batches (no memory map).
SMALL_FILE_BYTES = 1 << 16
# A batch holds at most this many bytes of small files (its float64 work buffers about 16 times that).
SMALL_BATCH_BYTES = 4 << 20


@dataclass
class Plan:
    """Rows already final, small pairs to compare in a batch, and the segments of big pairs, of one block."""

    names: list[tuple[str | None, str | None]]
    rows: dict[int, PairResult] = field(default_factory=dict)
    pending: dict[int, tuple[NpyLayout, NpyLayout, str, str]] = field(default_factory=dict)
    work: list[segments.Segment] = field(default_factory=list)
    small: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)

    @property
    def data_bytes(self) -> int:
        """Bytes of data, both sides, that the segments will read."""
        return sum((s.orig.dtype.itemsize + s.target.dtype.itemsize) * s.elements for s in self.work)


def _final(
    orig: str | None, target: str | None, status: PairStatus, message: str, **extra: Any
) -> PairResult:
    return PairResult(orig_name=orig, target_name=target, status=status, message=message, **extra)


def _source_dtype(layout: NpyLayout, listing: name_maps.FolderListing, name: str) -> str:
    """Return the dtype the tensor had before saving, when tscore_meta.jsonl recorded this very file."""
    stored = _dtype_name(layout.dtype)
    recorded = listing.meta.dtypes(name) if len(listing.meta) else None
    if recorded and recorded[0] == stored and recorded[1]:
        return recorded[1]  # the framework's spelling, for people
    return stored


@functools.lru_cache(maxsize=256)
def _dtype_name(dtype: np.dtype) -> str:
    """Return ``dtype.name``, which numpy computes anew on every access."""
    return dtype.name


def _logical_flat(layout: NpyLayout, data: bytes) -> np.ndarray:
    """Return a small file's elements in C order, whatever order the file stores them in."""
    flat = array_from_bytes(layout, data)
    if segments.memory_order(layout) == "F":
        return flat.reshape(layout.shape, order="F").ravel(order="C")
    return flat


def plan_block(
    names: list[tuple[str | None, str | None]],
    orig_listing: name_maps.FolderListing,
    target_listing: name_maps.FolderListing,
) -> Plan:
    """Read the files of a block once and sort its pairs: final rows, a small batch, big segments.

    Planning stops once the small files read hold :data:`SMALL_BATCH_BYTES`;
    ``plan.names`` are the pairs planned, the caller plans the rest next.
    """
    plan = Plan(names=names)
    listings = {"orig": orig_listing, "target": target_listing}
    held = 0
    for index, (orig, target) in enumerate(names):
        if held >= SMALL_BATCH_BYTES:
            plan.names = names[:index]
            break
        layouts: dict[str, NpyLayout] = {}
        data: dict[str, bytes | None] = {}
        problems: list[str] = []
        missing = False
        for side, name in (("orig", orig), ("target", target)):
            folder = listings[side].folder
            if name is None:
                missing = True
                problems.append(f"{orig if side == 'target' else target!r} has no partner in {side}_dir")
                continue
            try:
                layouts[side], data[side] = read_npy(f"{folder}{os.sep}{name}", SMALL_FILE_BYTES)
            except NpyMissingError:
                missing = True
                problems.append(f"{name!r} not found in {side}_dir {folder!r}")
            except NpyReadError as exc:
                problems.append(f"{side}: {exc}")
        if len(layouts) < 2:
            status = PairStatus.MISSING if missing else PairStatus.UNREADABLE
            extra: dict[str, Any] = {f"{side}_shape": lay.shape for side, lay in layouts.items()}
            named = {"orig": orig, "target": target}
            extra.update(
                {
                    f"{side}_dtype": _source_dtype(lay, listings[side], named[side] or "")
                    for side, lay in layouts.items()
                }
            )
            plan.rows[index] = _final(orig, target, status, "; ".join(problems), **extra)
            continue
        a, b = layouts["orig"], layouts["target"]
        dtypes = (_source_dtype(a, orig_listing, orig), _source_dtype(b, target_listing, target))  # type: ignore[arg-type]
        reshaped = a.shape != b.shape
        orders = {segments.memory_order(a), segments.memory_order(b)}
        if a.size != b.size or (reshaped and "F" in orders):
            plan.rows[index] = judge(orig, target, a.shape, b.shape, *dtypes, None)
            continue
        plan.pending[index] = (a, b, *dtypes)
        data_a, data_b = data["orig"], data["target"]
        if data_a is not None and data_b is not None:
            held += len(data_a) + len(data_b)
            if len(orders) == 1:
                plan.small.append((index, array_from_bytes(a, data_a), array_from_bytes(b, data_b)))
            else:
                plan.small.append((index, _logical_flat(a, data_a), _logical_flat(b, data_b)))
        else:
            plan.work.extend(segments.split_pair(index, a, b))
    return plan


# ---------------------------------------------------------------- running


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _executor(kernel: str, workers: int) -> cf.Executor:
    """Threads for the compiled kernels, which let go of the GIL; processes for the numpy kernel.

    Processes are started by fork, as TroubleShooter's are: ``spawn`` and
    ``forkserver`` workers import the user's ``__main__`` again, which
    re-runs a script that calls ``compare_npy_dir`` at top level without an
    ``if __name__ == "__main__":`` guard (the spec's examples do). The
    workers only read files and run numpy, which is safe after fork.
    """
    if kernel in THREADED_KERNELS:
        return cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tscore-compare")
    return _pool(workers)


def _parallel_allowed(kernel: str) -> bool:
    return kernel in THREADED_KERNELS or "fork" in multiprocessing.get_all_start_methods()


def _workers_for(num_processes: int | None, plan: Plan, kernel: str) -> int:
    if num_processes is not None:
        if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
            raise ValueError(f"num_processes must be an integer >= 1 or None, got {num_processes!r}")
        return num_processes if _parallel_allowed(kernel) else 1
    least = THREADS_MIN_BYTES if kernel in THREADED_KERNELS else PARALLEL_MIN_BYTES
    if plan.data_bytes < least or not _parallel_allowed(kernel):
        return 1
    return max(1, min(_cpu_count(), len(plan.work)))


def _run(
    tasks: list[list[segments.Segment]],
    workers: int,
    settings: tuple[float, float, bool, str],
    on_result: Callable[[int, PairStats | str], None],
) -> None:
    if workers == 1 or len(tasks) < 2:
        for task in tasks:
            for pair, result in segments.run_task(task, *settings):
                on_result(pair, result)
        return
    executor = _executor(settings[3], min(workers, len(tasks)))
    futures = {executor.submit(segments.run_task, task, *settings): task for task in tasks}
    try:
        for future in cf.as_completed(futures):
            try:
                results = future.result()
            except cf.process.BrokenProcessPool as exc:
                died = f"a worker process died while comparing ({exc})"
                results = [(segment.pair, died) for segment in futures[future]]
            for pair, result in results:
                on_result(pair, result)
    except BaseException:
        executor.shutdown(wait=False, cancel_futures=True)
        raise
    executor.shutdown(wait=True)


def _execute(
    plan: Plan,
    rtol: float,
    atol: float,
    equal_nan: bool,
    kernel: str,
    workers: int,
    progress: Callable[[int], object],
) -> None:
    """Compute every pending pair and put its row into ``plan.rows``."""
    if plan.small:
        indexes, orig_parts, target_parts = zip(*plan.small, strict=True)
        batch = batch_stats(list(orig_parts), list(target_parts), rtol, atol, equal_nan)
        for index, stats in zip(indexes, batch, strict=True):
            a, b, orig_dtype, target_dtype = plan.pending.pop(index)
            orig, target = plan.names[index]
            plan.rows[index] = judge(orig, target, a.shape, b.shape, orig_dtype, target_dtype, stats)
        progress(len(indexes))
        plan.small = []
    remaining = {index: 0 for index in plan.pending}
    for segment in plan.work:
        remaining[segment.pair] += 1
    totals = {index: PairStats() for index in plan.pending}
    errors: dict[int, str] = {}

    def on_result(pair: int, result: PairStats | str) -> None:
        if isinstance(result, str):
            errors[pair] = result
        else:
            totals[pair].merge(result)
        remaining[pair] -= 1
        if remaining[pair]:
            return
        orig, target = plan.names[pair]
        a, b, orig_dtype, target_dtype = plan.pending[pair]
        if pair in errors:
            plan.rows[pair] = _final(orig, target, PairStatus.UNREADABLE, errors[pair])
        else:
            plan.rows[pair] = judge(orig, target, a.shape, b.shape, orig_dtype, target_dtype, totals[pair])
        progress(1)

    _run(segments.pack(plan.work), workers, (rtol, atol, equal_nan, kernel), on_result)


# ---------------------------------------------------------------- blocks


@dataclass(frozen=True)
class Settings:
    """What every block of one comparison is compared with."""

    rtol: float
    atol: float
    equal_nan: bool
    kernel: str | None  # asked for: None, "auto", "c", "numpy" or "numba"
    num_processes: int | None
    want_json: bool
    keep_all: bool


def compare_block(
    names: list[tuple[str | None, str | None]],
    orig: name_maps.FolderListing,
    target: name_maps.FolderListing,
    settings: Settings,
    progress: Callable[[int], object],
    nested_workers: bool = True,
) -> tuple[RenderedRows, set[str]]:
    """Compare one block of pairs; return its rendered rows and the kernels that computed big pairs.

    :param nested_workers: whether big pairs may be shared among worker
        processes (not inside a worker that already has a block).
    """
    rows: list[PairResult] = []
    kernels: set[str] = set()
    while len(rows) < len(names):
        plan = plan_block(names[len(rows) :], orig, target)
        progress(len(plan.rows))
        kernel = resolve_kernel(settings.kernel, plan.data_bytes)
        if not all(reads(kernel, s.orig.dtype) and reads(kernel, s.target.dtype) for s in plan.work):
            kernel = "numpy"  # a dtype the compiled kernel does not read: numpy, in processes, not threads
        workers = _workers_for(settings.num_processes, plan, kernel) if nested_workers else 1
        _execute(plan, settings.rtol, settings.atol, settings.equal_nan, kernel, workers, progress)
        rows += [plan.rows[index] for index in range(len(plan.names))]
        if plan.work:
            kernels.add(kernel)
    return render_rows(rows, settings.want_json, settings.keep_all), kernels


_inherited: tuple[name_maps.FolderListing, name_maps.FolderListing, Settings] | None = None


def _block_in_worker(names: list[tuple[str | None, str | None]]) -> tuple[RenderedRows, set[str]]:
    """Compare a block in a forked worker, with the listings the parent held when it forked."""
    assert _inherited is not None, "a block worker must be forked by run_blocks"
    orig, target, settings = _inherited
    return compare_block(names, orig, target, settings, lambda n: None, nested_workers=False)


def _block_workers(blocks: int, num_processes: int | None) -> int:
    if blocks < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    wanted = num_processes if num_processes is not None else _cpu_count()
    return max(1, min(wanted, blocks))


def _died(names: list[tuple[str | None, str | None]], problem: str, settings: Settings) -> RenderedRows:
    rows = [_final(orig, target, PairStatus.UNREADABLE, problem) for orig, target in names]
    return render_rows(rows, settings.want_json, settings.keep_all)


def _pool(workers: int) -> cf.ProcessPoolExecutor:
    """Forked worker processes with one BLAS thread each (see :func:`_executor` for why fork)."""
    return cf.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=segments.one_blas_thread,
    )


def _isolated(
    names: list[tuple[str | None, str | None]], settings: Settings
) -> tuple[RenderedRows, set[str]]:
    """Compare one block in a worker of its own: if that worker dies, only this block's rows say so."""
    with _pool(1) as pool:
        try:
            return pool.submit(_block_in_worker, names).result()  # type: ignore[no-any-return]
        except cf.process.BrokenProcessPool as exc:
            return _died(names, f"a worker process died while comparing these files ({exc})", settings), set()


def run_blocks(
    pairs: Sequence[tuple[str | None, str | None]],
    orig: name_maps.FolderListing,
    target: name_maps.FolderListing,
    settings: Settings,
    progress: Callable[[int], object],
) -> Iterator[tuple[RenderedRows, set[str]]]:
    """Compare ``pairs`` block by block and yield each block's rows, in pair order.

    One block is compared in this process, its big pairs shared among
    workers as :func:`compare_block` decides. Several blocks are shared
    among forked worker processes (one per core, or ``num_processes``),
    each comparing whole blocks; at most two blocks per worker are in
    flight, so memory stays bounded. When a worker dies (a crash, the
    kernel's out-of-memory killer), the blocks that were in flight are
    compared again one by one, each in a worker of its own, so only the
    block that kills its worker becomes error rows; then a new pool goes on.
    """
    starts = range(0, len(pairs), PLAN_PAIRS)
    workers = _block_workers(len(starts), settings.num_processes)
    if workers == 1:
        for start in starts:
            yield compare_block(list(pairs[start : start + PLAN_PAIRS]), orig, target, settings, progress)
        return
    global _inherited
    _inherited = (orig, target, settings)
    try:
        position = 0
        while position < len(starts):
            in_flight: collections.deque[tuple[list[tuple[str | None, str | None]], cf.Future[Any]]] = (
                collections.deque()
            )
            broken = False
            executor = _pool(workers)
            try:
                while True:
                    while not broken and position < len(starts) and len(in_flight) < 2 * workers:
                        names = list(pairs[starts[position] : starts[position] + PLAN_PAIRS])
                        try:
                            in_flight.append((names, executor.submit(_block_in_worker, names)))
                        except cf.process.BrokenProcessPool:
                            broken = True
                            break
                        position += 1
                    if not in_flight or broken:
                        break
                    try:
                        result = in_flight[0][1].result()
                    except cf.process.BrokenProcessPool:
                        broken = True
                        break
                    names, _ = in_flight.popleft()
                    progress(len(names))
                    yield result
            except BaseException:
                executor.shutdown(wait=False, cancel_futures=True)
                raise
            executor.shutdown(wait=not broken, cancel_futures=True)
            for names, _ in in_flight:  # only after a worker died: again, one block per worker
                progress(len(names))
                yield _isolated(names, settings)
    finally:
        _inherited = None
