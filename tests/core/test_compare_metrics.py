"""Every compare metric against a direct numpy computation, through every kernel."""

from __future__ import annotations

import math

import hypothesis
import hypothesis.extra.numpy as hnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import strategies as st

from tscore import native_kernel
from tscore.compare import c_kernel, compare_arrays, numba_kernel, pair_stats
from tscore.compare.kernels import flat_stats, logical_stats, resolve_kernel
from tscore.compare.pairs import PairStatus
from tscore.errors import TscoreError

KERNELS = ["c", "numpy", "numba"]


@pytest.fixture(params=KERNELS)
def kernel(request: pytest.FixtureRequest) -> str:
    return request.param


def reference(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> dict[str, float]:
    """The metrics written out plainly with numpy, in float64, over the finite positions."""
    x, y = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    close = np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)
    finite = np.isfinite(x) & np.isfinite(y)
    xf, yf = x[finite], y[finite]
    diff = np.abs(xf - yf)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / np.abs(yf))
    return {
        "allclose": bool(np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)),
        "ratio": float(close.mean()),
        "cosine": float(xf @ yf / (np.linalg.norm(xf) * np.linalg.norm(yf))),
        "mean": float(diff.mean()),
        "max": float(diff.max()),
        "rel": float(rel.max()),
    }


def picked(stats: pair_stats.PairStats, names: tuple[str, ...]) -> dict[str, float]:
    """The named fields of ``stats``, to compare two kernels' results field by field."""
    return {name: getattr(stats, name) for name in names}


def assert_matches(row, ref: dict[str, float]) -> None:
    assert row.allclose is ref["allclose"]
    assert row.ratio_close == pytest.approx(ref["ratio"], rel=1e-12)
    assert row.cosine == pytest.approx(ref["cosine"], rel=1e-9)
    assert row.mean_abs_diff == pytest.approx(ref["mean"], rel=1e-9)
    assert row.max_abs_diff == ref["max"]
    assert row.max_rel_diff == pytest.approx(ref["rel"], rel=1e-12)


@pytest.mark.parametrize("size", [1, 100, pair_stats.CHUNK_ELEMENTS * 2 + 17])
def test_metrics_equal_numpy_on_noisy_float32(kernel: str, size: int) -> None:
    rng = np.random.default_rng(size)
    a = rng.standard_normal(size).astype(np.float32)
    b = a + rng.standard_normal(size).astype(np.float32) * np.float32(3e-4)
    row = compare_arrays(a, b, 1e-4, 1e-4, kernel=kernel)
    assert_matches(row, reference(a, b, 1e-4, 1e-4, False))
    assert row.elements == size and row.orig_nan == row.target_nan == 0


def test_metrics_follow_rtol_and_atol(kernel: str) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal(5000)
    b = a * (1 + 1e-3)
    for rtol, atol in [(1e-4, 0.0), (2e-3, 0.0), (0.0, 1e-3), (0.0, 0.0)]:
        row = compare_arrays(a, b, rtol, atol, kernel=kernel)
        assert_matches(row, reference(a, b, rtol, atol, False))
    assert compare_arrays(a, b, 2e-3, 0.0, kernel=kernel).allclose
    assert not compare_arrays(a, b, 1e-4, 0.0, kernel=kernel).allclose


@pytest.mark.parametrize("equal_nan", [False, True])
def test_nan_and_inf_compared_by_position_and_left_out_of_statistics(kernel: str, equal_nan: bool) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal(pair_stats.CHUNK_ELEMENTS + 5000)
    b = a + 1e-6
    at = pair_stats.CHUNK_ELEMENTS + 10  # non-finite values in the second chunk too
    a[[3, at]] = np.nan
    b[[3, at]] = np.nan  # NaN on both sides: equal only with equal_nan
    a[7], b[7] = np.inf, np.inf  # same infinity: equal
    a[8], b[8] = np.inf, -np.inf  # opposite infinities: not equal
    b[9] = np.nan  # NaN on one side only
    a[11] = -np.inf  # inf against a number
    row = compare_arrays(a, b, kernel=kernel)
    ref = reference(a, b, 1e-4, 1e-4, equal_nan)
    row = compare_arrays(a, b, equal_nan=equal_nan, kernel=kernel)
    assert_matches(row, ref)
    assert math.isfinite(row.cosine) and math.isfinite(row.mean_abs_diff)
    assert (row.orig_nan, row.orig_inf, row.target_nan, row.target_inf) == (2, 3, 3, 2)
    failing = 4 + (0 if equal_nan else 2)  # 8, 9, 11 always; the NaN pairs unless equal_nan
    assert row.ratio_close == pytest.approx(1 - (failing - 1) / a.size)
    assert "NaN" in row.message and row.status is PairStatus.MISMATCH


