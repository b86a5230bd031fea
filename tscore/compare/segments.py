"""Units of compare work that can run in any process: a range of one file pair.

A big pair is cut into several segments so that two cores share it; small
pairs are packed several to a task so that process hand-offs stay few. A
segment names files and byte positions only, never data: a worker maps the
files itself, so nothing large crosses a process boundary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tscore.compare.kernels import flat_stats, logical_stats
from tscore.compare.npy_layout import NpyLayout, map_flat, map_logical
from tscore.compare.pair_stats import PairStats

SEGMENT_ELEMENTS = 1 << 23  # 32 MB of float32 per side: big pairs split across workers
TASK_ELEMENTS = 1 << 21  # small pairs are packed into tasks of at least this many elements


@dataclass(frozen=True)
class Segment:
    """Elements ``start:stop`` (in memory order) of one pair, or the whole pair when ``logical``."""

    pair: int
    orig: NpyLayout
    target: NpyLayout
    start: int
    stop: int
    logical: bool = False

    @property
    def elements(self) -> int:
        """Elements this segment covers."""
        return self.stop - self.start


def memory_order(layout: NpyLayout) -> str:
    """Return ``"F"`` for a Fortran-ordered file with two or more axes longer than 1, else ``"C"``."""
    if layout.fortran_order and sum(n > 1 for n in layout.shape) > 1:
        return "F"
    return "C"


def split_pair(pair: int, orig: NpyLayout, target: NpyLayout) -> list[Segment]:
    """Cut one pair of equally long files into segments.

    Files stored in the same order are compared in memory order, in ranges
    of :data:`SEGMENT_ELEMENTS`; a C file against a Fortran file is one
    logical segment, walked block by block.
    """
    if memory_order(orig) != memory_order(target):
        return [Segment(pair, orig, target, 0, orig.size, logical=True)]
    size = orig.size
    bounds = list(range(0, size, SEGMENT_ELEMENTS)) or [0]
    return [Segment(pair, orig, target, start, min(size, start + SEGMENT_ELEMENTS)) for start in bounds]


def pack(segments: Iterable[Segment]) -> list[list[Segment]]:
    """Group segments into tasks of at least :data:`TASK_ELEMENTS` elements, biggest tasks first."""
    tasks: list[list[Segment]] = []
    small: list[Segment] = []
    small_total = 0
    for segment in segments:
        if segment.elements >= TASK_ELEMENTS:
            tasks.append([segment])
            continue
        small.append(segment)
        small_total += segment.elements
        if small_total >= TASK_ELEMENTS:
            tasks.append(small)
            small, small_total = [], 0
    if small:
        tasks.append(small)
    tasks.sort(key=lambda task: -sum(s.elements for s in task))
    return tasks


def one_blas_thread() -> None:
    """Limit BLAS to one thread in a worker process.

    The numpy kernel's dot products go through BLAS, which starts a thread
    per core of its own: two worker processes would then run four threads on
    two cores and go no faster than one process.
    """
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    threadpool_limits(limits=1, user_api="blas")


def _segment_stats(segment: Segment, rtol: float, atol: float, equal_nan: bool, kernel: str) -> PairStats:
    if segment.logical:
        return logical_stats(
            map_logical(segment.orig), map_logical(segment.target), rtol, atol, equal_nan, kernel
        )
    a = map_flat(segment.orig)[segment.start : segment.stop]
    b = map_flat(segment.target)[segment.start : segment.stop]
    return flat_stats(a, b, rtol, atol, equal_nan, kernel)


def run_task(
    task: list[Segment], rtol: float, atol: float, equal_nan: bool, kernel: str
) -> list[tuple[int, PairStats | str]]:
    """Compare every segment of ``task``; a segment that fails yields its error message instead."""
    results: list[tuple[int, PairStats | str]] = []
    for segment in task:
        try:
            results.append((segment.pair, _segment_stats(segment, rtol, atol, equal_nan, kernel)))
        except (OSError, ValueError) as exc:
            results.append((segment.pair, f"reading failed: {exc}"))
    return results
