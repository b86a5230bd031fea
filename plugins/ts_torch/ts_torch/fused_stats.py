"""One pass over a GPU tensor for the dump's four statistics: a Triton kernel writing partial rows.

ATen has no reduction that gives max, min, sum and sum of squares at once: two (``aminmax``,
``var_mean``) cost two launches of about 20 µs of host time each and two passes over the
tensor's memory. :func:`launch` starts one kernel instead. Each of its programs reduces a share
of the tensor and writes one row, ``(max, min, sum, sum of squares, NaN count)``, into a
:class:`Slab` (a device buffer many tensors share). The rows cross to the host with the batch's
other statistics in one copy (:func:`slab_copies`), and the host finishes each tensor's rows in
float64 (:func:`finish_rows`): no per-tensor result on the device, no atomics, the same numbers
on every run.

Used for contiguous float32, float16 and bfloat16 CUDA tensors (halves are read as they are,
no float32 copy) when Triton imports; others keep the two ATen reductions. Set
``TSCORE_DUMP_STATS_KERNEL=aten`` to use those for every tensor (read at the process's first
GPU statistics). With ``TRITON_INTERPRET=1`` Triton runs the kernel on CPU tensors instead, which
is how the CPU tests check it, and CUDA tensors keep ATen's reductions.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ts_torch.tensor_memory import laid_out_in_own_memory

log = logging.getLogger(__name__)

BLOCK = 2048  # elements a program reads per round (8 per thread with 8 warps)
MAX_PROGRAMS = 512  # about four per multiprocessor of an H100: enough to read memory at full speed
MIN_ROUNDS = 4  # below MAX_PROGRAMS, each program reads this many blocks: fewer rows to copy and add up
SLAB_ROWS = 1 << 14  # rows of one slab: 640 KiB of device memory
_MAX_ELEMENTS = (1 << 31) - BLOCK * MAX_PROGRAMS  # the kernel's offsets are 32-bit

_kernel: Any = None  # the compiled kernel, made on first use; False once it failed
# the kernel as compiled for each (dtype, data 16-byte aligned): what Triton's launch looks up again
# on every call (about 8 µs of the host's time), launched directly
_COMPILED: dict[tuple[Any, bool], Any] = {}
_direct = True  # False once a direct launch failed: Triton's own launch from then on
_eligible: tuple[Any, ...] = ()
_device_type = "cuda"  # "cpu" under Triton's interpreter (TRITON_INTERPRET=1), which the CPU tests use


class Slab:
    """A device buffer of rows that the statistics of many tensors are written into, in order.

    Every kernel writing into it ran on one stream, ``stream`` (a raw CUDA stream; 0 off CUDA), and
    its rows are copied to the host on that stream: a model run on a side stream, or autograd's
    backward on its own, gets slabs of its own, so no copy can overtake the kernels it reads.
    """

    __slots__ = ("rows", "stream", "used")

    def __init__(self, rows: Any, stream: int = 0) -> None:
        """Hold ``rows``, a float64 tensor of ``(SLAB_ROWS + 1, 5)``; the last row is never written."""
        self.rows = rows
        self.stream = stream
        self.used = 0


class SlabStats:
    """One tensor's statistics: rows ``start`` to ``start + programs`` of a :class:`Slab`, ``count`` elements.

    ``row`` is where the staged copy put its finished row: (the batch's rows, which one).
    """

    __slots__ = ("count", "programs", "row", "slab", "start")

    def __init__(self, slab: Slab | None, start: int, programs: int, count: int) -> None:
        """Hold the slab (dropped once staged) and the place of the tensor's rows in it."""
        self.slab, self.start, self.programs, self.count = slab, start, programs, count
        self.row: tuple[Callable[[], list[list[float | None]]], int] | None = None


_SLABS: dict[tuple[Any, int], Slab] = {}  # the slab being filled, per device and stream
_TAKING = (
    threading.Lock()
)  # autograd's device thread records gradients while the training thread may record too


def enabled() -> bool:
    """Whether :func:`launch` may be used: Triton imports, its kernel compiles, and no one chose ATen."""
    global _kernel
    if _kernel is None:
        if os.environ.get("TSCORE_DUMP_STATS_KERNEL", "").lower() == "aten":
            _kernel = False
        else:
            try:
                _kernel = _make_kernel()
            except Exception as exc:  # no Triton, or one too old for the kernel
                log.info("dump: statistics on the GPU use ATen's reductions (no Triton kernel: %s)", exc)
                _kernel = False
    return _kernel is not False


def _make_kernel() -> Any:
    """Define the Triton kernel (Triton is imported here, on a dump's first GPU statistics)."""
    global _eligible, _device_type
    import triton
    import triton.language as tl

    torch = sys.modules["torch"]
    _eligible = (torch.float32, torch.float16, torch.bfloat16)
    _device_type = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"

    @triton.jit(do_not_specialize=["first_row", "count", "rounds"])
    # Triton reads its arguments' annotations as types: these stay bare
    def partial_stats(values, rows, first_row, count, rounds, BLOCK: tl.constexpr):  # noqa: ANN001, ANN202
        program = tl.program_id(0)
        stride = tl.num_programs(0) * BLOCK
        lanes = tl.arange(0, BLOCK)
        high = tl.full([BLOCK], float("-inf"), tl.float32)
        low = tl.full([BLOCK], float("inf"), tl.float32)
        total = tl.zeros([BLOCK], tl.float64)  # float32 sums of finite numbers can reach inf
        squares = tl.zeros([BLOCK], tl.float64)
        nans = tl.zeros([BLOCK], tl.float32)
        for step in range(0, rounds):
            index = step * stride + program * BLOCK + lanes
            inside = index < count
            x = tl.load(values + index, mask=inside, other=0.0).to(tl.float32)
            number = x == x
            nans += (~number).to(tl.float32)
            high = tl.maximum(high, tl.where(inside & number, x, float("-inf")))
            low = tl.minimum(low, tl.where(inside & number, x, float("inf")))
            wide = x.to(tl.float64)
            total += wide
            squares += wide * wide
        row = rows + (first_row + program) * 5
        tl.store(row, tl.max(high, 0))
        tl.store(row + 1, tl.min(low, 0))
        tl.store(row + 2, tl.sum(total, 0))
        tl.store(row + 3, tl.sum(squares, 0))
        tl.store(row + 4, tl.sum(nans, 0))

    return partial_stats


def launch(tensor: Any) -> SlabStats | None:
    """Start the kernel on a non-empty tensor; None when it does not apply (ATen's reductions then).

    It applies to contiguous float32, float16 and bfloat16 CUDA tensors of fewer than 2³¹
    elements, on the device that is current (Triton launches there), that are plain tensors or
    parameters holding their own memory: a subclass such as DTensor reports a null data pointer
    (the kernel would read address 0), and a negative view holds its values un-negated. The
    tensor's rows go into the slab of its device and stream, a new slab when the last is full.
    Sums and squares add up in float64 (finite float32 numbers can sum to inf in float32); max,
    min and the NaN count in float32. A kernel that fails to compile or launch turns the fused
    path off for the rest of the process, with one warning.
    """
    if not enabled() or tensor.dtype not in _eligible:
        return None
    device = tensor.device
    if device.type != _device_type or tensor.is_neg():
        return None
    count = tensor.numel()
    if count >= _MAX_ELEMENTS or not laid_out_in_own_memory(tensor):  # a subclass, a storage FSDP freed
        return None
    torch = sys.modules["torch"]
    stream = 0
    if device.type == "cuda":
        if device.index != torch._C._cuda_getDevice():  # without torch.cuda's lazy-init check
            return None
        stream = torch._C._cuda_getCurrentRawStream(device.index)  # where Triton launches
    programs = min(-(-count // (BLOCK * MIN_ROUNDS)), MAX_PROGRAMS)
    with _TAKING:
        slab = _SLABS.get((device, stream))
        if slab is None or slab.used + programs > SLAB_ROWS:
            with torch._C.DisableTorchFunction():
                rows = torch.empty((SLAB_ROWS + 1, 5), dtype=torch.float64, device=device)
            slab = _SLABS[device, stream] = Slab(rows, stream)
        start = slab.used
        slab.used = start + programs  # rows left unwritten by a failed launch are never read
    global _kernel
    rounds = -(-count // (programs * BLOCK))
    try:
        _run(tensor, slab, start, count, rounds, programs)
    except Exception as exc:
        log.warning("dump: the statistics kernel failed (%s); ATen's reductions are used from now on", exc)
        _kernel = False
        return None
    return SlabStats(slab, start, programs, count)


def _run(tensor: Any, slab: Slab, start: int, count: int, rounds: int, programs: int) -> None:
    """Launch the kernel: through Triton the first time for each dtype and alignment, then directly."""
    global _direct
    # what Triton specialises a pointer on, and the device its compiled function was loaded on
    key = (tensor.device.index, tensor.dtype, tensor.data_ptr() % 16 == 0)
    compiled = _COMPILED.get(key) if _direct else None
    rows = slab.rows
    if compiled is not None:
        try:
            compiled[(programs, 1, 1)](tensor, rows, start, count, rounds, BLOCK, stream=slab.stream)
            return
        except Exception as exc:  # another Triton's compiled kernel: its own launch still works
            log.info("dump: the statistics kernel is launched through Triton (%s)", exc)
            _direct = False
    compiled = _kernel[(programs,)](tensor, rows, start, count, rounds, BLOCK=BLOCK, num_warps=8)
    if _device_type == "cpu":  # the interpreter ran it; it returns no compiled kernel
        return
    if compiled is None:  # a Triton cache hook (knobs.runtime.jit_cache_hook) may skip the launch
        raise RuntimeError("Triton returned without launching the kernel")
    if _direct and callable(getattr(compiled, "__getitem__", None)):
        _COMPILED[key] = compiled


def slab_copies(
    torch: Any, stats: Sequence[SlabStats], slabs: Sequence[Slab]
) -> Callable[[], list[list[float | None]]]:
    """Start copying the rows of ``stats`` to the host, one copy per slab; return the wait for their rows.

    ``slabs`` holds each statistic's slab as the caller read it, before anything could let it go
    (the training thread drops a staged statistic's slab while the writer's may stage it too).
    On CUDA the copy runs on the stream the slab's kernels ran on and lands in pinned memory
    behind an event that the writer's thread waits on; elsewhere (the interpreter's CPU tensors)
    the rows are read then.
    """
    by_slab: dict[int, tuple[Slab, list[int]]] = {}
    for index, slab in enumerate(slabs):
        by_slab.setdefault(id(slab), (slab, []))[1].append(index)
    waits: list[tuple[Callable[[], np.ndarray], int, list[int]]] = []
    for slab, members in by_slab.values():
        low = min(stats[i].start for i in members)
        high = max(stats[i].start + stats[i].programs for i in members)
        waits.append((copy_to_host_later(torch, slab.rows[low : high + 1], slab.stream), low, members))
    counts = [s.count for s in stats]
    places = [(s.start, s.programs) for s in stats]

    def wait() -> list[list[float | None]]:
        rows: list[list[float | None]] = [[] for _ in stats]
        for read, low, members in waits:
            table = read()
            finished = finish_rows(
                table,
                [places[i][0] - low for i in members],
                [places[i][1] for i in members],
                [counts[i] for i in members],
            )
            for index, row in zip(members, finished, strict=True):
                rows[index] = row
        return rows

    return wait


def copy_to_host_later(torch: Any, values: Any, stream: int | None = None) -> Callable[[], np.ndarray]:
    """Start copying a small device tensor to the host; return the read that waits for it (writer's thread).

    On CUDA: into pinned memory with ``non_blocking``, on ``stream`` (a raw CUDA stream: where the
    kernels that wrote ``values`` ran; None for the current one of its device) behind an event.
    Elsewhere the read copies when it is called, off the training thread. Used for the kernel's
    rows and for the ATen reductions' stacked values (:mod:`ts_torch.device_copies`).
    """
    with torch._C.DisableTorchFunction():
        if values.device.type != "cuda":
            return lambda: values.cpu().numpy()  # type: ignore[no-any-return]
        host = torch.empty(values.shape, dtype=values.dtype, pin_memory=True)
        done = torch.cuda.Event()
        if stream is None or stream == torch._C._cuda_getCurrentRawStream(values.device.index):
            host.copy_(values, non_blocking=True)
            done.record(torch.cuda.current_stream(values.device))  # the copy's device, not the current one
        else:  # the kernels ran on a side stream (or autograd's): the copy goes there too
            with torch.cuda.stream(torch.cuda.ExternalStream(stream, device=values.device)):
                host.copy_(values, non_blocking=True)
                done.record()

    def read() -> np.ndarray:
        done.synchronize()  # releases the GIL while it waits: the training thread runs on
        return host.numpy()  # type: ignore[no-any-return]

    return read


def finish_rows(
    table: np.ndarray, starts: Sequence[int], programs: Sequence[int], counts: Sequence[int]
) -> list[list[float | None]]:
    """Turn each tensor's partial rows into ``[max, min, mean, norm]`` in float64, as torch would.

    ``table`` holds rows of ``(max, min, sum, sum of squares, NaN count)``, one more row after the
    last tensor's (``reduceat`` needs an end). A NaN anywhere makes all four NaN; otherwise the
    maximum and minimum are those of the numbers, the mean is the sum over the count (an
    infinity, or NaN when both signs are present) and the norm the root of the squares.
    """
    values = np.asarray(table, dtype=np.float64)
    edges = np.empty(2 * len(starts), dtype=np.intp)
    edges[0::2] = starts  # each tensor's rows are [start, end): the odd results (gaps) are dropped
    edges[1::2] = np.add(starts, programs)
    with np.errstate(invalid="ignore", over="ignore"):
        high = np.maximum.reduceat(values[:, 0], edges)[0::2]
        low = np.minimum.reduceat(values[:, 1], edges)[0::2]
        sums = np.add.reduceat(values[:, 2:5], edges, axis=0)[0::2]
        mean = sums[:, 0] / np.asarray(counts, dtype=np.float64)
        norm = np.sqrt(sums[:, 1])
    out = np.stack((high, low, mean, norm), axis=1)
    out[sums[:, 2] > 0] = np.nan
    return out.tolist()  # type: ignore[no-any-return]