def test_matching_nans_alone_pass_with_equal_nan(kernel: str) -> None:
    a = np.array([1.0, np.nan, 3.0, np.inf])
    assert compare_arrays(a, a.copy(), equal_nan=True, kernel=kernel).passed
    row = compare_arrays(a, a.copy(), equal_nan=False, kernel=kernel)
    assert not row.passed and row.ratio_close == 0.75
    assert row.cosine == pytest.approx(1.0) and row.max_abs_diff == 0.0


def test_all_nan_leaves_statistics_undefined(kernel: str) -> None:
    a = np.full(4, np.nan, dtype=np.float32)
    row = compare_arrays(a, a, equal_nan=True, kernel=kernel)
    assert row.passed and row.cosine is None and row.mean_abs_diff is None and row.max_abs_diff is None


def test_float16_and_bfloat16_compare_in_float64(kernel: str) -> None:
    rng = np.random.default_rng(3)
    base = rng.standard_normal(3000).astype(np.float32)
    for dtype in (np.float16, ml_dtypes.bfloat16):
        a = base.astype(dtype)
        b = (base + np.float32(0.01)).astype(dtype)
        row = compare_arrays(a, b, 1e-3, 1e-3, kernel=kernel)
        assert_matches(row, reference(a.astype(np.float64), b.astype(np.float64), 1e-3, 1e-3, False))
        assert row.orig_dtype == np.dtype(dtype).name


def test_float16_cosine_does_not_overflow(kernel: str) -> None:
    a = np.full(1000, 60000, dtype=np.float16)  # a.dot(a) in float16 is inf
    row = compare_arrays(a, a.copy(), kernel=kernel)
    assert row.cosine == pytest.approx(1.0) and row.passed


def test_ints_and_bools(kernel: str) -> None:
    a = np.arange(-50, 50, dtype=np.int64)
    b = a.copy()
    b[10] += 3
    row = compare_arrays(a, b, kernel=kernel)
    assert_matches(row, reference(a, b, 1e-4, 1e-4, False))
    assert row.max_abs_diff == 3.0
    flags = np.array([True, False, True, True])
    row = compare_arrays(flags, np.array([True, True, True, True]), kernel=kernel)
    assert row.ratio_close == 0.75 and row.max_abs_diff == 1.0 and not row.allclose
    uint = np.array([0, 255], dtype=np.uint8)  # no wrap-around: 0 - 255 is -255, not 1
    assert compare_arrays(uint, uint[::-1].copy(), kernel=kernel).max_abs_diff == 255.0


def test_zero_d_and_empty_arrays(kernel: str) -> None:
    row = compare_arrays(np.float32(2.0), np.float32(2.5), atol=0.1, kernel=kernel)
    assert row.orig_shape == () and row.elements == 1
    assert row.max_abs_diff == 0.5 and row.ratio_close == 0.0 and not row.passed
    empty = compare_arrays(np.zeros((0, 3)), np.zeros((0, 3)), kernel=kernel)
    assert empty.passed and empty.allclose is bool(np.allclose(np.zeros((0, 3)), np.zeros((0, 3))))
    assert empty.elements == 0 and empty.ratio_close is None and empty.cosine is None


def test_zero_vectors_cosine(kernel: str) -> None:
    zeros = np.zeros(8)
    assert compare_arrays(zeros, zeros.copy(), kernel=kernel).cosine == 1.0
    assert compare_arrays(zeros, np.ones(8), kernel=kernel).cosine is None
    assert compare_arrays(np.ones(8), -np.ones(8), kernel=kernel).cosine == -1.0


