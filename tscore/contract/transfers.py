"""Values still on their way from a device: what a backend hands the dump instead of waiting.

A backend whose tensors live on an asynchronous device (a GPU, an NPU) starts a
copy to host memory and returns at once; the dump's writer thread waits for it.
The training thread never waits for the device, so a dump costs the step only
the work it launches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

StatsRows = Sequence[Sequence["float | None"]]


@dataclass(frozen=True)
class PendingArray:
    """A tensor's copy to host memory, started and not yet waited for (``ts_copy_to_host``).

    :param nbytes: the size of the host copy, counted against the dump's bounded queue
        while it waits for the disk, so pinned memory cannot grow without bound.
    :param result: waits for the copy to finish and returns it as a numpy array
        (bfloat16 and float8 as ``ml_dtypes`` arrays, as ``ts_to_numpy`` gives them);
        called once, on the writer's thread.
    :param release: called once the array is written (or could not be): the host memory it
        lies in may then take the next copy.
    """

    nbytes: int
    result: Callable[[], np.ndarray]
    release: Callable[[], None] = lambda: None


class StagedStats:
    """Many tensors' statistics on their way to the host in one copy (``ts_stats_to_host``).

    :param wait: waits for the copy and returns one row ``[max, min, mean, norm]`` per
        statistics object, in the order they were given; called at most once.
    """

    __slots__ = ("_failed", "_rows", "_wait")

    def __init__(self, wait: Callable[[], StatsRows]) -> None:
        """Hold the waiting function until a row is first asked for."""
        self._wait: Callable[[], StatsRows] | None = wait
        self._rows: StatsRows = ()
        self._failed: BaseException | None = None

    def row(self, index: int) -> Sequence[float | None]:
        """Return the ``index``-th object's four numbers, waiting for the copy the first time.

        :raises: what the copy raised, for every row of the batch (each record says so).
        """
        if self._wait is not None:
            wait, self._wait = self._wait, None
            try:
                self._rows = wait()
            except Exception as exc:
                self._failed = exc
        if self._failed is not None:
            raise RuntimeError(
                f"the statistics' copy from the device failed: {self._failed}"
            ) from self._failed
        return self._rows[index]


class StagedEntry(NamedTuple):
    """Where one record's statistics sit in a :class:`StagedStats` batch (a named tuple: one per entry)."""

    batch: StagedStats
    slot: int

    def values(self) -> Sequence[float | None]:
        """Return ``[max, min, mean, norm]``, waiting for the batch's copy if it is still running."""
        return self.batch.row(self.slot)
