"""Histograms of the element-wise differences of a pair of saved tensors, for the report's failing rows.

A row's numbers say how far apart two tensors are; the histogram says how:
a few outliers, a spread that grows with the value, a sign flip. The two
``.npy`` files are read again (memory-mapped, a chunk at a time), so only
rows whose files are still in their folders get one; a file that cannot be
read gets none and the page says nothing false.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator, Sequence

import numpy as np

from tscore.compare.npy_layout import NpyReadError, map_flat, map_logical, read_npy_layout
from tscore.compare.pairs import PairResult
from tscore.html_report.page import Histogram

log = logging.getLogger(__name__)

BINS = 40
CHUNK = 1 << 20  # elements per chunk


def _differences(orig_path: str, target_path: str) -> Iterator[np.ndarray] | None:
    """Yield ``target - orig`` in float64 chunks, or return None when the two cannot be paired."""
    orig, target = read_npy_layout(orig_path), read_npy_layout(target_path)
    if orig.size != target.size or orig.size == 0:
        return None
    if orig.shape == target.shape and orig.fortran_order == target.fortran_order:
        a, b = map_flat(orig), map_flat(target)  # the same element at the same position
    elif orig.shape == target.shape:
        a, b = map_logical(orig).ravel(), map_logical(target).ravel()
    else:
        return None

    def chunks() -> Iterator[np.ndarray]:
        for start in range(0, orig.size, CHUNK):
            yield b[start : start + CHUNK].astype(np.float64) - a[start : start + CHUNK].astype(np.float64)

    return chunks()


def difference_histogram(orig_path: str, target_path: str, bins: int = BINS) -> Histogram | None:
    """Return the histogram of ``target - orig`` over their finite differences, or None when it has none.

    :raises NpyReadError: when a file is not a readable ``.npy``.
    """
    low, high, finite = math.inf, -math.inf, 0
    first = _differences(orig_path, target_path)
    if first is None:
        return None
    for diff in first:
        kept = diff[np.isfinite(diff)]
        if kept.size:
            low, high, finite = min(low, float(kept.min())), max(high, float(kept.max())), finite + kept.size
    if not finite:
        return None
    if low == high:
        low, high = low - 0.5, high + 0.5
    edges = np.linspace(low, high, bins + 1)
    counts = np.zeros(bins, dtype=np.int64)
    again = _differences(orig_path, target_path)
    assert again is not None  # the same files as the first pass
    for diff in again:
        counts += np.histogram(diff[np.isfinite(diff)], bins=edges)[0]
    return Histogram([float(e) for e in edges], [int(c) for c in counts], finite)


def pair_histograms(
    pairs: Sequence[PairResult], rows: Sequence[int], orig_dir: str, target_dir: str
) -> dict[int, Histogram]:
    """Return the histogram of each of ``rows`` whose two files can still be read, by row."""
    found: dict[int, Histogram] = {}
    for row in rows:
        pair = pairs[row]
        if pair.orig_name is None or pair.target_name is None:
            continue
        orig_path, target_path = (
            os.path.join(orig_dir, pair.orig_name),
            os.path.join(target_dir, pair.target_name),
        )
        try:
            histogram = difference_histogram(orig_path, target_path)
        except (NpyReadError, OSError, ValueError, TypeError) as exc:
            log.info("no histogram for %s / %s: %s", orig_path, target_path, exc)
            continue
        if histogram is not None:
            found[row] = histogram
    return found
