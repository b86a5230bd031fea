"""save() on numpy data: naming, ids, folders, atomic writes and bad input."""

import json
import os
import threading
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tscore as ts
from tests.conftest import npy_names
from tscore import folder_writers, npy_files


def test_single_list_dict_and_ids(tmp_path):
    x = np.arange(3, dtype=np.float32)
    ts.save(tmp_path / "t", x)
    ts.save(tmp_path / "t", x * 2)
    ts.save(tmp_path / "t", [x, x])
    ts.save(tmp_path / "t", {"x1": x, "x2": x})
    assert npy_names(tmp_path) == [
        "0_t.npy",
        "1_t.npy",
        "2_t_0.npy",
        "2_t_1.npy",
        "3_t_x1.npy",
        "3_t_x2.npy",
    ]
    np.testing.assert_array_equal(np.load(tmp_path / "1_t.npy"), x * 2)


def test_returns_the_paths_written(tmp_path):
    paths = ts.save(str(tmp_path / "a"), {"k": np.ones(2)}, suffix="s")
    assert paths == [str(tmp_path / "0_a_k_s.npy")]


def test_nested_containers_and_none_entries(tmp_path):
    data = {"a": [np.ones(1), None, np.zeros(2)], "b": None, "c": {"d": (np.ones(3),)}}
    ts.save(tmp_path / "n", data)
    assert npy_names(tmp_path) == ["0_n_a_0.npy", "0_n_a_2.npy", "0_n_c_d_0.npy"]


def test_none_data_still_takes_one_id(tmp_path):
    assert ts.save(tmp_path / "a", None) == []
    ts.save(tmp_path / "b", np.ones(1))
    assert npy_names(tmp_path) == ["1_b.npy"]


def test_auto_id_false_and_suffix(tmp_path):
    ts.save(tmp_path / "data", [np.ones(1), np.ones(2)], auto_id=False)
    ts.save(tmp_path / "g", np.ones(1), suffix="torch")
    # a call without an id takes none from the counter
    assert npy_names(tmp_path) == ["0_g_torch.npy", "data_0.npy", "data_1.npy"]


def test_no_file_name_uses_shape_in_current_folder(in_tmp):
    ts.save(None, {"x1": np.ones(2), "x2": np.ones((2, 1))}, suffix="torch")
    ts.save("", np.ones(()))
    assert npy_names(in_tmp) == [
        "0_tensor_(2, 1)_x2_torch.npy",
        "0_tensor_(2,)_x1_torch.npy",
        "1_tensor_().npy",
    ]


def test_folders_are_created(tmp_path):
    ts.save(tmp_path / "a" / "b" / "c" / "x", np.ones(1))
    assert (tmp_path / "a" / "b" / "c" / "0_x.npy").is_file()


def test_keys_cannot_leave_the_folder(tmp_path):
    target = tmp_path / "inner"
    ts.save(target / "x", {"../../escape": np.ones(1), "a/b": np.ones(1)})
    assert npy_names(target) == ["0_x_.._.._escape.npy", "0_x_a_b.npy"]
    assert list(tmp_path.glob("*.npy")) == []


def test_keys_that_collide_after_cleaning_are_refused(tmp_path):
    with pytest.raises(ts.InvalidNameError, match=r"0_x_a_b\.npy"):
        ts.save(tmp_path / "x", {"a/b": np.ones(1), "a_b": np.ones(1)})
    assert npy_names(tmp_path) == []


@pytest.mark.parametrize("bad", [object(), "text", 3.5, {"k": [np.ones(1), set()]}])
def test_unsupported_objects_raise_type_error_naming_the_type(tmp_path, bad):
    with pytest.raises(TypeError, match=r"cannot save an object of type (object|str|float|set)"):
        ts.save(tmp_path / "x", bad)


def test_object_arrays_are_refused(tmp_path):
    with pytest.raises(TypeError, match="object array"):
        ts.save(tmp_path / "x", np.array([{}, 1], dtype=object))


def test_folder_that_cannot_be_created_names_the_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ts.TargetPathError, match=str(blocker)) as err:
        ts.save(blocker / "sub" / "x", np.ones(1))
    assert isinstance(err.value, OSError)


def test_read_only_folder_names_the_path():
    # /proc refuses new files even to root, which chmod cannot arrange.
    with pytest.raises(ts.TargetPathError, match=r"/proc/0_x\.npy"):
        ts.save("/proc/x", np.ones(1))


def test_interrupted_write_leaves_no_file(tmp_path, monkeypatch):
    def explode(stream, array, **kwargs):
        stream.write(b"\x93NUMPY partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np.lib.format, "write_array", explode)
    with pytest.raises(KeyboardInterrupt):
        ts.save(tmp_path / "x", np.ones(1000))
    # Only this live process's writer lock (removed at exit) remains: no data, no temporary file.
    assert [n for n in os.listdir(tmp_path) if n != folder_writers.LOCKS_FOLDER] == []


def test_overwrite_is_atomic_replace(tmp_path):
    ts.save(tmp_path / "x", np.ones(4), auto_id=False)
    ts.save(tmp_path / "x", np.zeros(4), auto_id=False)
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), np.zeros(4))
    assert [p.name for p in tmp_path.iterdir() if folder_writers.TEMP_NAME.match(p.name)] == []


