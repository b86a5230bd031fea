"""Spec 002 scenario 4 and spec 003's compare examples, run as written with MindSpore tensors."""

from __future__ import annotations

import os
import tempfile

import mindspore
import mindspore as ms

import tscore as ts
from tscore.compare import PairStatus


def test_spec002_compare_by_number(capsys):
    data1 = ms.ops.randn((2, 3))
    data2 = ms.ops.randn((3, 5))
    cache_dir1 = tempfile.TemporaryDirectory(prefix="ta")
    cache_dir2 = tempfile.TemporaryDirectory(prefix="tb")
    path1 = cache_dir1.name
    path2 = cache_dir2.name

    ts.save(os.path.join(path1, "data"), [data1, data2])
    ts.save(os.path.join(path2, "data"), [data1, data1])
    name_map = ts.migrator.get_name_map_list_by_number(path1, path2)
    report = ts.migrator.compare_npy_dir(path1, path2, name_map_list=name_map)

    assert name_map == [("0_data_0.npy", "1_data_0.npy"), ("0_data_1.npy", "1_data_1.npy")]
    assert [p.status for p in report.pairs] == [PairStatus.OK, PairStatus.SHAPE_MISMATCH]
    assert report.pairs[0].cosine == 1.0 and report.pairs[0].max_abs_diff == 0.0
    assert report.pairs[0].orig_dtype == "Float32"  # MindSpore's spelling, from tscore_meta.jsonl
    out = capsys.readouterr().out
    assert "The list of comparison results" in out and "Shape is inconsistent" in out
    cache_dir1.cleanup()
    cache_dir2.cleanup()


def test_spec003_three_mappings_with_mindspore_tensors():
    data0 = mindspore.ops.randn((2, 3))
    data1 = mindspore.ops.randn((3, 5))
    data2 = mindspore.ops.randn((5, 5))
    path1 = tempfile.mkdtemp(prefix="ta")
    path2 = tempfile.mkdtemp(prefix="tb")

    ts.save(os.path.join(path1, "data"), [data0, data1, data2])
    ts.save(os.path.join(path2, "data"), [data0, data2])

    by_name = ts.migrator.get_name_map_list_by_name(path1, path2)
    by_number = ts.migrator.get_name_map_list_by_number(path1, path2)
    by_edit_shape = ts.migrator.get_name_map_list_by_shape_edit_distance(path1, path2)
    assert by_name == [
        ("0_data_0.npy", None),
        ("0_data_1.npy", None),
        ("0_data_2.npy", None),
        (None, "1_data_0.npy"),
        (None, "1_data_1.npy"),
    ]
    assert by_number == [
        ("0_data_0.npy", "1_data_0.npy"),
        ("0_data_1.npy", "1_data_1.npy"),
        ("0_data_2.npy", None),
    ]
    assert by_edit_shape == [
        ("0_data_0.npy", "1_data_0.npy"),
        ("0_data_1.npy", None),
        ("0_data_2.npy", "1_data_1.npy"),
    ]
    report = ts.migrator.compare_npy_dir(path1, path2, name_map_list=by_edit_shape, print_level=0)
    assert [p.passed for p in report.pairs] == [True, False, True]


def test_bfloat16_tensor_against_its_float32_twin(tmp_path):
    x = ms.Tensor([[1.5, -2.25], [3.0, 0.125]], dtype=ms.float32)
    ts.save(str(tmp_path / "a" / "x"), x.astype(ms.bfloat16), auto_id=False)
    ts.save(str(tmp_path / "b" / "x"), x, auto_id=False)
    (row,) = ts.migrator.compare_npy_dir(tmp_path / "a", tmp_path / "b", print_level=0).pairs
    assert (row.orig_dtype, row.target_dtype) == ("BFloat16", "Float32")
    assert row.status is PairStatus.DTYPE_MISMATCH and row.max_abs_diff == 0.0 and row.passed
