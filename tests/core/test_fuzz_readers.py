"""Every file reader of the core against damaged input (Hypothesis): its own clear error, never a crash.

Each reader gets damaged copies of a valid file of its format (cut short, bits flipped, bytes inserted,
overwritten or removed, a size field made huge, random bytes) and must return or raise its own error
class. The examples run in a forked child with 2 GiB of address space and a time limit
(:func:`tscore.testing.fuzzing.run_isolated`), so a reader that crashes the interpreter, hangs, or
tries to allocate what a tiny file declares (10**12 elements) fails the test instead of ending the run.
``TSCORE_FUZZ_EXAMPLES`` sets the examples per reader (60 here; ``nox -s fuzz`` runs 2,000).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tscore as ts
from tscore.checkpoint.ckpt_format import read_ckpt, write_ckpt
from tscore.checkpoint.safetensors_format import read_safetensors, write_safetensors
from tscore.compare.npy_layout import NpyReadError, array_from_bytes, map_flat, read_npy, read_npy_layout
from tscore.contract.checkpoints import CheckpointReadError
from tscore.dump.config import make_config
from tscore.dump.recorder import DumpRecorder, finish_record
from tscore.dump.writer import DumpWriter
from tscore.dump_compare.calls import DumpReadError
from tscore.dump_compare.compare import compare_dumps
from tscore.dump_compare.sources import read_dump
from tscore.dump_format.reading import find_records, summarise
from tscore.safe_pickle import restricted_unpickle
from tscore.testing.fuzzing import fuzz_file, fuzz_settings, run_isolated

SETTINGS = fuzz_settings()
_fuzz = fuzz_file


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "array",
    [np.arange(12, dtype=np.float32).reshape(3, 4), np.asfortranarray(np.ones((2, 3))), np.float64(3.5)],
    ids=["c-order", "fortran", "0-d"],
)
def test_npy_headers_and_bodies(tmp_path, array):
    def read(path: Path) -> None:
        layout, data = read_npy(str(path), 1 << 16)  # what compare does: the header, then the data
        assert data is not None
        values = array_from_bytes(layout, data)
        assert values.size == layout.size
        map_flat(layout).sum()

    _fuzz(_npy_bytes(np.asarray(array)), tmp_path / "x.npy", read, NpyReadError)


def test_npy_headers_of_any_values(tmp_path):
    """Structured damage: shapes with negative, huge or odd entries, any descr, any fortran_order."""
    target = tmp_path / "x.npy"
    dims = st.one_of(
        st.integers(-3, 8), st.sampled_from([2**31, 2**32, 2**63, 10**12, 10**30]), st.text(max_size=3)
    )
    descrs = st.sampled_from(
        ["<f4", ">f8", "|b1", "<i8", "|O", "<U3", "<c8", "|V2", "[('a', '<f4')]", "x", ""]
    )

    def check() -> None:
        @SETTINGS
        @given(st.lists(dims, max_size=4), descrs, st.sampled_from(["False", "True", "1", "None"]))
        def one(shape: list[object], descr: str, fortran: str) -> None:
            dims_text = ", ".join(map(repr, shape))
            text = f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': ({dims_text},), }}"
            header = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode()
            target.write_bytes(header + bytes(96))
            try:
                layout, data = read_npy(str(target), 1 << 16)
            except NpyReadError:
                return
            assert data is not None and array_from_bytes(layout, data).size == layout.size
            assert layout.size == int(np.prod(layout.shape)) and layout.size >= 0

        one()

    run_isolated(check)


def test_compare_npy_dir_turns_every_damaged_file_into_a_row(tmp_path):
    seed = _npy_bytes(np.arange(6, dtype=np.float32))
    good = tmp_path / "good"
    good.mkdir()
    (good / "0_x.npy").write_bytes(seed)
    bad = tmp_path / "bad"
    bad.mkdir()

    def compare(path: Path) -> None:
        rows = ts.migrator.compare_npy_dir(good, bad, print_level=0).pairs
        assert len(rows) == 1 and rows[0].status.value in {"ok", "mismatch", "shape_mismatch", "unreadable"}

    _fuzz(seed, bad / "0_x.npy", compare, ())  # type: ignore[arg-type]


def test_the_meta_side_file(tmp_path):
    ts.save(str(tmp_path / "x"), [np.zeros(2, np.float32), np.ones(3)])
    seed = (tmp_path / "tscore_meta.jsonl").read_bytes()

    def compare(path: Path) -> None:
        report = ts.migrator.compare_npy_dir(tmp_path, tmp_path, print_level=0)
        assert report.total == 2

    _fuzz(seed, tmp_path / "tscore_meta.jsonl", compare, ())  # type: ignore[arg-type]


def test_mindspore_ckpt(tmp_path):
    write_ckpt(
        {"conv.weight": np.ones((2, 3), np.float32), "step": np.array([7], np.int32)}, tmp_path / "s.ckpt"
    )
    seed = (tmp_path / "s.ckpt").read_bytes()
    _fuzz(seed, tmp_path / "x.ckpt", lambda p: read_ckpt(p), CheckpointReadError)


def test_safetensors(tmp_path):
    write_safetensors(
        {"w": np.ones((2, 3), np.float32), "b": np.arange(3, dtype=np.int64)}, tmp_path / "s.st"
    )
    seed = (tmp_path / "s.st").read_bytes()
    _fuzz(seed, tmp_path / "x.safetensors", read_safetensors, CheckpointReadError)


def test_safetensors_headers_of_any_json(tmp_path):
    """Structured damage: every JSON value in every place of the header."""
    target = tmp_path / "x.safetensors"
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )

    def check() -> None:
        @SETTINGS
        @given(json_values, st.sampled_from(["dtype", "shape", "data_offsets", "w", "__metadata__"]))
        def one(value: object, key: str) -> None:
            entry: dict[str, object] = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
            header = {"w": {**entry, key: value}} if key in entry else {"w": entry, key: value}
            text = json.dumps(header).encode()
            target.write_bytes(len(text).to_bytes(8, "little") + text + bytes(8))
            try:
                read_safetensors(target)
            except CheckpointReadError:
                pass

        one()

    run_isolated(check)


def test_restricted_unpickle(tmp_path):
    import pickle

    seed = pickle.dumps({"w": np.ones((2, 3), np.float32), "names": ["a", "b"], "n": 3}, protocol=2)
    _fuzz(seed, tmp_path / "x.pkl", lambda p: restricted_unpickle(p.read_bytes()), pickle.UnpicklingError)


def test_tiny_files_that_declare_huge_arrays_are_refused_before_allocation(tmp_path):
    """A declared size of 10**12 elements ends in the reader's error, under a 2 GiB address-space limit."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }"
    npy = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
    st_header = json.dumps({"w": {"dtype": "F32", "shape": [10**6, 10**6], "data_offsets": [0, 4 * 10**12]}})
    safetensors = len(st_header).to_bytes(8, "little") + st_header.encode()

    def check() -> None:
        (tmp_path / "big.npy").write_bytes(npy)
        with pytest.raises(NpyReadError, match="truncated"):
            read_npy_layout(str(tmp_path / "big.npy"))
        (tmp_path / "big.safetensors").write_bytes(safetensors)
        with pytest.raises(CheckpointReadError, match="past the end"):
            read_safetensors(tmp_path / "big.safetensors")

    run_isolated(check)


