"""Torch tensors to numpy and back, through the plugin hooks."""

import ml_dtypes
import numpy as np
import pytest
import torch

import tscore as ts


@pytest.mark.parametrize(
    ("dtype", "np_dtype"),
    [
        (torch.float32, np.float32),
        (torch.float64, np.float64),
        (torch.float16, np.float16),
        (torch.int8, np.int8),
        (torch.int32, np.int32),
        (torch.int64, np.int64),
        (torch.uint8, np.uint8),
        (torch.bool, np.bool_),
        (torch.complex64, np.complex64),
        (torch.complex128, np.complex128),
    ],
)
def test_dtypes_are_kept(dtype, np_dtype):
    t = (torch.arange(6) % 3).to(dtype).reshape(2, 3)
    a = ts.to_numpy(t)
    assert a.dtype == np_dtype and a.shape == (2, 3)
    np.testing.assert_array_equal(a, t.numpy())


def test_bfloat16_becomes_ml_dtypes_not_float32():
    t = torch.tensor([1.5, -2.25, 1e38, float("inf")], dtype=torch.bfloat16)
    a = ts.to_numpy(t)
    assert a.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(a.astype(np.float32), t.float().numpy())


def test_float8_becomes_ml_dtypes():
    t = torch.tensor([0.5, -3.0, 448.0]).to(torch.float8_e4m3fn)
    a = ts.to_numpy(t)
    assert a.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(a.astype(np.float32), t.float().numpy())


def test_requires_grad_non_contiguous_zero_d_and_conjugate_views():
    leaf = torch.arange(12.0, requires_grad=True)
    view = (leaf * 2).reshape(3, 4).t()[::2]
    assert not view.is_contiguous()
    np.testing.assert_array_equal(ts.to_numpy(view), view.detach().numpy())
    zero_d = torch.tensor(3.5)
    assert ts.to_numpy(zero_d).shape == () and ts.to_numpy(zero_d) == 3.5
    c = torch.tensor([1 + 2j, 3 - 1j]).conj()
    np.testing.assert_array_equal(ts.to_numpy(c), np.array([1 - 2j, 3 + 1j]))
    np.testing.assert_array_equal(ts.to_numpy(torch.nn.Parameter(torch.ones(2))), np.ones(2))


def test_complex32_widens_to_complex64():
    t = torch.tensor([1 + 2j], dtype=torch.complex32)
    a = ts.to_numpy(t)
    assert a.dtype == np.complex64 and a[0] == 1 + 2j


def test_result_does_not_share_memory_with_the_tensor():
    t = torch.zeros(3)
    a = ts.to_numpy(t)
    t.add_(5)
    np.testing.assert_array_equal(a, np.zeros(3))


def test_meta_device_is_refused_with_a_clear_error():
    with pytest.raises(ts.UnsupportedObjectError, match="meta"):
        ts.to_numpy(torch.empty(2, device="meta"))


def test_tensor_meta():
    meta = ts.tensor_meta(torch.ones(2, 3, dtype=torch.bfloat16))
    assert meta.framework == "torch" and meta.dtype == "bfloat16" and meta.native_dtype == "torch.bfloat16"
    assert meta.shape == (2, 3) and meta.device == "cpu"


@pytest.mark.parametrize("dtype", [np.float32, np.int64, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2])
def test_from_numpy_round_trip(dtype):
    a = np.array([1, -2, 3], dtype=np.float32).astype(dtype)
    t = ts.from_numpy(a, "torch")
    assert isinstance(t, torch.Tensor)
    back = ts.to_numpy(t)
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back.astype(np.float32), a.astype(np.float32))


def test_sparse_and_quantized():
    sparse = torch.eye(3).to_sparse()
    np.testing.assert_array_equal(ts.to_numpy(sparse), np.eye(3, dtype=np.float32))
    q = torch.quantize_per_tensor(torch.tensor([0.5, 1.0]), scale=0.5, zero_point=0, dtype=torch.qint8)
    np.testing.assert_array_equal(ts.to_numpy(q), np.array([0.5, 1.0], np.float32))
