"""The numpy-only .ckpt and safetensors readers and writers, and loading by file kind."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tscore.checkpoint import ckpt_format
from tscore.checkpoint.ckpt_format import read_ckpt, write_ckpt
from tscore.checkpoint.files import load_checkpoint, save_checkpoint
from tscore.checkpoint.safetensors_format import read_safetensors, write_safetensors
from tscore.contract.checkpoints import CheckpointReadError
from tscore.errors import TargetPathError, UnsupportedObjectError


def sample_params() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "conv.weight": rng.standard_normal((4, 3, 1, 3)).astype(np.float32),
        "bn.gamma": np.linspace(0, 1, 4).astype(np.float16),
        "half": rng.standard_normal(5).astype(ml_dtypes.bfloat16),
        "step": np.array(7, dtype=np.int64),
        "mask": np.array([True, False]),
        "double": np.arange(6, dtype=np.float64).reshape(2, 3),
        "u8": np.arange(3, dtype=np.uint8),
    }


def assert_same(read: dict[str, np.ndarray], written: dict[str, np.ndarray]) -> None:
    assert list(read) == list(written)
    for name, array in written.items():
        assert read[name].dtype == array.dtype, name
        assert read[name].shape == array.shape, name
        np.testing.assert_array_equal(read[name].astype(np.float64), array.astype(np.float64))


@pytest.mark.parametrize("use_mmap", [True, False])
def test_ckpt_round_trip_keeps_order_dtypes_and_0d(tmp_path: Path, use_mmap: bool) -> None:
    params = sample_params()
    write_ckpt(params, tmp_path / "a.ckpt")
    contents = read_ckpt(tmp_path / "a.ckpt", use_mmap=use_mmap)
    assert_same(contents.params, params)
    assert contents.dtypes["half"] == "BFloat16"
    assert contents.dtypes["step"] == "Int64"
    assert contents.skipped == {}


def test_ckpt_split_tensor_is_joined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tensors over the slice size are written as several records with one tag, and read back whole."""
    monkeypatch.setattr(ckpt_format, "SLICE_BYTES", 100)
    big = np.arange(1000, dtype=np.float32).reshape(10, 100)
    write_ckpt({"big": big, "after": np.ones(3, np.float32)}, tmp_path / "split.ckpt")
    data = (tmp_path / "split.ckpt").read_bytes()
    assert data.count(b"\x0a\x03big") == 40  # 4000 bytes in 100-byte slices
    contents = read_ckpt(tmp_path / "split.ckpt")
    np.testing.assert_array_equal(contents.params["big"], big)
    np.testing.assert_array_equal(contents.params["after"], np.ones(3))


def test_ckpt_crc_trailer_is_written_stripped_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "crc.ckpt"
    write_ckpt({"w": np.arange(4, dtype=np.float32)}, path, crc=True)
    data = path.read_bytes()
    assert data[-17:-10] == b"crc_num"
    np.testing.assert_array_equal(read_ckpt(path, check_crc=True).params["w"], np.arange(4))
    damaged = bytearray(data)
    damaged[-20] ^= 0xFF  # a byte of the tensor content: still parses
    path.write_bytes(bytes(damaged))
    assert "w" in read_ckpt(path).params
    with pytest.raises(CheckpointReadError, match=r"CRC-32 .* does not match"):
        read_ckpt(path, check_crc=True)


def test_ckpt_strings_and_unknown_types_are_skipped_with_the_reason(tmp_path: Path) -> None:
    # A string entry as MindSpore writes it: dims [0], tensor_type "str", UTF-32-LE content.
    def value(tag: bytes, dims: list[int], type_name: bytes, content: bytes) -> bytes:
        return ckpt_format._value_header(tag, tuple(dims), type_name, len(content)) + content

    blob = value(b"note", [0], b"str", "hi".encode("utf-32-le"))
    blob += value(b"q", [2], b"Int4", b"\x00")
    blob += value(b"w", [2], b"Float32", np.ones(2, np.float32).tobytes())
    (tmp_path / "mixed.ckpt").write_bytes(blob)
    contents = read_ckpt(tmp_path / "mixed.ckpt")
    assert list(contents.params) == ["w"]
    assert contents.skipped["note"] == "a string ('hi'), not a tensor"
    assert "Int4" in contents.skipped["q"]


