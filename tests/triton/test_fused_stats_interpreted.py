"""ts_torch's one-pass statistics kernel, interpreted on the CPU: the numbers, the slabs, the fallbacks."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch

from ts_torch import fused_stats
from ts_torch.device_copies import DeviceStats, device_stats, stats_to_host


def _float64(t: torch.Tensor) -> list[float]:
    d = t.double()
    return [d.max().item(), d.min().item(), d.mean().item(), torch.linalg.vector_norm(d).item()]


def _rows(tensors: list[torch.Tensor]) -> list[list[float | None]]:
    stats = [fused_stats.launch(t) for t in tensors]
    assert all(type(s) is fused_stats.SlabStats for s in stats)
    return stats_to_host(stats)()  # type: ignore[misc]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_statistics_equal_float64_ones_for_every_size_and_half_type(dtype, monkeypatch) -> None:
    monkeypatch.setattr(
        fused_stats, "MAX_PROGRAMS", 3
    )  # several rounds per program at a size the interpreter runs
    torch.manual_seed(0)
    tensors = [
        (torch.randn(n, dtype=torch.float64) * scale + shift).to(dtype)
        for n, scale, shift in ((1, 1.0, 0.5), (1000, 3.0, 1.0), (fused_stats.BLOCK * 40 + 3, 0.1, 100.0))
    ]
    tensors.append(torch.randn(4, 5, 6).to(dtype))
    for tensor, row in zip(tensors, _rows(tensors), strict=True):
        np.testing.assert_allclose(row, _float64(tensor), rtol=1e-12, atol=1e-12)


def test_nan_and_infinities_follow_torchs_reductions() -> None:
    cases = [
        torch.tensor([1.0, float("nan"), 2.0]),
        torch.tensor([1.0, float("inf"), 2.0]),
        torch.tensor([-float("inf"), 1.0]),
        torch.tensor([-float("inf"), float("inf"), 2.0]),
    ]
    nan, inf, minus_inf, both = _rows(cases)
    assert all(math.isnan(v) for v in nan)  # type: ignore[arg-type]
    assert inf == [math.inf, 1.0, math.inf, math.inf]
    assert minus_inf == [1.0, -math.inf, -math.inf, math.inf]
    assert both[:2] == [math.inf, -math.inf] and math.isnan(both[2]) and both[3] == math.inf  # type: ignore[arg-type]


def test_finite_float32_values_whose_float32_sum_overflows_keep_a_finite_mean() -> None:
    (row,) = _rows([torch.tensor([3e38, 3e38, 3e38])])
    assert row[2] == pytest.approx(3e38, rel=1e-7)  # float32 adding would give inf
    assert row[3] == pytest.approx(math.sqrt(3) * 3e38, rel=1e-7)


def test_rows_spread_over_several_slabs_come_back_in_the_order_asked(monkeypatch) -> None:
    monkeypatch.setattr(fused_stats, "SLAB_ROWS", 5)
    monkeypatch.setattr(fused_stats, "MAX_PROGRAMS", 2)
    tensors = [torch.full((fused_stats.BLOCK * fused_stats.MIN_ROUNDS * 2,), float(i)) for i in range(7)]
    stats = [fused_stats.launch(t) for t in tensors]
    assert len({id(s.slab) for s in stats}) == 4  # two rows each, two tensors to a slab of five
    rows = stats_to_host(stats[::-1])()[::-1]  # type: ignore[misc]
    assert [row[0] for row in rows] == [float(i) for i in range(7)]
    assert [row[2] for row in rows] == [float(i) for i in range(7)]


def test_a_batch_mixes_kernel_and_aten_statistics_and_a_staged_one_is_read_from_its_first_copy() -> None:
    x, y, z = torch.arange(6.0), torch.arange(10.0).reshape(2, 5).t(), torch.arange(3.0, dtype=torch.float64)
    first = fused_stats.launch(x)
    assert fused_stats.launch(y) is None and fused_stats.launch(z) is None  # not contiguous; float64
    staged = stats_to_host([first])
    assert first.slab is None  # type: ignore[union-attr]  # its slab is let go once its rows are on their way
    later = [first, device_stats(y), device_stats(z)]
    assert type(later[1]) is DeviceStats
    rows = stats_to_host(later)()  # type: ignore[misc]
    assert staged()[0] == rows[0] == _float64(x)  # type: ignore[misc]
    np.testing.assert_allclose(rows[1:], [_float64(y), _float64(z)], rtol=1e-6)


def test_choosing_aten_turns_the_kernel_off(monkeypatch) -> None:
    monkeypatch.setenv("TSCORE_DUMP_STATS_KERNEL", "aten")
    assert not fused_stats.enabled()
    assert fused_stats.launch(torch.ones(3)) is None


def test_a_kernel_that_fails_warns_once_and_leaves_atens_reductions_to_do_the_work(
    monkeypatch, caplog
) -> None:
    class FailingLaunchFake:  # a stand-in for a kernel the GPU's compiler rejects
        def __getitem__(self, grid: object) -> object:
            raise RuntimeError("PassManager::run failed")

    assert fused_stats.enabled()
    monkeypatch.setattr(fused_stats, "_kernel", FailingLaunchFake())
    with caplog.at_level(logging.WARNING, logger="ts_torch.fused_stats"):
        assert fused_stats.launch(torch.ones(3)) is None
        assert fused_stats.launch(torch.ones(3)) is None
    assert [r.getMessage() for r in caplog.records] == [
        "dump: the statistics kernel failed (PassManager::run failed); ATen's reductions are used from now on"
    ]


class _WrapperSubclass(torch.Tensor):
    """A tensor subclass holding no memory of its own, as DTensor does: its data pointer is null."""

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> _WrapperSubclass:
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner: torch.Tensor) -> None:
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(func)


def test_subclasses_and_negative_views_are_left_to_atens_reductions_and_the_kernel_stays_on(caplog) -> None:
    wrapped = _WrapperSubclass(torch.ones(8))
    assert wrapped.data_ptr() == 0  # the kernel would read address 0: on a GPU, an illegal access
    with caplog.at_level(logging.WARNING, logger="ts_torch.fused_stats"):
        assert fused_stats.launch(wrapped) is None
        assert fused_stats.launch(torch.arange(4.0)._neg_view()) is None  # its memory holds 0, 1, 2, 3
        for start in (0, 1024):  # a flat parameter's first and later views, as FSDP makes them
            freed = torch.ones(4096)[start:]
            freed.untyped_storage().resize_(0)  # FSDP frees the storage; a later view keeps an address
            assert fused_stats.launch(freed) is None
    assert not caplog.records and fused_stats.enabled()
    weight = torch.nn.Parameter(torch.arange(4.0))
    (row,) = _rows([weight])
    assert row == _float64(weight.detach())


def test_a_leftover_staged_by_the_writer_while_the_training_thread_stages_it_too_keeps_its_numbers(
    monkeypatch,
) -> None:
    import threading

    from ts_torch import device_copies

    stats = fused_stats.launch(torch.arange(6.0))
    original = device_copies.slab_copies

    def training_thread_first(*args: object) -> object:  # the interleaving a review found
        monkeypatch.setattr(device_copies, "slab_copies", original)
        other = threading.Thread(target=lambda: stats_to_host([stats]))
        other.start()
        other.join()
        assert stats.slab is None  # type: ignore[union-attr]  # the training thread let it go
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(device_copies, "slab_copies", training_thread_first)
    (row,) = stats_to_host([stats])()  # type: ignore[misc]
    assert row == _float64(torch.arange(6.0))
