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

Each launch carries a ticket (a second input, an int64 scalar), so a run fills
the statistics it was launched for and no other. When MindSpore drops queued
operators (an operator before them failed: the error reaches the user at
their next ``asnumpy()``), the tickets that never ran are errors in their
records as soon as a later one runs, and at the latest when the dump stops:
:meth:`PipelineStats.drain` waits for the pipeline once and fails whatever is
still pending. An error of the user's own operators that the dump's wait or
launch took in is raised again when the user's call being recorded returns
(inside their own ``try``), else at ``stop()``: without the dump it would have
reached them at their next wait. :func:`_summarise` itself never raises.

Only tensors MindSpore's ``pyfunc`` kernel can hand over are launched: at
least one dimension (a 0-d bfloat16 or complex tensor fails in the kernel and
makes the pipeline drop what was queued behind it), a dtype of
:data:`LAUNCHED_DTYPES`, at most :data:`LARGEST_LAUNCHED` bytes (the kernel
hands over a host copy). Everything else is read at once.

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
import itertools
import logging
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ts_mindspore.api_capture import DUMPS_OWN
from tscore.plugin_api import array_stats

log = logging.getLogger(__name__)

WAIT_SECONDS = 600.0  # the writer's longest wait for one tensor's statistics before it records an error
SAMPLE = 12  # tensors read at once at the start of each dumped step (after the first), timed
# reads that wait longer than this on average are launched instead: a launch costs 0.25-0.85 ms here
# (timing launches themselves says little: once the pipeline's queue is full, a launch waits for it)
LAUNCH_SECONDS = 1e-3
LARGEST_LAUNCHED = 64 << 20  # bytes: a bigger tensor is read at once (the kernel would copy it)
# MindSpore dtype names whose tensors the pyfunc kernel hands over (checked with MindSpore 2.10 CPU)
LAUNCHED_DTYPES = frozenset(
    {"Float16", "Float32", "Float64", "BFloat16", "Int8", "Int16", "Int32", "Int64", "UInt8", "Bool"}
)
DROPPED = "MindSpore's pipeline dropped the statistics operator (an operator before it failed)"

# launched and not yet run, oldest first, by ticket: only the pipeline's thread takes from the left,
# only the training thread appends
_pending: collections.deque[tuple[int, PendingStats]] = collections.deque()
_tickets = itertools.count()
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
        """Give up on these numbers (the pipeline dropped them, or the dump stopped first)."""
        if not self.done.is_set():
            self.error = why
            self.done.set()


def _summarise(array: Any, ticket: Any) -> np.ndarray:
    """Fill the statistics launched under ``ticket`` from ``array`` (run by the pipeline; never raises).

    Those launched before it and still waiting were dropped by the pipeline: they fail.
    """
    try:
        wanted = int(ticket)  # a 0-d tensor arrives as a Python number
        while _pending and _pending[0][0] <= wanted:
            number, found = _pending.popleft()
            if number < wanted:
                found.fail(DROPPED)
                continue
            try:
                values = np.asarray(array)
                if values.shape != found.shape:
                    found.error = (
                        f"the pipeline handed over a tensor of shape {values.shape} for one of "
                        f"shape {found.shape}"
                    )
                else:
                    found.values = array_stats(values)
            except Exception as exc:  # the user's step must go on: this record says what went wrong
                found.error = f"{type(exc).__name__}: {exc}"
            finally:
                found.done.set()
    except Exception as exc:  # nothing may reach the pipeline: it would drop the user's operators
        log.debug("dump: statistics run %r failed: %s", ticket, exc)
    return _OUTPUT


@functools.lru_cache(maxsize=1)
def _operator() -> Any:
    """Build the ``pyfunc`` operator once: MindSpore keeps each such function registered for good.

    Marked as the dump's own: no API capture records its launches (a dump inside a dump).
    """
    import mindspore as ms

    op = ms.ops.Custom(_summarise, out_shape=(1,), out_dtype=ms.float32, func_type="pyfunc")
    setattr(op, DUMPS_OWN, True)
    return op