def test_saved_data_does_not_follow_later_in_place_changes(tmp_path):
    x = np.ones(3)
    ts.save(tmp_path / "x", x)
    x[:] = 7
    np.testing.assert_array_equal(np.load(tmp_path / "0_x.npy"), np.ones(3))


def test_ids_are_unique_across_threads(tmp_path):
    def worker(n):
        for _ in range(25):
            ts.save(tmp_path / f"w{n}", np.ones(1))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = sorted(int(name.split("_")[0]) for name in npy_names(tmp_path))
    assert ids == list(range(200))
    lines = (tmp_path / npy_files.META_FILE_NAME).read_text().splitlines()
    assert len(lines) == 200 and all(json.loads(line)["file"] for line in lines)


def test_bfloat16_is_stored_as_float32_with_the_source_dtype_kept(tmp_path):
    x = np.array([1.5, -2.25, 3.0e38], dtype=ml_dtypes.bfloat16)
    ts.save(tmp_path / "b", x)
    loaded = np.load(tmp_path / "0_b.npy")
    assert loaded.dtype == np.float32
    np.testing.assert_array_equal(loaded, x.astype(np.float32))
    meta = npy_files.read_meta(str(tmp_path))["0_b.npy"]
    assert meta["dtype"] == "bfloat16" and meta["stored_dtype"] == "float32"
    assert meta["framework"] == "numpy" and meta["shape"] == [3]


@pytest.mark.parametrize(
    ("dtype", "stored"),
    [(ml_dtypes.float8_e4m3fn, "float32"), (ml_dtypes.float8_e5m2, "float32"), (ml_dtypes.int4, "int8")],
)
def test_other_ml_dtypes_widen_exactly(tmp_path, dtype, stored):
    x = np.array([1, -2, 3], dtype=np.float32).astype(dtype)
    ts.save(tmp_path / "v", x)
    loaded = np.load(tmp_path / "0_v.npy")
    assert loaded.dtype == np.dtype(stored)
    np.testing.assert_array_equal(loaded, x.astype(stored))


def test_every_numpy_dtype_round_trips(tmp_path):
    arrays = {
        "f16": np.array([1.5, np.inf], np.float16),
        "f64": np.array([np.nan]),
        "i8": np.array([-3], np.int8),
        "u64": np.array([2**63], np.uint64),
        "b": np.array([True, False]),
        "c": np.array([1 + 2j], np.complex64),
        "scalar": np.float32(3),
        "empty": np.zeros((0, 3)),
        "strided": np.arange(12.0).reshape(3, 4)[:, ::2],
    }
    ts.save(tmp_path / "d", arrays)
    for key, value in arrays.items():
        loaded = np.load(tmp_path / f"0_d_{key}.npy")
        assert loaded.dtype == np.asarray(value).dtype
        np.testing.assert_array_equal(loaded, value)


def test_meta_side_file_skips_damaged_lines(tmp_path):
    ts.save(tmp_path / "x", np.ones(1))
    with open(tmp_path / npy_files.META_FILE_NAME, "a") as f:
        f.write('{"file": "half-writ')
    assert list(npy_files.read_meta(str(tmp_path))) == ["0_x.npy"]


def test_path_objects_and_npy_suffix_in_file(tmp_path):
    ts.save(Path(tmp_path) / "x.npy", np.ones(1))
    assert npy_names(tmp_path) == ["0_x.npy"]


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.full((), 3.5),  # 0-d stays 0-d
        np.zeros((0, 5), np.int64),
        np.arange(7, dtype=">i4"),  # big-endian keeps its byte order
        np.ones((2, 3), bool),
        np.arange(6).reshape(2, 3).T,  # not contiguous: written in C order
        np.ones((2,) * 13, np.float16),  # a long shape: the header pads past 64 bytes
    ],
    ids=["f32", "0d", "empty", "big-endian", "bool", "transposed", "long-shape"],
)
def test_the_dump_writers_npy_is_byte_for_byte_what_np_save_writes(tmp_path, array):
    """The dump writes its tensors with a cached header; any numpy reads them, as it reads np.save's."""
    ours, theirs = tmp_path / "ours.npy", tmp_path / "theirs.npy"
    npy_files.write_npy_fast(str(ours), array)
    np.save(theirs, array if array.flags.c_contiguous else np.array(array, order="C"))
    assert ours.read_bytes() == theirs.read_bytes()
    back = np.load(ours)
    assert back.dtype == array.dtype and back.shape == array.shape and np.array_equal(back, array)


def test_a_name_that_is_not_utf8_still_gets_its_line_in_the_side_file(tmp_path: Path) -> None:
    """orjson refuses a lone surrogate (a key decoded from bytes that are not UTF-8): json writes it."""
    from tscore.npy_files import read_meta

    key = "a\udcffb"
    (written,) = ts.save(str(tmp_path / "x"), {key: np.ones(2, np.float32)})
    records = read_meta(os.path.dirname(written))
    assert os.path.basename(written) in records
    assert records[os.path.basename(written)]["dtype"] == "float32"
