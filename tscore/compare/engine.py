"""Comparing two folders of ``.npy`` files, or two arrays: ``compare_npy_dir`` and friends.

Listing holds the names of both folders compactly; pairing gives the pairs
as index arrays. The pairs are then compared block by block
(:mod:`tscore.compare.blocks`: reading, batched or chunked statistics,
judging, rendering, in worker processes when there is enough work), and
the rows stream to the output file and the report
(:class:`~tscore.compare.report.RowStream`), so time per pair and memory
stay flat from ten files to a million.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

from tscore.compare import blocks, name_maps
from tscore.compare.kernels import kernel_name, logical_stats, resolve_kernel
from tscore.compare.pair_stats import PairStats
from tscore.compare.pairs import PairResult
from tscore.compare.report import CompareReport, RowStream, print_report
from tscore.npy_files import writable_target

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]
MATCH_STRATEGIES = name_maps.MATCH_STRATEGIES


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


# ---------------------------------------------------------------- arrays


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
    return blocks.judge(orig_name, target_name, a.shape, b.shape, a.dtype.name, b.dtype.name, stats)


# ---------------------------------------------------------------- public API


def _pairs_for(
    match: str, orig: name_maps.FolderListing, target: name_maps.FolderListing
) -> Sequence[tuple[str | None, str | None]]:
    if match == "name":
        return name_maps.map_by_name_then_key(orig.npy, target.npy)
    if match == "number":
        return name_maps.map_by_number(orig.npy, target.npy)
    if match == "shape":
        return name_maps.map_by_shape(orig, target)
    if match == "key":
        return name_maps.map_by_key(orig.npy, target.npy)
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

    Files pair by identical name, then those left on both sides by the name and key they saved
    (a TroubleShooter 1.0.18 folder against a tscore one, ids shifted by a save one run made;
    ``report.paired_by_key`` counts them), unless ``name_map_list`` (pairs of file
    names, None for no partner; see the ``get_name_map_list_by_*``
    functions) or ``match`` (``"name"``, ``"number"``, ``"shape"``, ``"key"``) says
    otherwise. Each pair gets ``numpy.allclose(orig, target, rtol, atol,
    equal_nan)``, the share of elements within tolerance, cosine
    similarity, mean and max absolute difference, max relative difference
    and NaN/inf counts, all computed in float64 (small files read whole and
    compared in batches, big ones memory-mapped and compared in chunks).

    ``print_level`` 0 prints nothing, 1 the table of every pair (of the
    failing ones kept, beyond :data:`~tscore.compare.report.KEEP_ALL_ROWS`
    pairs), 2 only the pairs that failed; ``compare_shape`` adds the shape
    columns. A progress bar shows on a terminal. ``output_file`` ending in
    ``.json`` gets JSON, any other name CSV, written as the rows come. The
    folders may be parents of ``rank{r}`` folders. ``num_processes``
    (default: the cores, when there is enough work) sets the workers; ``kernel`` picks ``"c"``,
    ``"numpy"`` or ``"numba"`` (default: whichever finishes first, see :mod:`tscore.compare.kernels`).

    :raises TargetPathError: a folder missing or without ``.npy`` files, or
        ``output_file`` in a missing folder, before any work.
    :raises TypeError: for bad tolerances or ``name_map_list`` items.
    :raises ValueError: for bad tolerances or ``name_map_list`` items.
    """
    _check_tolerances(rtol, atol, equal_nan)
    if print_level not in (0, 1, 2):
        raise ValueError(f"print_level must be 0, 1 or 2, got {print_level!r}")
    out_path = _check_output_file(output_file)
    if num_processes is not None and (
        isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1
    ):
        raise ValueError(f"num_processes must be an integer >= 1 or None, got {num_processes!r}")
    orig, target = name_maps.list_folders(orig_dir, target_dir)
    kernel_name(kernel)  # a bad name fails here, before any work
    pairs: Sequence[tuple[str | None, str | None]]
    if name_map_list is not None:
        pairs, match = _check_name_map(name_map_list), "custom"
    else:
        pairs = _pairs_for(match, orig, target)
    logger.info("comparing orig dir %s with target dir %s (%d pairs)", orig.folder, target.folder, len(pairs))

    stream = RowStream(len(pairs), out_path)
    settings = blocks.Settings(
        float(rtol), float(atol), bool(equal_nan), kernel, num_processes, stream.want_json, stream.keep_all
    )
    kernels: set[str] = set()
    try:
        quiet = None if print_level else True
        with tqdm(total=len(pairs), unit="pair", desc="compare", disable=quiet) as bar:
            for rendered, used in blocks.run_blocks(pairs, orig, target, settings, bar.update):
                stream.add(rendered)
                kernels |= used
    except BaseException:
        stream.abort()
        raise
    report = CompareReport(
        orig_dir=orig.folder,
        target_dir=target.folder,
        rtol=float(rtol),
        atol=float(atol),
        equal_nan=bool(equal_nan),
        match=match,
        kernel=next((name for name in ("c", "numba") if name in kernels), "numpy"),
        total=len(pairs),
        counts=stream.counts,
        pairs=stream.kept,
        pairs_complete=stream.keep_all,
        ignored_files={"orig": orig.ignored, "target": target.ignored},
        skipped_files={side: lst.debris for side, lst in (("orig", orig), ("target", target)) if lst.debris},
        paired_by_key=getattr(pairs, "by_key", 0),
    )
    stream.finish(report)
    if print_level:
        print_report(report.table(compare_shape=compare_shape, only_failed=print_level == 2))
    if out_path:
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