@functools.lru_cache(maxsize=1)
def _executor() -> Any:
    """Return MindSpore's PyNative executor, whose ``sync()`` waits for the pipeline."""
    try:
        from mindspore.graph.api import _pynative_executor
    except ImportError:  # MindSpore before 2.9
        from mindspore.common.api import _pynative_executor
    return _pynative_executor


class PipelineStats:
    """Work out statistics while one dump runs (a step): launched into the pipeline or read at once."""

    def __init__(self) -> None:
        """Take the operator, built on the first dumped step of the process."""
        import mindspore as ms

        self._ms = ms
        self._op = _operator()
        self._failed = False
        self._error: BaseException | None = None  # the user's pipeline error a launch took in
        self._waits: list[float] = []  # what this step's first reads waited, in seconds
        self._launching: bool | None = None  # decided once SAMPLE reads are timed

    def stats(self, tensor: Any, read: Callable[[Any], np.ndarray]) -> Any:
        """Return ``(max, min, mean, norm)`` read at once, or :class:`PendingStats` the pipeline fills.

        :param read: the backend's host view of a tensor, read once the pipeline has been waited for.
        :raises: an error of the user's operators that the wait took in (the record says so);
            :meth:`raise_taken_error` raises it again from the user's call.
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
        if self._launching and not self._failed and self._launchable(tensor):
            pending = self.launch(tensor)
            if pending is not None:
                return pending
        began = time.perf_counter()
        try:
            _executor().sync()  # what a read waits for; an error here is one of the user's operators
        except Exception as exc:
            self._error = self._error or exc
            raise
        if self._launching is None:
            self._waits.append(time.perf_counter() - began)
        return array_stats(read(tensor))  # the pipeline is idle: only the dump's own reading can fail

    @staticmethod
    def _launchable(tensor: Any) -> bool:
        """Whether the pyfunc kernel can hand this tensor over (see :data:`LAUNCHED_DTYPES`)."""
        return (
            len(tensor.shape) > 0
            and str(tensor.dtype) in LAUNCHED_DTYPES
            and tensor.nbytes <= LARGEST_LAUNCHED
        )

    def launch(self, tensor: Any) -> PendingStats | None:
        """Queue the statistics of ``tensor`` behind the operators launched so far; None: not launched.

        A launch that fails stops launching for the rest of the dump; its error, most likely one
        of the user's own operators before it, is raised again by :meth:`drain`.
        """
        found = PendingStats(tuple(int(d) for d in tensor.shape))
        ticket = next(_tickets)
        _pending.append((ticket, found))  # before the launch: the pipeline may run it at once
        try:
            with self._ms._no_grad():
                self._op(tensor, self._ms.Tensor(ticket, self._ms.int64))
        except Exception as exc:
            found.fail(f"not launched: {exc}")
            self._failed = True
            self._error = self._error or exc
            log.warning("dump: MindSpore statistics are read at once from now on: %s", exc)
            return None
        return found

    def raise_taken_error(self) -> None:
        """Raise an error of the user's own operators that the dump's wait or launch took in.

        The capture calls this when the user's call it was recording returns, so the error
        reaches the user inside their own ``try``, as it would have reached them at their next
        wait without the dump.
        """
        error, self._error = self._error, None
        if error is not None:
            raise error

    def drain(self) -> None:
        """Wait for the pipeline once, fail whatever it did not run, and raise the user's pipeline error.

        :raises: the error of the user's own operator that a wait, a launch or this last wait took
            in and that no call has raised yet.
        """
        try:
            _executor().sync()
        except Exception as exc:
            self._error = self._error or exc
        while _pending:
            try:
                _pending.popleft()[1].fail("the dump stopped before MindSpore's pipeline ran the statistics")
            except IndexError:
                break
        self.raise_taken_error()
