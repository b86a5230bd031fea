"""``ts.save(..., output_mode="print")`` and ``ts.widget.save_convert``: a print becomes the same files.

tscore prints every element with the digits that read it back, so converting the print gives
the arrays that ``output_mode="npy"`` writes, bit for bit; a print cut short or summarised is
an error row naming the tensor, and the rest is converted.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tscore as ts
from tscore.errors import TargetPathError

ARRAYS = {
    "f32": np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32),
    "f64": np.array([0.1, 1e300, -np.inf, np.nan, -0.0]),
    "f16": np.array([1.5, -2.25, 65504], dtype=np.float16),
    "bf16": np.array([1.5, 3.140625, -1e30], dtype=ml_dtypes.bfloat16),
    "i64": np.array([[-3, 2**62 + 1, 9007199254740993], [0, -(2**63), 2**63 - 1]], dtype=np.int64),
    "u8": np.array([0, 255], dtype=np.uint8),
    "flag": np.array([True, False]),
    "scalar": np.array(2.5, dtype=np.float32),
}


def _print_all(capsys, layout: str = "spec003") -> str:
    ts.reset_save_id()
    ts.save("run/l", [ARRAYS["f32"], ARRAYS["f64"]], output_mode="print", layout=layout)
    ts.save(
        "run/d",
        {k: v for k, v in ARRAYS.items() if k not in ("f32", "f64")},
        output_mode="print",
        layout=layout,
    )
    return capsys.readouterr().out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_printed_tensors_convert_to_the_files_npy_mode_writes_bit_for_bit(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "printed.log").write_text("epoch 1 begins\n" + _print_all(capsys) + "epoch 1 ends\n")
    assert not (tmp_path / "run").exists()  # printing writes nothing
    rows = ts.widget.save_convert(tmp_path / "printed.log", tmp_path / "converted")
    assert [r.name for r in rows] == ["l_0", "l_1", *(f"d_{k}" for k in ARRAYS if k not in ("f32", "f64"))]
    assert all(r.error is None for r in rows)
    ts.reset_save_id()
    ts.save("npy/l", [ARRAYS["f32"], ARRAYS["f64"]])
    ts.save("npy/d", {k: v for k, v in ARRAYS.items() if k not in ("f32", "f64")})
    report = ts.migrator.compare_dict_dir(
        tmp_path / "npy", tmp_path / "converted", equal_nan=True, print_level=0
    )
    assert report.counts["ok"] == len(ARRAYS) and report.passed
    for pair in report.pairs:
        saved = np.load(tmp_path / "npy" / pair.orig_name)
        converted = np.load(tmp_path / "converted" / pair.target_name)
        assert _same(saved, converted), pair.orig_name


def test_with_troubleshooters_layout_the_converted_names_are_those_npy_mode_writes(tmp_path, capsys):
    (tmp_path / "printed.log").write_text(_print_all(capsys, layout="1.0.18"))
    ts.widget.save_convert(tmp_path / "printed.log", tmp_path / "converted")
    ts.reset_save_id()
    ts.save(str(tmp_path / "npy" / "l"), [ARRAYS["f32"], ARRAYS["f64"]], layout="1.0.18")
    ts.save(
        str(tmp_path / "npy" / "d"),
        {k: v for k, v in ARRAYS.items() if k not in ("f32", "f64")},
        layout="1.0.18",
    )
    assert sorted(p.name for p in (tmp_path / "converted").glob("*.npy")) == sorted(
        p.name for p in (tmp_path / "npy").glob("*.npy")
    )


def test_a_print_cut_mid_tensor_converts_what_is_whole(tmp_path, capsys):
    text = _print_all(capsys)
    cut = text[: text.index("_TS_SAVE_NAME:d_i64") + 60]  # inside the int64 tensor's values
    (tmp_path / "cut.log").write_text(cut)
    rows = ts.widget.save_convert(tmp_path / "cut.log", tmp_path / "out")
    assert [r.name for r in rows if r.error is None] == ["l_0", "l_1", "d_f16", "d_bf16"]
    assert rows[-1].name == "d_i64" and "cut short" in rows[-1].error
    assert len(list((tmp_path / "out").glob("*.npy"))) == 4


def test_a_summarised_or_damaged_print_is_an_error_row(tmp_path, caplog):
    (tmp_path / "p.log").write_text(
        "_TS_SAVE_NAME:big\nTensor(shape=[40, 50], dtype=Float32, value=\n"
        "[[ 1.0 2.0 ... 3.0]\n ...\n [ 4.0 ... 5.0]])\n"
        "_TS_SAVE_NAME:wrong\nTensor(shape=[3], dtype=Int32, value=[1 2])\n"
        "_TS_SAVE_NAME:ok\nTensor(shape=[2], dtype=Int32, value=[1, 2])\n"
        "_TS_SAVE_NAME:bare\n-56.0512\n"
    )
    rows = {r.name: r for r in ts.widget.save_convert(tmp_path / "p.log", tmp_path / "out")}
    assert "summarised" in rows["big"].error and rows["big"].file is None
    assert "2 values printed for the shape [3]" in rows["wrong"].error
    assert np.array_equal(
        np.load(rows["ok"].file), np.array([1, 2], dtype=np.int32)
    )  # commas: the VM's layout
    assert rows["bare"].file.endswith("3_bare.npy") and float(np.load(rows["bare"].file)) == -56.0512
    assert "'big'" in caplog.text and "line 1" in caplog.text


def test_bad_arguments_are_clear_errors(tmp_path, capsys):
    with pytest.raises(TargetPathError, match=r"missing\.log"):
        ts.widget.save_convert(tmp_path / "missing.log", tmp_path / "out")
    (tmp_path / "plain.log").write_text("no markers here\n")
    assert ts.widget.save_convert(tmp_path / "plain.log", tmp_path / "out") == []
    with pytest.raises(ValueError, match="output_mode"):
        ts.save(str(tmp_path / "x"), np.zeros(1), output_mode="screen")


def test_the_runs_own_output_between_marker_and_value_is_skipped_and_bad_markers_are_rows(tmp_path):
    (tmp_path / "p.log").write_text(
        "_TS_SAVE_NAME:x\n3 it/s\nTensor(shape=[2], dtype=Int32, value=[1 2])\n"
        "_TS_SAVE_NAME:\nTensor(shape=[1], dtype=Int32, value=[5])\n"
        "_TS_SAVE_NAME:flags\nTensor(shape=[2], dtype=Bool, value=[True Maybe])\n"
        "_TS_SAVE_NAME:y\n2.5\n"
        "_TS_SAVE_NAME:huge\nTensor(shape=[2], dtype=Float32, value=[1e39 1.0])\n"
        "_TS_SAVE_NAME:byte\nTensor(shape=[1], dtype=UInt8, value=[300])\n"
    )
    rows = ts.widget.save_convert(tmp_path / "p.log", tmp_path / "out")
    assert np.array_equal(np.load(rows[0].file), np.array([1, 2], dtype=np.int32))  # not the "3" of "3 it/s"
    assert rows[1].file is None and "names nothing" in rows[1].error
    assert rows[2].file is None and "Maybe" in rows[2].error
    assert float(np.load(rows[3].file)) == 2.5
    assert rows[4].file is None and "1e+39 does not fit float32" in rows[4].error  # not a silent inf
    assert rows[5].file is None and "300" in rows[5].error