def compare_list_dir(orig_dir: PathLike, target_dir: PathLike, *args: Any, **kwargs: Any) -> CompareReport:
    """Compare two folders of lists saved by ``ts.save``, element by element in save order (TroubleShooter's).

    Files pair in the order ``ts.save`` numbered them (its id, then the element's index), so a
    folder written in spec 003's layout (``2_l_0.npy``, ``2_l_1.npy``) pairs with one written by
    TroubleShooter 1.0.18 (``1_l.0.npy``, ``2_l.1.npy``). The arguments are
    :func:`_compare_saved`'s, TroubleShooter's; otherwise as :func:`compare_npy_dir`.
    """
    return _compare_saved("number", orig_dir, target_dir, *args, **kwargs)


def compare_dict_dir(orig_dir: PathLike, target_dir: PathLike, *args: Any, **kwargs: Any) -> CompareReport:
    """Compare two folders of dicts saved by ``ts.save``, key by key (TroubleShooter's).

    Files pair by the name and key they saved, whatever their ids (:func:`name_maps.saved_key`):
    ``3_d_x.npy`` (spec 003) pairs with ``4_d.x.npy`` (TroubleShooter 1.0.18), and a dict saved
    after one extra tensor in one run still pairs key by key. The arguments are
    :func:`_compare_saved`'s, TroubleShooter's; otherwise as :func:`compare_npy_dir`.
    """
    return _compare_saved("key", orig_dir, target_dir, *args, **kwargs)


def _compare_saved(
    match: str,
    orig_dir: PathLike,
    target_dir: PathLike,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    equal_nan: bool = False,
    compare_shape: bool = False,
    output_file: PathLike | None = None,
    num_processes: int | None = None,
    *,
    print_level: int = 1,
    kernel: str | None = None,
) -> CompareReport:
    """Run :func:`compare_npy_dir` with ``match``, taking TroubleShooter's positional arguments."""
    return compare_npy_dir(
        orig_dir,
        target_dir,
        rtol,
        atol,
        equal_nan,
        compare_shape=compare_shape,
        output_file=output_file,
        num_processes=num_processes,
        print_level=print_level,
        match=match,
        kernel=kernel,
    )
