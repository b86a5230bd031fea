"""Statistics worked out inside MindSpore's PyNative pipeline: no wait for the pipeline per dumped tensor.

PyNative runs operators on a thread of its own, behind the Python that launches
them. ``Tensor.asnumpy()`` waits until that thread has run everything launched
so far (about 1.5 ms a wait on this CPU, whatever the tensor), so reading each
dumped tensor at once made a small ResNet step 1.8x as long. Here the dump
launches one more operator per tensor instead, a ``pyfunc`` ``Custom``
operator: the pipeline runs it in its turn, right after the operator that made
the tensor and before any later one can change it, and it hands the tensor's
host memory to :func:`_summarise`, which works out max, min, mean and norm
(:func:`tscore.plugin_api.array_stats`) into a :class:`PendingStats`. The
dump's writer thread waits for those (their ``tolist()``); the training
thread never does.

The pipeline runs the operators in the order they were launched, so each run
of :func:`_summarise` takes the oldest pending statistics; the shape is
checked, and a mismatch is an error in that record, never numbers of another
tensor. :func:`_summarise` never raises: an exception there would surface in
the user's next ``asnumpy()``. When the dump stops, :meth:`PipelineStats.drain`
waits for the pipeline once and marks whatever is still pending as an error.

Launching is not free either: a ``Custom`` operator goes through PyNative's
slower path for Primitives (0.25-0.85 ms a launch here), while a read at
once waits only for what is still queued, which is little when the
operators are small. A small transformer encoder's step lost more to the
launches (2.2x) than to the reads (1.8x); a small ResNet's, whose
convolutions keep the pipeline busy, gained (1.25x against 1.65x). So
:class:`PipelineStats` times the reads as the dump runs: the first
:data:`SAMPLE` + 1 tensors of each step are read at once, and the rest of
the step is launched only when those reads waited longer, on average, than
:data:`LAUNCH_SECONDS` (a small ResNet's waited about 3 ms, an encoder's
0.3-0.7 ms).
"""

from __future__ import annotations

import collections
import functools
import logging
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tscore.plugin_api import array_stats

log = logging.getLogger(__name__)

WAIT_SECONDS = 600.0  # the writer's longest wait for one tensor's statistics before it records an error
SAMPLE = 12  # tensors read at once at the start of each dumped step (after the first), timed
# reads that wait longer than this on average are launched instead: a launch costs 0.25-0.85 ms here
# (timing launches themselves says little: once the pipeline's queue is full, a launch waits for it)
LAUNCH_SECONDS = 1e-3

_pending: collections.deque[PendingStats] = collections.deque()  # launched, not yet run, oldest first
_OUTPUT = np.zeros((1,), np.float32)  # what the operator hands back (nobody reads it)


class PendingStats:
    """The four numbers of one tensor, filled in by the pipeline's thread."""

    __slots__ = ("done", "error", "shape", "values")

    def __init__(self, shape: tuple[int, ...]) -> None:
        """Expect a tensor of ``shape``; nothing is known yet."""
        self.shape = shape
        self.values: tuple[float, float, float, float] | None = None
        self.error: str | None = None
        self.done = threading.Event()

    def tolist(self, timeout: float = WAIT_SECONDS) -> list[float | None]:
        """Wait for ``[max, min, mean, norm]``; raise RuntimeError (the record's error) when there are none.

        Called by the dump's writer thread (``finish_record``), as it calls ``tolist()`` on a
        framework's tensor of statistics.
        """
        if not self.done.wait(timeout):
            raise RuntimeError(f"MindSpore's pipeline did not run the statistics within {timeout:g} s")
        if self.error is not None:
            raise RuntimeError(self.error)
        return [None] * 4 if self.values is None else list(self.values)

    def fail(self, why: str) -> None:
        """Give up on these numbers (the dump stopped before the pipeline ran them)."""
        if not self.done.is_set():
            self.error = why
            self.done.set()