def test_relative_difference_against_zero_target(kernel: str) -> None:
    assert compare_arrays(np.array([0.0, 1.0]), np.array([0.0, 1.0]), kernel=kernel).max_rel_diff == 0.0
    assert compare_arrays(np.array([1e-9, 1.0]), np.array([0.0, 1.0]), kernel=kernel).max_rel_diff == math.inf


def test_memory_order_does_not_change_the_pairing(kernel: str) -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((300, 400))
    b = a + rng.standard_normal((300, 400)) * 1e-3
    mixed = compare_arrays(np.asfortranarray(a), b, kernel=kernel)
    assert_matches(mixed, reference(a, b, 1e-4, 1e-4, False))
    assert compare_arrays(a.T, b.T, kernel=kernel).max_abs_diff == mixed.max_abs_diff
    strided = compare_arrays(a[:, ::2], b[:, ::2], kernel=kernel)
    assert_matches(strided, reference(a[:, ::2], b[:, ::2], 1e-4, 1e-4, False))


def test_blocks_bound_memory_for_mixed_orders() -> None:
    a = np.arange(24.0).reshape(2, 3, 4)
    b = np.asfortranarray(a)
    stats = logical_stats(a, b, 0, 0, False, "numpy")
    assert stats.close == 24 and stats.max_abs == 0.0


def test_splitting_does_not_change_the_result(kernel: str) -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal(10_001)
    b = a + rng.standard_normal(10_001) * 1e-3
    b[5000] = np.nan
    whole = flat_stats(a, b, 1e-4, 1e-4, False, kernel)
    parts = pair_stats.PairStats()
    for start in range(0, a.size, 777):
        parts.merge(flat_stats(a[start : start + 777], b[start : start + 777], 1e-4, 1e-4, False, kernel))
    assert parts.close == whole.close and parts.finite == whole.finite
    assert parts.max_abs == whole.max_abs and parts.max_rel == whole.max_rel
    assert parts.sum_abs == pytest.approx(whole.sum_abs, rel=1e-12)
    assert parts.cosine == pytest.approx(whole.cosine, rel=1e-12)


def test_shape_mismatch_with_equal_size_is_reported_with_values() -> None:
    row = compare_arrays(np.ones((2, 3)), np.ones(6))
    assert row.status is PairStatus.SHAPE_MISMATCH and not row.passed and not row.allclose
    assert row.cosine == 1.0 and "flattened" in row.message
    other = compare_arrays(np.ones((2, 3)), np.ones(5))
    assert other.status is PairStatus.SHAPE_MISMATCH and other.cosine is None


def test_dtype_mismatch_is_its_own_status() -> None:
    row = compare_arrays(np.ones(4, dtype=np.float16), np.ones(4, dtype=np.float32))
    assert row.status is PairStatus.DTYPE_MISMATCH and row.allclose and row.passed
    assert "float16 vs float32" in row.message


def test_kernel_choice_takes_the_c_kernel_whatever_the_size() -> None:
    assert resolve_kernel("numpy") == "numpy"
    assert resolve_kernel("c") == "c"
    assert resolve_kernel("auto", data_bytes=1000) == "c"  # no start-up to pay for
    assert resolve_kernel("auto", data_bytes=4 << 30) == "c"
    with pytest.raises(TscoreError, match="unknown compare kernel"):
        resolve_kernel("cuda")


