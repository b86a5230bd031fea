"""Statistics and tensor files of CUDA tensors for the dump, with no wait for the device while training.

* :func:`device_stats`: two passes over a tensor (``aminmax``, ``var_mean``);
  the norm is worked out on the host from the mean and variance, which saves
  the third pass and the small kernels a norm, a division and a stack cost.
* :func:`stats_to_host`: the statistics of a batch of records gathered with one
  ``torch.stack`` and copied into pinned memory with ``non_blocking``; an event
  tells the writer's thread when the copy is done.
* :func:`copy_to_host`: one tensor copied into pinned memory on a side stream
  after the work that made it (``wait_stream``), its device memory kept from
  reuse until then (``record_stream``).

Everything runs with ``__torch_function__`` handling off, so the dump's own calls
never reach its API capture.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tscore.plugin_api import PendingArray

Rows = list[list["float | None"]]


class DeviceStats:
    """One tensor's statistics as two reductions left them on its device: max, min, mean, variance."""

    __slots__ = ("count", "high", "low", "mean", "var")

    def __init__(self, high: Any, low: Any, mean: Any, var: Any, count: int) -> None:
        """Hold the four 0-d tensors and the element count (the norm is sqrt(count * (var + mean²)))."""
        self.high, self.low, self.mean, self.var, self.count = high, low, mean, var, count


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
    """Start one copy of many :class:`DeviceStats` of one device to the host; None when they are not.

    On CUDA the copy goes into pinned memory behind an event; elsewhere the values are read
    when the rows are asked for (on the writer's thread).
    """
    torch = sys.modules.get("torch")
    if torch is None or not stats or any(type(s) is not DeviceStats for s in stats):
        return None
    device = stats[0].high.device
    if any(s.high.device != device for s in stats):
        return None
    counts = [s.count for s in stats]
    with torch._C.DisableTorchFunction():
        flat = torch.stack([v for s in stats for v in (s.high, s.low, s.mean, s.var)])
        if device.type != "cuda":

            def read_now() -> Rows:
                return _rows(flat.double().cpu().numpy(), counts)

            return read_now
        host = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True)
        host.copy_(flat, non_blocking=True)
        done = torch.cuda.Event()
        done.record(torch.cuda.current_stream(device))

    def wait() -> Rows:
        done.synchronize()  # releases the GIL while it waits: the training thread runs on
        return _rows(host.numpy(), counts)

    return wait


def _rows(values: np.ndarray, counts: Sequence[int]) -> Rows:
    table = np.asarray(values, dtype=np.float64).reshape(-1, 4).tolist()
    return [finish_row(*row, count) for row, count in zip(table, counts, strict=True)]


_SIDE_STREAMS: dict[Any, Any] = {}


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
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        stream = _side_stream(t.device)
        stream.wait_stream(torch.cuda.current_stream(t.device))  # after the work that made the tensor
        with torch.cuda.stream(stream):
            host.copy_(t, non_blocking=True)
            done = torch.cuda.Event()
            done.record(stream)
        t.record_stream(stream)  # its memory is not handed to another tensor before the copy ends

    def result() -> np.ndarray:
        done.synchronize()
        return to_numpy(host, False)

    return PendingArray(int(host.numel() * host.element_size()), result)