def test_truncated_ckpt_names_file_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "t.ckpt"
    write_ckpt({"a": np.ones(100, np.float32), "b": np.ones(100, np.float32)}, path)
    data = path.read_bytes()
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(data[: len(data) - 50])
    with pytest.raises(CheckpointReadError) as info:
        read_ckpt(cut)
    first_record = len(data) // 2
    assert str(cut) in str(info.value)
    assert info.value.offset is not None and info.value.offset >= first_record - 1
    assert f"at byte {info.value.offset}" in str(info.value)


def test_garbage_and_empty_files_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "junk.ckpt").write_bytes(b"\xff\xff\xff\xff hello")
    with pytest.raises(CheckpointReadError, match=r"junk.ckpt: .* at byte 0"):
        read_ckpt(tmp_path / "junk.ckpt")
    (tmp_path / "empty.ckpt").write_bytes(b"")
    with pytest.raises(CheckpointReadError, match="empty"):
        read_ckpt(tmp_path / "empty.ckpt")


def test_ckpt_refuses_float8_before_writing(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedObjectError, match=r"'f8'.*float8_e4m3fn"):
        write_ckpt({"ok": np.ones(2), "f8": np.ones(2, ml_dtypes.float8_e4m3fn)}, tmp_path / "x.ckpt")
    assert list(tmp_path.iterdir()) == []


def test_safetensors_round_trip_and_interop_with_the_reference_library(tmp_path: Path) -> None:
    params = sample_params()
    write_safetensors(params, tmp_path / "ours.safetensors", metadata={"format": "ms"})
    contents = read_safetensors(tmp_path / "ours.safetensors")
    assert_same(contents.params, params)
    assert contents.metadata == {"format": "ms"}
    plain = {k: v for k, v in params.items() if k != "half"}
    theirs = load_file(str(tmp_path / "ours.safetensors"))
    for name, array in plain.items():
        np.testing.assert_array_equal(theirs[name], array)
    save_file(plain, str(tmp_path / "theirs.safetensors"))
    read_back = read_safetensors(tmp_path / "theirs.safetensors").params
    assert_same(dict(sorted(read_back.items())), dict(sorted(plain.items())))


def test_damaged_safetensors_header_names_offset(tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\x00" * 8)  # 8 of 16 bytes
    with pytest.raises(
        CheckpointReadError, match=r"bad.safetensors: tensor 'w' ends past the end .* at byte"
    ):
        read_safetensors(path)
    path.write_bytes((10**6).to_bytes(8, "little") + b"{}")
    with pytest.raises(CheckpointReadError, match="header length 1000000 exceeds the file"):
        read_safetensors(path)


def test_load_checkpoint_picks_reader_by_suffix_or_first_bytes(tmp_path: Path) -> None:
    params = {"w": np.arange(3, dtype=np.float32)}
    save_checkpoint(params, tmp_path / "a.ckpt")
    save_checkpoint(params, tmp_path / "a.safetensors", framework="torch")
    (tmp_path / "a.ckpt").rename(tmp_path / "noext1")
    (tmp_path / "a.safetensors").rename(tmp_path / "noext2")
    assert load_checkpoint(tmp_path / "noext1").format == "ckpt"
    second = load_checkpoint(tmp_path / "noext2")
    assert second.format == "safetensors" and second.metadata == {"format": "pt"}


def test_load_checkpoint_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(CheckpointReadError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.ckpt")
    with pytest.raises(CheckpointReadError, match="is a folder"):
        load_checkpoint(tmp_path)
    (tmp_path / "x.weird").write_bytes(b"\x00\x01\x02")
    with pytest.raises(CheckpointReadError, match=r"no installed plugin reads .*x.weird.*kind unknown"):
        load_checkpoint(tmp_path / "x.weird")


def test_save_checkpoint_bad_targets(tmp_path: Path) -> None:
    with pytest.raises(TargetPathError, match="does not exist"):
        save_checkpoint({"w": np.ones(1)}, tmp_path / "no" / "a.ckpt")
    with pytest.raises(TargetPathError, match="cannot tell which checkpoint format"):
        save_checkpoint({"w": np.ones(1)}, tmp_path / "a.data")
