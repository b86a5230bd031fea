"""The C compare kernel's build: in the wheel where a compiler works, a pure-Python wheel where none does."""

from __future__ import annotations

import functools
import hashlib
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tscore import native_kernel
from tscore.compare import c_kernel, compare_arrays, pair_stats
from tscore.compare.kernels import resolve_kernel

ROOT = Path(__file__).resolve().parents[2]


def build_wheel(folder: Path, **environment: str) -> zipfile.ZipFile:
    """Build tscore's wheel from this checkout as pip does, with this environment's hatchling (no index)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TSCORE_NO_C_KERNEL", "CC")}
    env.update(environment)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    done = subprocess.run(
        [*command, "-w", str(folder), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = folder.glob("tscore-*.whl")
    return zipfile.ZipFile(wheel)


def test_the_wheel_carries_the_kernel_and_a_platform_tag(tmp_path: Path) -> None:
    """A plain C library, no Python C API: one wheel for every Python of the platform."""
    wheel = build_wheel(tmp_path)
    assert "tscore/compare/_pair_kernel.so" in wheel.namelist()
    name = Path(wheel.filename).name
    assert name.startswith("tscore-0.1.0-py3-none-") and not name.endswith("-any.whl")


@pytest.mark.parametrize("environment", [{"TSCORE_NO_C_KERNEL": "1"}, {"CC": "false"}])
def test_without_a_working_compiler_the_wheel_is_pure_python(tmp_path: Path, environment: dict) -> None:
    """``false`` is a compiler that fails on every file: the install goes on without the kernel."""
    wheel = build_wheel(tmp_path, **environment)
    assert Path(wheel.filename).name.endswith("-py3-none-any.whl")
    assert not [name for name in wheel.namelist() if name.endswith(".so")]
    assert "tscore/compare/c_kernel.py" in wheel.namelist()


def test_without_the_library_comparisons_run_on_numpy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What an install with no compiler sees: a reason naming the fix, and the same numbers from numpy."""
    monkeypatch.setattr(native_kernel, "candidates", lambda: [tmp_path / c_kernel.LIBRARY_NAME])
    monkeypatch.setattr(native_kernel, "_kernels", native_kernel._kernels.__wrapped__)
    reason = native_kernel.load_error.__wrapped__()
    assert reason is not None and "not built" in reason and "C compiler" in reason
    monkeypatch.setattr(c_kernel, "load_error", lambda: reason)
    assert resolve_kernel("auto") == "numpy"
    a = np.linspace(-3, 3, 1000)
    row = compare_arrays(a, a + 1e-6)
    assert row.allclose and row.max_abs_diff == pytest.approx(1e-6)


def test_a_library_built_from_another_source_is_not_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A library left by an older build (or another checkout) never computes this tscore's numbers."""
    stale = tmp_path / c_kernel.LIBRARY_NAME
    command = ["cc", "-O1", "-fPIC", "-shared", '-DTSCORE_KERNEL_SOURCE="0123"', "-o", str(stale)]
    subprocess.run([*command, str(c_kernel.SOURCE_PATH), "-lm"], check=True, timeout=120)
    monkeypatch.setattr(native_kernel, "candidates", lambda: [stale])
    monkeypatch.setattr(native_kernel, "_kernels", native_kernel._kernels.__wrapped__)
    reason = native_kernel.load_error.__wrapped__()
    assert reason is not None and "built from another pair_kernel.c" in reason and str(stale) in reason


def test_the_baseline_build_gives_the_same_numbers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without the AVX2 clone (``TSCORE_NO_CLONES``: an older GCC, musl, another CPU), the same results.

    The installed library runs the clone this CPU picks; this builds the baseline alone and checks
    it against numpy's kernel: counts and maxima exactly, sums to rounding.
    """
    digest = hashlib.sha256(c_kernel.SOURCE_PATH.read_bytes()).hexdigest()
    baseline = tmp_path / c_kernel.LIBRARY_NAME
    flags = ["-O3", "-fPIC", "-shared", "-fopenmp-simd", "-ffp-contract=off", "-DTSCORE_NO_CLONES"]
    command = ["cc", *flags, f'-DTSCORE_KERNEL_SOURCE="{digest}"', "-o", str(baseline)]
    subprocess.run([*command, str(c_kernel.SOURCE_PATH), "-lm"], check=True, timeout=120)
    monkeypatch.setattr(native_kernel, "candidates", lambda: [baseline])
    monkeypatch.setattr(native_kernel, "_kernels", functools.cache(native_kernel._kernels.__wrapped__))
    rng = np.random.default_rng(3)
    a = rng.standard_normal(10_000).astype(np.float32)
    b = a + rng.standard_normal(a.size).astype(np.float32) * np.float32(1e-3)
    a[77], b[5000], a[9000] = np.nan, np.inf, 0.0
    got, want = c_kernel.c_stats(a, b, 1e-3, 1e-4, False), pair_stats.numpy_stats(a, b, 1e-3, 1e-4, False)
    high, low, total, squares, nans = native_kernel.c_array_stats(a)  # the statistics' kernel too
    finite = np.delete(a, 77).astype(np.float64)
    assert (high, low, nans) == (finite.max(), finite.min(), 1) and math.isnan(total + squares)
    high, low, total, squares, nans = native_kernel.c_array_stats(finite)
    assert (nans, total, squares) == (0, pytest.approx(finite.sum()), pytest.approx((finite * finite).sum()))
    assert (got.close, got.finite, got.max_abs, got.max_rel, got.rel_1e3, got.orig_nan, got.target_inf) == (
        want.close,
        want.finite,
        want.max_abs,
        want.max_rel,
        want.rel_1e3,
        want.orig_nan,
        want.target_inf,
    )
    assert got.dot_ab == pytest.approx(want.dot_ab, rel=1e-12) and got.sum_sq == pytest.approx(want.sum_sq)
