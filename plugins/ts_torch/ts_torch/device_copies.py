"""Statistics and tensor files of CUDA tensors for the dump, with no wait for the device while training.

* :func:`device_stats`: two passes over a tensor (``aminmax``, ``var_mean``)
  for what :mod:`ts_torch.fused_stats`' one-pass kernel does not take (float64,
  integers, tensors that are not contiguous); the norm is worked out on the
  host from the mean and variance.
* :func:`stats_to_host`: the statistics of a batch of records, the kernel's
  rows copied once per slab (:func:`~ts_torch.fused_stats.slab_copies`) and
  the reductions' gathered with one ``torch.stack``, into pinned memory with
  ``non_blocking``; an event tells the writer's thread when each copy is done.
* :func:`copy_to_host`: one tensor copied on a side stream after the work that
  made it (``wait_stream``), its device memory kept from reuse until then
  (``record_stream``), into a slice of one page-locked buffer
  (:class:`PinnedRing`, 256 MiB): the host memory a dump holds stays bounded
  whatever the model, and no per-tensor pinned allocation is cached for ever.

Everything runs with ``__torch_function__`` handling off, so the dump's own calls
never reach its API capture.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ts_torch.fused_stats import SlabStats, copy_to_host_later, slab_copies
from tscore.plugin_api import PendingArray

log = logging.getLogger(__name__)

Rows = list[list["float | None"]]


class DeviceStats:
    """One tensor's statistics as two reductions left them on its device: max, min, mean, variance.

    Once staged (:func:`stats_to_host`) it drops its four device tensors and keeps where its row
    will be read: the dump's record of a tensor seen again later in the step reuses the object,
    and four tensors held for the whole step would be four more objects for Python's garbage
    collector to go over in each of its full collections.
    """

    __slots__ = ("count", "high", "low", "mean", "row", "var")

    def __init__(self, high: Any, low: Any, mean: Any, var: Any, count: int) -> None:
        """Hold the four 0-d tensors and the element count (the norm is sqrt(count * (var + mean²)))."""
        self.high, self.low, self.mean, self.var, self.count = high, low, mean, var, count
        self.row: tuple[Callable[[], Rows], int] | None = None  # (the staged copy's rows, which one)


def device_stats(tensor: Any) -> DeviceStats:
    """Launch the two reductions of a non-empty float32 or float64 tensor (no autograd graph)."""
    torch = sys.modules["torch"]
    with torch._C.DisableTorchFunction():
        low, high = torch.aminmax(tensor)
        var, mean = torch.var_mean(tensor, correction=0)
    return DeviceStats(high, low, mean, var, tensor.numel())


def finish_row(high: float, low: float, mean: float, var: float, count: int) -> list[float | None]:
    """Return ``[max, min, mean, norm]`` from :func:`device_stats`' values, as torch's reductions give them.

    NaN anywhere makes max, min (``aminmax`` propagates it), mean and norm NaN; an infinity makes
    the norm infinite and the mean that infinity (NaN when both signs are present), which the
    variance, NaN then, cannot give.
    """
    if math.isnan(high) or math.isnan(low):
        return [math.nan, math.nan, math.nan, math.nan]
    if math.isinf(high) or math.isinf(low):
        up, down = high == math.inf, low == -math.inf
        return [high, low, math.nan if up and down else (math.inf if up else -math.inf), math.inf]
    square = count * (var + mean * mean)
    return [high, low, mean, math.sqrt(square) if square >= 0 else math.nan]


def stats_to_host(stats: Sequence[Any]) -> Callable[[], Rows] | None:
    """Start copying many :class:`DeviceStats` and kernel rows to the host; None when they are not all ours.

    On CUDA the copy goes into pinned memory behind an event; elsewhere the values are read
    when the rows are asked for (on the writer's thread). Statistics staged by an earlier call
    (a tensor recorded again) are read from that call's copy.
    """
    torch = sys.modules.get("torch")
    if torch is None or not stats or any(type(s) not in _OURS for s in stats):
        return None
    fused: list[int] = []
    slabs = []
    for index, found in enumerate(stats):
        if type(found) is SlabStats:
            slab = found.slab  # read before the row: a thread staging it meanwhile sets the row first
            if found.row is None and slab is not None:
                fused.append(index)
                slabs.append(slab)
    if fused:
        read_fused = _once(slab_copies(torch, [stats[i] for i in fused], slabs))
        for place, index in enumerate(fused):
            stats[index].row = (read_fused, place)
            stats[index].slab = None
    # each object's tensors read once: a batch staged on the training thread drops them (row first),
    # while the writer's thread may read one left behind by a failed batch
    by_device: dict[Any, list[tuple[int, tuple[Any, Any, Any, Any]]]] = {}
    for index, found in enumerate(stats):
        if type(found) is SlabStats:
            continue
        values = (found.high, found.low, found.mean, found.var)
        if found.row is None and values[0] is not None:
            by_device.setdefault(values[0].device, []).append((index, values))
    for group in by_device.values():
        read = _once(_one_device(torch, [v for _, v in group], [stats[i].count for i, _ in group]))
        for place, (index, _) in enumerate(group):
            found = stats[index]
            found.row = (read, place)
            found.high = found.low = found.mean = found.var = None
    rows_of = [found.row for found in stats]

    def wait() -> Rows:
        return [read()[place] for read, place in rows_of]  # type: ignore[misc]

    return wait


_OURS = (DeviceStats, SlabStats)


def _once(read: Callable[[], Rows]) -> Callable[[], Rows]:
    """Return ``read`` made to run once: later calls (a statistic recorded again) get the same rows."""
    done: list[Rows] = []
    reading = [read]  # dropped once read: the pinned buffer it holds goes back to torch's cache

    def rows() -> Rows:
        if not done:
            done.append(reading[0]())
            reading.clear()
        return done[0]

    return rows


def _one_device(
    torch: Any, values: Sequence[tuple[Any, Any, Any, Any]], counts: Sequence[int]
) -> Callable[[], Rows]:
    """Gather one device's statistics (max, min, mean, variance each), start their copy; return the wait."""
    with torch._C.DisableTorchFunction():
        flat = torch.stack([v for four in values for v in four])
    read = copy_to_host_later(torch, flat)
    return lambda: _rows(read(), counts)


def _rows(values: np.ndarray, counts: Sequence[int]) -> Rows:
    """Turn a batch's ``(max, min, mean, var)`` values into rows, as :func:`finish_row` does, in numpy.

    Run on the writer's thread, which holds the GIL while it works: one pass of numpy for the
    whole batch costs the training thread less than a Python function per row.
    """
    table = np.asarray(values, dtype=np.float64).reshape(-1, 4)
    high, low, mean, var = table.T
    with np.errstate(invalid="ignore", over="ignore"):
        square = np.asarray(counts, dtype=np.float64) * (var + mean * mean)
        norm = np.where(square >= 0, np.sqrt(np.abs(square)), np.nan)
    finite = np.isfinite(high) & np.isfinite(low)
    if finite.all():
        return np.stack((high, low, mean, norm), axis=1).tolist()  # type: ignore[no-any-return]
    rows: Rows = np.stack((high, low, mean, norm), axis=1).tolist()
    for index in np.flatnonzero(~finite).tolist():
        rows[index] = finish_row(*table[index].tolist(), counts[index])
    return rows


_SIDE_STREAMS: dict[Any, Any] = {}
PINNED_RING_BYTES = 256 << 20  # the dump's writer queue holds as much: the two bound each other
_ALIGN = 256  # every slice starts here, so that any dtype can view it
_WAIT_SECONDS = 120.0  # longer than this for room: the copy is made at once instead, with a warning


class PinnedRing:
    """One page-locked host buffer whose slices the dump's tensor copies take and give back in order.

    The writer writes tensors in the order they were copied, so slices come back first in,
    first out and the free space is at most two runs (after the newest slice, before the
    oldest). A copy that finds no room waits for the writer: a slow disk slows the training,
    it never grows the host memory.

    :param capacity: bytes of the buffer, allocated on first use.
    :param allocate: makes the buffer (a torch ``uint8`` tensor); page-locked when the build has CUDA.
    """

    def __init__(self, capacity: int, allocate: Callable[[int], Any]) -> None:
        """Hold nothing until the first :meth:`take`."""
        self.capacity = capacity
        self._allocate = allocate
        self._buffer: Any = None
        self._room = threading.Condition()
        self._slices: deque[tuple[int, int]] = deque()  # (start, end) of the slices in use, oldest first
        self._head = 0

    def take(self, nbytes: int, timeout: float = _WAIT_SECONDS) -> tuple[Any, Callable[[], None]] | None:
        """Return ``nbytes`` of the buffer (a uint8 tensor) and the function that gives them back.

        None when the buffer is smaller than ``nbytes``, or when no room came within ``timeout``.
        """
        size = max(_ALIGN, -(-nbytes // _ALIGN) * _ALIGN)
        if size > self.capacity:
            return None
        deadline = time.monotonic() + timeout
        with self._room:
            while (start := self._fit(size)) is None:
                left = deadline - time.monotonic()
                if left <= 0 or not self._room.wait(left):
                    return None
            if self._buffer is None:
                self._buffer = self._allocate(self.capacity)
            self._slices.append((start, start + size))
            self._head = start + size
        given = False

        def give_back() -> None:
            nonlocal given
            if not given:
                given = True
                self._give_back(start)

        return self._buffer[start : start + nbytes], give_back

    def _fit(self, size: int) -> int | None:
        """Return where a slice of ``size`` fits, or None.

        Slices are taken in ring order, so the live ones lie between the oldest's start and the
        head, going round: past the oldest (head above it) the room is after the head and before
        the oldest; once the head has gone round (head at or below the oldest) it is between the
        two. A slice given back out of order leaves a hole that is reused once the oldest goes.
        """
        if not self._slices:
            return 0
        oldest = self._slices[0][0]
        if self._head <= oldest:  # gone round: the only room is up to the oldest
            return self._head if oldest - self._head >= size else None
        if self.capacity - self._head >= size:
            return self._head
        return 0 if oldest >= size else None

    def _give_back(self, start: int) -> None:
        with self._room:
            if self._slices and self._slices[0][0] == start:
                self._slices.popleft()
            else:
                self._slices = deque(s for s in self._slices if s[0] != start)
            self._room.notify_all()

    @property
    def in_use(self) -> int:
        """Bytes of the buffer taken and not yet given back."""
        with self._room:
            return sum(end - start for start, end in self._slices)


_RING: PinnedRing | None = None
_WARNED: set[str] = set()


def _ring() -> PinnedRing:
    global _RING
    if _RING is None:
        torch = sys.modules["torch"]
        pinned = torch.cuda.is_available()
        _RING = PinnedRing(PINNED_RING_BYTES, lambda n: torch.empty(n, dtype=torch.uint8, pin_memory=pinned))
    return _RING


def _warn_once(key: str, message: str, *args: Any) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning(message, *args)


def _side_stream(device: Any) -> Any:
    """Return the stream the dump copies on, one per device, made when first needed."""
    stream = _SIDE_STREAMS.get(device)
    if stream is None:
        torch = sys.modules["torch"]
        stream = _SIDE_STREAMS[device] = torch.cuda.Stream(device=device)
    return stream


def copy_to_host(tensor: Any, to_numpy: Callable[[Any, bool], np.ndarray]) -> PendingArray | None:
    """Start copying a CUDA tensor into pinned host memory on a side stream; None for other tensors.

    :param to_numpy: the plugin's conversion, applied on the writer's thread to the host copy
        (bfloat16 and float8 become ``ml_dtypes`` arrays there).
    """
    torch = sys.modules["torch"]
    if tensor.device.type != "cuda" or tensor.layout != torch.strided or tensor.is_quantized:
        return None
    with torch._C.DisableTorchFunction():
        t = tensor.detach().resolve_conj().resolve_neg()
        nbytes = t.numel() * t.element_size()
        taken = _ring().take(nbytes) if nbytes else None
        if taken is None:
            if nbytes:
                _warn_once(
                    "ring",
                    "dump: a tensor of %d MB found no room in the %d MB of pinned memory; such tensors "
                    "are copied while the training waits",
                    nbytes >> 20,
                    PINNED_RING_BYTES >> 20,
                )
            return None
        space, give_back = taken
        try:
            host = space.view(t.dtype).view(t.shape)
            main = torch.cuda.current_stream(t.device)
            stream = _side_stream(t.device)
            stream.wait_stream(main)  # after the work that made the tensor
            with torch.cuda.stream(stream):
                host.copy_(t, non_blocking=True)
                done = torch.cuda.Event()
                done.record(stream)
            # and before any later work changes it in place (relu_, an optimizer step): the device
            # orders the two streams; the host waits for neither
            main.wait_event(done)
            t.record_stream(stream)  # its memory is not handed to another tensor before the copy ends
        except BaseException:
            give_back()
            raise

    def result() -> np.ndarray:
        done.synchronize()
        return to_numpy(host, False)

    def release() -> None:
        done.synchronize()  # a copy never waited for (the dump stopped writing) may still be landing
        give_back()

    return PendingArray(nbytes, result, release)
