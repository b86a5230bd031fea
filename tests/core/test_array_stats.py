"""array_stats: a host array summarised as a dump records it, for every dtype a backend hands over."""

from __future__ import annotations

import math
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tscore.array_stats
from tscore import native_kernel
from tscore.plugin_api import array_stats


@pytest.fixture(autouse=True, params=["compiled pass", "numpy reductions"])
def kernel(request, monkeypatch) -> str:
    """Run every test through the compiled kernel (built by the install: it must load) and through numpy."""
    if request.param == "compiled pass":
        assert native_kernel.load_error() is None, (
            "tscore was installed without its C kernel: reinstall with cc"
        )
        monkeypatch.setattr(tscore.array_stats, "_KERNEL", native_kernel)
    else:
        monkeypatch.setattr(tscore.array_stats, "_KERNEL", False)
    return request.param


def float64_stats(values: np.ndarray) -> tuple[float, float, float, float]:
    wide = values.astype(np.float64)
    return wide.max(), wide.min(), wide.mean(), math.sqrt(float((wide * wide).sum()))


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int64, np.uint8, bool]
)
def test_every_dtype_gives_the_float64_statistics(dtype) -> None:
    values = (np.random.default_rng(0).standard_normal((17, 5)) * 40).astype(dtype)
    assert array_stats(values) == pytest.approx(float64_stats(values), rel=1e-5)


def test_complex_values_are_summarised_by_their_magnitudes() -> None:
    values = np.array([3 + 4j, -1j, 0], dtype=np.complex64)
    assert array_stats(values) == pytest.approx((5.0, 0.0, 2.0, math.sqrt(26.0)))


def test_nan_and_inf_are_kept_and_an_empty_array_has_none() -> None:
    high, low, mean, norm = array_stats(np.array([1.0, np.nan, 2.0], dtype=np.float32))
    assert math.isnan(high) and math.isnan(low) and math.isnan(mean) and math.isnan(norm)
    assert array_stats(np.array([1.0, np.inf], dtype=np.float16))[0] == math.inf
    assert array_stats(np.zeros((0, 3), np.float32)) is None


def test_a_large_float32_norm_does_not_overflow() -> None:
    values = np.full(4, 3e38, np.float32)  # the sum of squares overflows float32, the norm does not
    assert array_stats(values)[3] == pytest.approx(6e38, rel=1e-6)


def test_integers_keep_every_digit() -> None:
    values = np.array([16_777_217, 1], dtype=np.int32)  # 2**24 + 1: float32 would round it
    assert array_stats(values)[:3] == (16_777_217.0, 1.0, 8_388_609.0)


def test_every_statistic_is_nan_when_one_value_is_and_infinities_are_kept() -> None:
    assert all(math.isnan(v) for v in array_stats(np.full(5000, np.nan, np.float32)))
    high, low, mean, norm = array_stats(np.array([np.inf, -np.inf, 1.0], dtype=np.float64))
    assert (high, low, norm) == (math.inf, -math.inf, math.inf) and math.isnan(mean)
    assert array_stats(np.full(3, -np.inf, np.float32))[:2] == (-math.inf, -math.inf)


def test_a_strided_or_big_endian_array_gives_what_its_copy_gives() -> None:
    values = np.random.default_rng(1).standard_normal((300, 40)).astype(np.float32)
    assert array_stats(values[:, ::3]) == pytest.approx(float64_stats(values[:, ::3]), rel=1e-6)
    swapped = values.astype(">f4")
    assert array_stats(swapped) == pytest.approx(float64_stats(values), rel=1e-6)


def test_the_compiled_pass_is_what_summarises_where_it_was_built(kernel, monkeypatch) -> None:
    calls = []
    real = native_kernel.c_memory_stats
    monkeypatch.setattr(native_kernel, "c_memory_stats", lambda *a: calls.append(a) or real(*a))
    values = np.arange(10, dtype=np.float32)
    assert array_stats(values) == pytest.approx((9.0, 0.0, 4.5, math.sqrt(285.0)))
    assert len(calls) == (1 if kernel == "compiled pass" else 0)


def test_the_kernel_loads_on_its_own_and_brings_none_of_the_compare_engine() -> None:
    """What a dump's first statistics load: the library through ctypes, not tscore.compare."""
    code = (
        "import sys, tscore.array_stats as s; kernel = s.compiled_kernel(); "
        "print(kernel.__name__, 'tscore.compare' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["tscore.native_kernel", "False"]
