"""MindSpore tensors and Parameters to numpy and back, through the plugin hooks."""

import mindspore as ms
import ml_dtypes
import numpy as np
import pytest

import tscore as ts


@pytest.mark.parametrize(
    ("dtype", "np_dtype"),
    [
        (ms.float32, np.float32),
        (ms.float64, np.float64),
        (ms.float16, np.float16),
        (ms.int8, np.int8),
        (ms.int32, np.int32),
        (ms.int64, np.int64),
        (ms.uint8, np.uint8),
        (ms.bool_, np.bool_),
        (ms.complex64, np.complex64),
    ],
)
def test_dtypes_are_kept(dtype, np_dtype):
    values = np.array([[0, 1, 2], [1, 0, 1]])
    a = ts.to_numpy(ms.Tensor(values, dtype))
    assert a.dtype == np_dtype and a.shape == (2, 3)
    np.testing.assert_array_equal(a, values.astype(np_dtype))


def test_bfloat16_becomes_ml_dtypes_bfloat16():
    values = np.array([1.5, -2.25, 3.0e38], np.float32)
    a = ts.to_numpy(ms.Tensor(values, ms.bfloat16))
    # MindSpore hands out a bfloat16 numpy type of its own; tscore gives ml_dtypes'.
    assert a.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(a.astype(np.float32), values.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_parameter_zero_d_and_no_shared_memory():
    p = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), name="w")
    assert ts.is_tensor(p)
    np.testing.assert_array_equal(ts.to_numpy(p), np.ones(3))
    assert ts.to_numpy(ms.Tensor(2.5, ms.float32)).shape == ()
    t = ms.Tensor(np.zeros(3, np.float32))
    a = ts.to_numpy(t)
    t[0] = 9.0
    np.testing.assert_array_equal(a, np.zeros(3))


def test_tensor_meta():
    meta = ts.tensor_meta(ms.Tensor(np.ones((2, 3)), ms.bfloat16))
    assert meta.framework == "mindspore" and meta.dtype == "bfloat16" and meta.native_dtype == "BFloat16"
    assert meta.shape == (2, 3) and meta.device.upper().startswith("CPU")


@pytest.mark.parametrize("dtype", [np.float32, np.int32, ml_dtypes.bfloat16])
def test_from_numpy_round_trip(dtype):
    a = np.array([1, -2, 3], dtype=np.float32).astype(dtype)
    t = ts.from_numpy(a, "mindspore")
    assert isinstance(t, ms.Tensor)
    back = ts.to_numpy(t)
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back.astype(np.float32), a.astype(np.float32))