def test_without_the_c_kernel_auto_weighs_numba_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install built with no C compiler: numpy for small work, numba where its start-up pays."""
    monkeypatch.setattr(c_kernel, "load_error", lambda: "the C compare kernel was not built")
    assert resolve_kernel("auto", data_bytes=1000) == "numpy"  # numba's start-up would dominate
    assert resolve_kernel("auto", data_bytes=4 << 30) == "numba"
    assert numba_kernel.loaded()  # now numba pays off from 64 MB
    assert resolve_kernel("auto", data_bytes=1 << 30) == "numba"
    with pytest.raises(TscoreError, match="was not built"):
        resolve_kernel("c")


def test_the_install_built_the_c_kernel() -> None:
    """Every test session installs tscore from source with gcc there: the C runs must not fall back."""
    assert c_kernel.load_error() is None
    assert any(path.is_file() for path in native_kernel.candidates())
    assert c_kernel.supports(np.dtype(np.float16)) and c_kernel.supports(np.dtype(ml_dtypes.bfloat16))
    assert not c_kernel.supports(np.dtype(">f4")) and not c_kernel.supports(np.dtype(np.complex64))


def test_c_kernel_takes_mixed_dtypes_unaligned_and_strided_memory() -> None:
    """Every pair of element types it reads, and memory it must copy first, against numpy's kernel."""
    rng = np.random.default_rng(11)
    base = rng.standard_normal(3001) * 50
    kinds = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16, np.int8, np.int16, np.int32, np.int64]
    kinds += [np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]
    for left in kinds:
        for right in kinds:
            with np.errstate(invalid="ignore", over="ignore"):  # negatives wrap into unsigned types
                a = base.astype(left)
                b = (base + rng.standard_normal(base.size)).astype(right)
            got = flat_stats(a, b, 1e-3, 1e-3, False, "c")
            want = pair_stats.numpy_stats(a, b, 1e-3, 1e-3, False)
            exact = ("close", "finite", "max_abs", "rel_1e3")
            assert picked(got, exact) == picked(want, exact), (left, right)
            assert got.dot_ab == pytest.approx(want.dot_ab, rel=1e-12, abs=1e-9), (left, right)
    extremes = {  # every digit a float64 keeps, and the ends of the 64-bit ranges
        np.int64: [-(2**63), 2**63 - 1, 2**53 + 1, -1],
        np.uint64: [2**64 - 1, 2**63 + 1, 2**53 + 1, 0],
        np.uint32: [2**32 - 1, 0, 1, 2**31],
        np.int16: [-(2**15), 2**15 - 1, 0, 1],
    }
    for dtype, values in extremes.items():
        a = np.array(values, dtype=dtype)
        b = np.array(values[::-1], dtype=dtype)
        got, want = c_kernel.c_stats(a, b, 0, 0, False), pair_stats.numpy_stats(a, b, 0, 0, False)
        assert picked(got, ("max_abs", "max_rel", "close")) == picked(want, ("max_abs", "max_rel", "close"))
    raw = np.zeros(4 * 1000 + 1, dtype=np.uint8)
    unaligned = raw[1:].view(np.float32)
    unaligned[:] = base[:1000]
    assert not unaligned.flags.aligned
    assert c_kernel.c_stats(unaligned, unaligned.astype(np.float64), 0, 0, False).close == 1000
    strided = base[::3]
    assert c_kernel.c_stats(strided, strided.copy(), 0, 0, False).close == strided.size
    with pytest.raises(ValueError, match="equal length"):
        c_kernel.c_stats(base[:3], base[:4], 0, 0, False)
    with pytest.raises(ValueError, match="does not read"):
        c_kernel.c_stats(base.astype(">f8"), base, 0, 0, False)


def test_c_kernel_finds_a_nan_at_any_place_of_its_blocks() -> None:
    """A non-finite value sends its block of 2048 down the careful path, wherever it is."""
    rng = np.random.default_rng(12)
    a = rng.standard_normal(3 * 2048 + 5)
    b = a + rng.standard_normal(a.size) * 1e-3
    for place in (0, 2047, 2048, 4095, a.size - 1):
        x, y = a.copy(), b.copy()
        x[place], y[place] = np.nan, np.inf
        got = c_kernel.c_stats(x, y, 1e-4, 1e-4, False)
        want = pair_stats.numpy_stats(x, y, 1e-4, 1e-4, False)
        exact = ("finite", "close", "orig_nan", "target_inf")
        assert picked(got, exact) == picked(want, exact)
        assert got.sum_sq == pytest.approx(want.sum_sq, rel=1e-12) and got.max_rel == want.max_rel


def test_numba_kernel_is_installed_for_the_tests() -> None:
    """The test sessions install tscore[fast]: the numba runs above must not silently fall back."""
    assert numba_kernel.installed() and numba_kernel.load_error() is None
    assert numba_kernel.supports(np.dtype(np.float32)) and not numba_kernel.supports(np.dtype(np.float16))