# ---------------------------------------------------------------- dumps


class _Layer:
    """Stands for a framework's layer in module events."""


def _tscore_dump(folder: Path) -> Path:
    """Write a real tscore dump of a few numpy calls (tensors kept) with the dump's own recorder."""
    config = make_config({"dump_path": str(folder), "task": "tensor"})
    recorder = DumpRecorder(config, DumpWriter(str(folder), finish_record))
    for module, prefix, api in [("a", "Torch", "relu"), ("b", "Tensor", "add"), ("", "Functional", "linear")]:
        if module:
            recorder.enter(module, _Layer(), (), {})
        x = np.arange(4, dtype=np.float32)
        token = recorder.begin(prefix, api, (x, 2), {"axis": 0})
        if token is not None:
            recorder.end(token, x * 2)
            recorder.backward(token, (np.ones(4, np.float32),), (np.full(4, 2.0, np.float32), None))
        if module:
            recorder.leave(module, _Layer(), None)
    recorder.writer.close()
    (folder / "dump_info.json").write_text(json.dumps({"config": {"task": "tensor"}, "rank": 0}))
    return folder


@pytest.mark.parametrize("damaged_file", ["dump.jsonl", "stack.jsonl", "dump_info.json", "tensor"])
def test_tscore_dumps(tmp_path, damaged_file):
    folder = _tscore_dump(tmp_path / "dump")
    reference = _tscore_dump(tmp_path / "reference")
    target = next((folder / "tensors").iterdir()) if damaged_file == "tensor" else folder / damaged_file
    seed = target.read_bytes()

    def read(path: Path) -> None:
        read_dump(folder)
        find_records(str(folder))
        summarise(str(folder))
        compare_dumps(folder, reference, print_level=0)

    _fuzz(seed, target, read, DumpReadError)


