"""memory_stats: the statistics of host memory a backend names by address (torch's ``data_ptr()``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tscore.array_stats
from tscore import native_kernel
from tscore.plugin_api import memory_stats


def _address(values: np.ndarray) -> int:
    return int(values.__array_interface__["data"][0])


@pytest.fixture
def compiled(monkeypatch) -> None:
    """The compiled kernel, which the install builds: it must load."""
    assert native_kernel.load_error() is None, "tscore was installed without its C kernel: reinstall with cc"
    monkeypatch.setattr(tscore.array_stats, "_KERNEL", native_kernel)


def test_an_address_gives_the_statistics_of_the_elements_there(compiled) -> None:
    values = (np.random.default_rng(2).standard_normal(10_001) * 7).astype(np.float32)
    wide = values.astype(np.float64)
    expected = (wide.max(), wide.min(), wide.mean(), math.sqrt(float((wide * wide).sum())))
    assert memory_stats(_address(values), values.dtype, values.size) == pytest.approx(expected, rel=1e-9)
    assert memory_stats(_address(values[5:]), values.dtype, 3) == pytest.approx(
        (wide[5:8].max(), wide[5:8].min(), wide[5:8].mean(), float(np.linalg.norm(wide[5:8]))), rel=1e-9
    )
    halves = np.array([1.0, np.nan], dtype=np.float16)
    assert all(math.isnan(v) for v in memory_stats(_address(halves), halves.dtype, 2))


def test_what_the_kernel_must_not_read_is_left_to_the_backend(compiled) -> None:
    values = np.zeros(8, np.float64)
    assert memory_stats(_address(values), values.dtype, 0) is None  # nothing to summarise
    assert memory_stats(0, values.dtype, 8) is None  # no memory (a tensor subclass's null address)
    assert memory_stats(_address(values) + 4, values.dtype, 4) is None  # not aligned to float64
    assert memory_stats(_address(values), np.dtype(np.complex64), 4) is None  # a dtype it does not read
    assert memory_stats(_address(values), np.dtype(">f8"), 4) is None  # another byte order


def test_without_the_compiled_kernel_the_backend_is_told_to_summarise_its_own_way(monkeypatch) -> None:
    monkeypatch.setattr(tscore.array_stats, "_KERNEL", False)  # an install with no C compiler
    values = np.ones(4, np.float32)
    assert memory_stats(_address(values), values.dtype, 4) is None


def test_every_dtype_it_lists_is_read_and_named_as_backends_name_it(compiled) -> None:
    from tscore.plugin_api import memory_stats_dtypes

    listed = memory_stats_dtypes()
    assert {d.name for d in listed} >= {"float32", "float64", "float16", "bfloat16", "int64", "uint8", "bool"}
    for dtype in listed:
        values = np.arange(1, 5).astype(dtype)
        wide = values.astype(np.float64)
        assert memory_stats(_address(values), dtype, 4) == pytest.approx(
            (wide.max(), wide.min(), wide.mean(), float(np.linalg.norm(wide)))
        ), dtype.name
