"""Comparing two folders of ``.npy`` files, or two arrays: ``compare_npy_dir`` and friends.

The work runs in three steps. Planning reads only file headers and turns
every pair into a final row (missing, unreadable, shapes that cannot be
compared) or into segments of work. Running maps the files and computes the
statistics in chunks, in worker processes when the data are big enough to
pay for them. Judging turns the merged statistics into report rows.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import multiprocessing
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from tscore.compare import name_maps, segments
from tscore.compare.kernels import kernel_name, logical_stats, resolve_kernel
from tscore.compare.npy_layout import NpyLayout, NpyReadError
from tscore.compare.pair_stats import PairStats
from tscore.compare.report import CompareReport, PairResult, PairStatus, print_report
from tscore.dtypes import neutral_dtype
from tscore.npy_files import writable_target

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]
MATCH_STRATEGIES = name_maps.MATCH_STRATEGIES

# Below this many bytes (both sides) one process is faster than starting workers.
PARALLEL_MIN_BYTES = 64 << 20


# ---------------------------------------------------------------- arguments


def _check_tolerances(rtol: float, atol: float, equal_nan: bool) -> None:
    for label, value in (("rtol", rtol), ("atol", atol)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise TypeError(f"{label} must be a number, got {type(value).__name__}")
        if not value >= 0:
            raise ValueError(f"{label} must be a number >= 0, got {value}")
    if not isinstance(equal_nan, (bool, np.bool_)):
        raise TypeError(f"equal_nan must be True or False, got {type(equal_nan).__name__}")


def _check_output_file(output_file: PathLike | None) -> str | None:
    if output_file is None:
        return None
    return writable_target(output_file, "output_file")


def _check_name_map(name_map_list: Iterable[Any]) -> name_maps.NameMap:
    pairs: name_maps.NameMap = []
    for index, item in enumerate(name_map_list):
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise TypeError(f"name_map_list[{index}] must be a pair (orig_file, target_file), got {item!r}")
        orig, target = (os.fspath(n) if n is not None else None for n in item)
        if orig is None and target is None:
            raise ValueError(f"name_map_list[{index}] names no file on either side")
        pairs.append((orig, target))
    return pairs


# ---------------------------------------------------------------- dtypes


def _source_dtype(layout: NpyLayout, meta: Mapping[str, Mapping[str, Any]]) -> str:
    """Return the dtype the tensor had before saving, when tscore_meta.jsonl recorded this very file."""
    record = meta.get(os.path.basename(layout.path))
    if record and record.get("stored_dtype") == layout.dtype.name:
        shown = record.get("native_dtype") or record.get("dtype")  # the framework's spelling, for people
        if isinstance(shown, str):
            return shown
    return layout.dtype.name


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
        row.update(
            elements=stats.elements,
            allclose=stats.allclose and orig_shape == target_shape,
            ratio_close=stats.ratio_close,
            cosine=stats.cosine,
            mean_abs_diff=stats.mean_abs_diff,
            max_abs_diff=stats.max_abs_diff,
            max_rel_diff=stats.max_rel_diff,
            orig_nan=stats.orig_nan,
            orig_inf=stats.orig_inf,
            target_nan=stats.target_nan,
            target_inf=stats.target_inf,
        )
        if stats.finite < stats.elements:
            messages.append(
                f"orig has {stats.orig_nan} NaN and {stats.orig_inf} inf, target {stats.target_nan} NaN "
                f"and {stats.target_inf} inf; statistics cover the {stats.finite} positions finite on "
                "both sides"
            )
    return PairResult(status=status, message="; ".join(messages), **row)


def compare_arrays(
    orig: Any,
    target: Any,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    equal_nan: bool = False,
    *,
    orig_name: str | None = "orig",
    target_name: str | None = "target",
    kernel: str | None = None,
) -> PairResult:
    """Compare two in-memory arrays (numpy, ``ml_dtypes`` or anything ``np.asarray`` takes).

    The same metrics and row as :func:`compare_npy_dir` gives for a file pair.
    Tensors of a framework should go through ``ts.to_numpy`` first.
    """
    _check_tolerances(rtol, atol, equal_nan)
    a, b = np.asarray(orig), np.asarray(target)
    for label, array in (("orig", a), ("target", b)):
        if array.dtype.kind not in "biuf" and array.dtype.kind != "V":
            raise TypeError(f"compare_arrays: {label} has dtype {array.dtype}, not numbers")
    chosen = resolve_kernel(kernel, a.nbytes + b.nbytes)
    stats: PairStats | None
    if a.shape == b.shape:
        stats = logical_stats(a, b, rtol, atol, equal_nan, chosen)
    elif a.size == b.size:
        stats = logical_stats(a.reshape(-1), b.reshape(-1), rtol, atol, equal_nan, chosen)
    else:
        stats = None
    return judge(orig_name, target_name, a.shape, b.shape, a.dtype.name, b.dtype.name, stats)


# ---------------------------------------------------------------- planning


@dataclass
class _Plan:
    """Rows already final, and the segments still to compute, for every pair."""

    rows: dict[int, PairResult] = field(default_factory=dict)
    pending: dict[int, tuple[NpyLayout, NpyLayout, str, str]] = field(default_factory=dict)
    work: list[segments.Segment] = field(default_factory=list)
    names: list[tuple[str | None, str | None]] = field(default_factory=list)

    @property
    def data_bytes(self) -> int:
        """Bytes of data, both sides, that the segments will read."""
        return sum((s.orig.dtype.itemsize + s.target.dtype.itemsize) * s.elements for s in self.work)


def _final(
    orig: str | None, target: str | None, status: PairStatus, message: str, **extra: Any
) -> PairResult:
    return PairResult(orig_name=orig, target_name=target, status=status, message=message, **extra)


def _plan(
    orig_listing: name_maps.FolderListing, target_listing: name_maps.FolderListing, pairs: name_maps.NameMap
) -> _Plan:
    plan = _Plan(names=list(pairs))
    listings = {"orig": orig_listing, "target": target_listing}
    metas = {side: listing.meta for side, listing in listings.items()}
    for index, (orig, target) in enumerate(pairs):
        layouts: dict[str, NpyLayout] = {}
        problems: list[str] = []
        missing = False
        for side, name in (("orig", orig), ("target", target)):
            folder = listings[side].folder
            if name is None or not os.path.isfile(os.path.join(folder, name)):
                missing = True
                if name is None:
                    problems.append(f"{orig if side == 'target' else target!r} has no partner in {side}_dir")
                else:
                    problems.append(f"{name!r} not found in {side}_dir {folder!r}")
                continue
            try:
                layouts[side] = listings[side].layout(name)
            except NpyReadError as exc:
                problems.append(f"{side}: {exc}")
        if len(layouts) < 2:
            status = PairStatus.MISSING if missing else PairStatus.UNREADABLE
            extra: dict[str, Any] = {f"{side}_shape": lay.shape for side, lay in layouts.items()}
            extra.update({f"{side}_dtype": _source_dtype(lay, metas[side]) for side, lay in layouts.items()})
            plan.rows[index] = _final(orig, target, status, "; ".join(problems), **extra)
            continue
        a, b = layouts["orig"], layouts["target"]
        dtypes = (_source_dtype(a, metas["orig"]), _source_dtype(b, metas["target"]))
        reshaped = a.shape != b.shape
        if a.size != b.size or (reshaped and "F" in {segments.memory_order(a), segments.memory_order(b)}):
            plan.rows[index] = judge(orig, target, a.shape, b.shape, *dtypes, None)
            continue
        plan.pending[index] = (a, b, *dtypes)
        plan.work.extend(segments.split_pair(index, a, b))
    return plan


# ---------------------------------------------------------------- running


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _executor(kernel: str, workers: int) -> cf.Executor:
    """Threads for the numba kernel, which releases the GIL; processes for the numpy kernel.

    Processes are started by fork, as TroubleShooter's are: ``spawn`` and
    ``forkserver`` workers import the user's ``__main__`` again, which
    re-runs a script that calls ``compare_npy_dir`` at top level without an
    ``if __name__ == "__main__":`` guard (the spec's examples do). The
    workers only read files and run numpy, which is safe after fork.
    """
    if kernel == "numba":
        return cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tscore-compare")
    return cf.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=segments.one_blas_thread,
    )


def _parallel_allowed(kernel: str) -> bool:
    return kernel == "numba" or "fork" in multiprocessing.get_all_start_methods()


def _workers_for(num_processes: int | None, plan: _Plan, kernel: str) -> int:
    if num_processes is not None:
        if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
            raise ValueError(f"num_processes must be an integer >= 1 or None, got {num_processes!r}")
        return num_processes if _parallel_allowed(kernel) else 1
    if plan.data_bytes < PARALLEL_MIN_BYTES or not _parallel_allowed(kernel):
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
    plan: _Plan, rtol: float, atol: float, equal_nan: bool, kernel: str, workers: int, bar: tqdm
) -> None:
    """Compute every pending pair and put its row into ``plan.rows``."""
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
        bar.update(1)

    _run(segments.pack(plan.work), workers, (rtol, atol, equal_nan, kernel), on_result)


# ---------------------------------------------------------------- public API


def _pairs_for(
    match: str, orig: name_maps.FolderListing, target: name_maps.FolderListing
) -> name_maps.NameMap:
    if match == "name":
        return name_maps.map_by_name(orig.npy, target.npy)
    if match == "number":
        return name_maps.map_by_number(orig.npy, target.npy)
    if match == "shape":
        return name_maps.map_by_shape(orig, target)
    raise ValueError(f"match must be one of {', '.join(MATCH_STRATEGIES)}, got {match!r}")


def compare_npy_dir(
    orig_dir: PathLike,
    target_dir: PathLike,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    equal_nan: bool = False,
    *,
    name_map_list: Sequence[tuple[str | None, str | None]] | None = None,
    compare_shape: bool = False,
    output_file: PathLike | None = None,
    num_processes: int | None = None,
    print_level: int = 1,
    match: str = "name",
    kernel: str | None = None,
) -> CompareReport:
    """Compare the ``.npy`` files of two folders pair by pair and return the report.

    Files pair by identical name unless ``name_map_list`` (pairs of file
    names, None for no partner; see the ``get_name_map_list_by_*``
    functions) or ``match`` (``"name"``, ``"number"``, ``"shape"``) says
    otherwise. Each pair gets ``numpy.allclose(orig, target, rtol, atol,
    equal_nan)``, the share of elements within tolerance, cosine
    similarity, mean and max absolute difference, max relative difference
    and NaN/inf counts, all computed in float64 over memory-mapped chunks.

    ``print_level`` 0 prints nothing, 1 the table of every pair, 2 only the
    pairs that failed; ``compare_shape`` adds the shape columns. A progress
    bar shows on a terminal. ``output_file`` ending in ``.json`` gets JSON,
    any other name CSV. ``num_processes`` (default: the cores, when the data
    are big enough) sets the workers; ``kernel`` picks ``"numpy"`` or
    ``"numba"`` (default: whichever finishes first, see :mod:`tscore.compare.kernels`).

    :raises TargetPathError: a folder missing or without ``.npy`` files, or
        ``output_file`` in a missing folder, before any work.
    :raises TypeError, ValueError: for bad tolerances or ``name_map_list`` items.
    """
    _check_tolerances(rtol, atol, equal_nan)
    if print_level not in (0, 1, 2):
        raise ValueError(f"print_level must be 0, 1 or 2, got {print_level!r}")
    out_path = _check_output_file(output_file)
    orig, target = name_maps.list_folders(orig_dir, target_dir)
    kernel_name(kernel)  # a bad name fails here, before any work
    if name_map_list is not None:
        pairs, match = _check_name_map(name_map_list), "custom"
    else:
        pairs = _pairs_for(match, orig, target)
    logger.info("comparing orig dir %s with target dir %s (%d pairs)", orig.folder, target.folder, len(pairs))

    plan = _plan(orig, target, pairs)
    chosen_kernel = resolve_kernel(kernel, plan.data_bytes)
    workers = _workers_for(num_processes, plan, chosen_kernel)
    with tqdm(total=len(pairs), unit="pair", desc="compare", disable=None if print_level else True) as bar:
        bar.update(len(plan.rows))
        _execute(plan, float(rtol), float(atol), bool(equal_nan), chosen_kernel, workers, bar)

    report = CompareReport(
        orig_dir=orig.folder,
        target_dir=target.folder,
        rtol=float(rtol),
        atol=float(atol),
        equal_nan=bool(equal_nan),
        match=match,
        kernel=chosen_kernel,
        pairs=[plan.rows[i] for i in range(len(pairs))],
        ignored_files={"orig": orig.ignored, "target": target.ignored},
        skipped_files={side: lst.debris for side, lst in (("orig", orig), ("target", target)) if lst.debris},
    )
    if print_level:
        print_report(report.table(compare_shape=compare_shape, only_failed=print_level == 2))
    if out_path:
        report.write(out_path)
        logger.info("wrote the comparison to %s", out_path)
    return report


def compare_grads_dir(
    orig_dir: PathLike,
    target_dir: PathLike,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    equal_nan: bool = False,
    *,
    name_map_list: Sequence[tuple[str | None, str | None]] | None = None,
    compare_shape: bool = True,
    output_file: PathLike | None = None,
    num_processes: int | None = None,
    print_level: int = 1,
    kernel: str | None = None,
) -> CompareReport:
    """Compare two folders of saved gradients, pairing files by the edit distance of their shapes.

    MindSpore gradients carry no parameter names, and the two networks may
    not have the same parameters; files are ordered by number and aligned by
    shape (see :func:`get_name_map_list_by_shape_edit_distance`), and the
    shapes are shown. Otherwise as :func:`compare_npy_dir`.
    """
    return compare_npy_dir(
        orig_dir,
        target_dir,
        rtol,
        atol,
        equal_nan,
        name_map_list=name_map_list,
        compare_shape=compare_shape,
        output_file=output_file,
        num_processes=num_processes,
        print_level=print_level,
        match="shape",
        kernel=kernel,
    )