def _summarise(array: Any) -> np.ndarray:
    """Fill the oldest pending statistics from ``array`` (run by MindSpore's pipeline, never raises)."""
    try:
        found = _pending.popleft()
    except IndexError:  # launched by a dump that has since given up on it
        return _OUTPUT
    try:
        values = np.asarray(array)  # a 0-d tensor arrives as a Python number
        if values.shape != found.shape:
            found.error = (
                f"the pipeline handed over a tensor of shape {values.shape} for one of shape {found.shape}"
            )
        else:
            found.values = array_stats(values)
    except Exception as exc:  # the user's step must go on: this record says what went wrong
        found.error = f"{type(exc).__name__}: {exc}"
    finally:
        found.done.set()
    return _OUTPUT


@functools.lru_cache(maxsize=1)
def _operator() -> Any:
    """Build the ``pyfunc`` operator once: MindSpore keeps each such function registered for good."""
    import mindspore as ms

    return ms.ops.Custom(_summarise, out_shape=(1,), out_dtype=ms.float32, func_type="pyfunc")


class PipelineStats:
    """Work out statistics for one dumped step, launched into the pipeline or read at once."""

    def __init__(self) -> None:
        """Take the operator, built on the first dumped step of the process."""
        import mindspore as ms

        self._ms = ms
        self._op = _operator()
        self._failed = False
        self._waits: list[float] = []  # what this step's first reads waited, in seconds
        self._launching: bool | None = None  # decided once SAMPLE reads are timed

    def stats(self, tensor: Any, read: Callable[[Any], np.ndarray]) -> Any:
        """Return ``(max, min, mean, norm)`` read at once, or :class:`PendingStats` the pipeline fills.

        :param read: the backend's host view of a tensor (``asnumpy``: it waits for the pipeline).
        """
        if self._launching is None and len(self._waits) > SAMPLE:
            # the mean: one read waits for a convolution, the next few for nothing. Not the first,
            # which also waits for what ran before the dump started
            waited = statistics.fmean(self._waits[1:] or self._waits)
            self._launching = waited > LAUNCH_SECONDS
            log.debug(
                "dump: reads waited %.2f ms each: statistics %s",
                waited * 1e3,
                "launched into the pipeline" if self._launching else "read at once",
            )
        if self._launching and not self._failed:
            pending = self.launch(tensor)
            if pending is not None:
                return pending
        began = time.perf_counter()
        array = read(tensor)
        if self._launching is None:
            self._waits.append(time.perf_counter() - began)
        return array_stats(array)

    def launch(self, tensor: Any) -> PendingStats | None:
        """Queue the statistics of ``tensor`` behind the operators launched so far; None: not possible."""
        if self._failed:
            return None
        found = PendingStats(tuple(int(d) for d in tensor.shape))
        _pending.append(found)  # before the launch: the pipeline may run it at once
        try:
            with self._ms._no_grad():
                self._op(tensor)
        except Exception as exc:  # the caller reads the tensor itself instead
            found.fail(f"not launched: {exc}")
            try:
                _pending.remove(found)
            except ValueError:  # the pipeline took it already
                pass
            self._failed = True
            log.warning("dump: MindSpore statistics are read per tensor from now on: %s", exc)
            return None
        return found

    def drain(self) -> None:
        """Wait for the pipeline once, then fail whatever it did not run (the dump has stopped)."""
        try:
            from mindspore.graph.api import _pynative_executor
        except ImportError:  # MindSpore before 2.9
            from mindspore.common.api import _pynative_executor
        try:
            _pynative_executor.sync()
        except Exception as exc:  # the user's own operator failed in the pipeline: theirs to see
            log.debug("dump: MindSpore's pipeline did not finish: %s", exc)
        while _pending:
            try:
                _pending.popleft().fail("the dump stopped before MindSpore's pipeline ran the statistics")
            except IndexError:
                break