MSPROBE = {
    "task": "tensor",
    "level": "L1",
    "framework": "pytorch",
    "dump_data_dir": None,
    "data": {
        "Torch.relu.0.forward": {
            "input_args": [
                {
                    "type": "torch.Tensor",
                    "dtype": "torch.float32",
                    "shape": [2, 3],
                    "Max": 1.0,
                    "Min": -1.0,
                    "Mean": 0.0,
                    "Norm": 2.0,
                    "requires_grad": False,
                    "data_name": "Torch.relu.0.forward.input.0.npy",
                }
            ],
            "input_kwargs": {"inplace": {"type": "bool", "value": False}},
            "output": [
                {
                    "type": "torch.Tensor",
                    "dtype": "torch.float32",
                    "shape": [2, 3],
                    "Max": 1.0,
                    "Min": 0.0,
                    "Mean": 0.5,
                    "Norm": 1.5,
                    "data_name": "Torch.relu.0.forward.output.0.npy",
                }
            ],
        }
    },
}


def test_msprobe_dump_json(tmp_path):
    folders = [tmp_path / run / "step0" / "rank0" for run in ("damaged", "reference")]
    seed = json.dumps(MSPROBE, indent=1).encode()
    for folder in folders:
        (folder / "dump_tensor_data").mkdir(parents=True)
        for name in ("Torch.relu.0.forward.input.0.npy", "Torch.relu.0.forward.output.0.npy"):
            np.save(folder / "dump_tensor_data" / name, np.ones((2, 3), np.float32))
        (folder / "stack.json").write_text(
            json.dumps({"0": [["Torch.relu.0.forward"], ["File a.py, line 1"]]})
        )
        (folder / "dump.json").write_bytes(seed)

    def read(path: Path) -> None:
        read_dump(folders[0])
        compare_dumps(folders[0], folders[1], print_level=0)  # read in step when the names agree

    _fuzz(seed, folders[0] / "dump.json", read, DumpReadError)


def test_msprobe_records_of_any_json(tmp_path):
    """Structured damage: any JSON value in place of any field of a call."""
    folder = tmp_path / "rank0"
    folder.mkdir()
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=16,
    )
    fields = ["input_args", "input_kwargs", "output", "type", "dtype", "shape", "Max", "data_name", "data"]

    def check() -> None:
        @SETTINGS
        @given(json_values, st.sampled_from(fields))
        def one(value: object, key: str) -> None:
            document = json.loads(json.dumps(MSPROBE))
            call = document["data"]["Torch.relu.0.forward"]
            if key in call:
                call[key] = value
            elif key == "data":
                document["data"] = value
            else:
                call["input_args"][0][key] = value
            (folder / "dump.json").write_text(json.dumps(document))
            try:
                read_dump(folder)
            except DumpReadError:
                pass

        one()

    run_isolated(check)


def test_ptdbg_pkl_lines(tmp_path):
    lines = [
        ["Torch_relu_0_forward_input.0", 1, [], "torch.float32", [2, 3], [1.0, -1.0, 0.0]],
        ["Torch_relu_0_forward_output", 1, [], "torch.float32", [2, 3], [1.0, 0.0, 0.5]],
        ["Torch_relu_0_forward_stack_info", [["a.py", 1, "f", "x = relu(y)"]]],
    ]
    seed = "".join(json.dumps(line) + "\n" for line in lines).encode()
    pkl = tmp_path / "api_stack.pkl"
    _fuzz(seed, pkl, lambda p: read_dump(pkl), DumpReadError)


def test_a_record_cannot_reach_a_file_outside_the_dump(tmp_path):
    folder = _tscore_dump(tmp_path / "dump")
    secret = tmp_path / "secret.npy"
    np.save(secret, np.zeros(4, np.float32))
    records = [json.loads(line) for line in (folder / "dump.jsonl").read_text().splitlines()]
    for record in records:
        for entry in record.get("outputs", []):
            if entry.get("file"):
                entry["file"] = "../secret.npy"
    (folder / "dump.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    items = [item for call in read_dump(folder).calls for item in call.outputs if item.error]
    assert items and all(item.file is None and "outside the dump folder" in item.error for item in items)