@pytest.mark.parametrize("size", [1, 100, pair_stats.CHUNK_ELEMENTS * 2 + 17])
def test_euclidean_distance_and_thousandths_ratios_equal_numpy(kernel: str, size: int) -> None:
    """msprobe's EucDist and One/Five Thousandths Err Ratio, with exact zeros and a non-finite pair."""
    rng = np.random.default_rng(size + 1)
    a = rng.standard_normal(size).astype(np.float32)
    b = a * (1 + rng.standard_normal(size).astype(np.float32) * np.float32(3e-3))
    a[: size // 3] = b[: size // 3]  # exactly equal, zeros included below
    a[:2], b[:2] = 0.0, 0.0
    if size > 3:
        a[3], b[3] = np.inf, 1.0  # left out of every statistic
    stats = flat_stats(a, b, 1e-4, 1e-4, False, kernel)
    x, y = a.astype(np.float64), b.astype(np.float64)
    finite = np.isfinite(x) & np.isfinite(y)
    d, t = np.abs(x - y)[finite], np.abs(y)[finite]
    assert stats.euclidean == pytest.approx(float(np.sqrt(d @ d)), rel=1e-9)
    assert stats.one_thousandth == pytest.approx(float(np.mean((d < 0.001 * t) | (d == 0))), rel=1e-12)
    assert stats.five_thousandths == pytest.approx(float(np.mean((d < 0.005 * t) | (d == 0))), rel=1e-12)
    assert 0 < stats.one_thousandth <= stats.five_thousandths <= 1


_ELEMENT_DTYPES = [np.float64, np.float32, np.float16]


@hypothesis.settings(
    max_examples=300, deadline=None, derandomize=True, database=None
)  # fails only on a change
@hypothesis.given(
    data=st.data(),
    size=st.integers(0, 5000),
    dtypes=st.tuples(st.sampled_from(_ELEMENT_DTYPES), st.sampled_from(_ELEMENT_DTYPES)),
    tolerances=st.sampled_from([(1e-4, 1e-4), (0.0, 0.0), (1e-2, 0.0), (0.0, 1e-3)]),
    equal_nan=st.booleans(),
)
def test_c_kernel_equals_numpys_on_any_values(data, size, dtypes, tolerances, equal_nan) -> None:
    """Every count and maximum as numpy's kernel gives it, exactly; every sum to rounding.

    Values drawn from everything a float can hold (NaN, infinities, zeros of both signs,
    subnormals, values too large to square), at any place of the kernel's blocks.
    """
    pair = []
    for dtype in dtypes:
        elements = hnp.from_dtype(np.dtype(dtype), allow_nan=True, allow_infinity=True, allow_subnormal=True)
        pair.append(data.draw(hnp.arrays(dtype, size, elements=elements)))
    if data.draw(st.booleans()):  # mostly-close values, so that the tolerance tests are exercised
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = pair[0].astype(np.float64) * (1 + 1e-3 * data.draw(st.floats(-1, 1)))
            pair[1] = scaled.astype(dtypes[1])
    got = c_kernel.c_stats(pair[0], pair[1], *tolerances, equal_nan)
    want = pair_stats.numpy_stats(pair[0], pair[1], *tolerances, equal_nan)
    exact = ("elements", "close", "finite", "orig_nan", "orig_inf", "target_nan", "target_inf")
    exact += ("max_abs", "max_rel", "rel_1e3", "rel_5e3")
    assert picked(got, exact) == picked(want, exact)
    # the kernels add in different orders: each sum agrees within the rounding bound of a sum of
    # its terms' magnitudes (terms that cancel, as x*y may, leave only that bound)
    x, y = pair[0].astype(np.float64), pair[1].astype(np.float64)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    with np.errstate(over="ignore", invalid="ignore"):
        magnitudes = {
            "sum_abs": np.abs(x - y),
            "dot_ab": np.abs(x * y),
            "dot_aa": x * x,
            "dot_bb": y * y,
            "sum_sq": (x - y) ** 2,
        }
    for name, terms in magnitudes.items():
        mine, theirs = getattr(got, name), getattr(want, name)
        with np.errstate(over="ignore"):
            bound = 1e-12 * max(terms.size, 1) * float(terms.sum())
        if math.isfinite(theirs) and math.isfinite(bound):
            assert abs(mine - theirs) <= bound + 1e-300, name
        elif not math.isfinite(bound):  # terms too large to add: inf, or NaN for inf - inf
            continue
        else:
            assert not math.isfinite(mine), name
