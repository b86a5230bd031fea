"""torch files against damaged input (Hypothesis): the torch-free ``.pt`` reader and the ``.pth`` loader.

msprobe dumps every tensor as a ``.pt`` that tscore reads without torch; a damaged or crafted one must
end in :class:`TorchZipError`, never in a crash of the interpreter (a negative stride once read outside
the memory map), a hang or a huge allocation. Seeds are real ``torch.save`` files; examples run in a
forked child under a 2 GiB address-space limit (:func:`tscore.testing.fuzzing.run_isolated`).
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tscore.checkpoint.files import load_checkpoint
from tscore.checkpoint.torch_zip import TorchZipError, read_torch_tensor
from tscore.contract.checkpoints import CheckpointReadError
from tscore.testing.fuzzing import fuzz_file, fuzz_settings, run_isolated

SETTINGS = fuzz_settings()


def _saved(tensor: torch.Tensor) -> bytes:
    buffer = io.BytesIO()
    torch.save(tensor, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "tensor",
    [
        torch.arange(12, dtype=torch.float32).reshape(3, 4),
        torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),
        torch.ones(5, dtype=torch.bfloat16),
        torch.tensor(2.5),
    ],
    ids=["contiguous", "transposed", "bfloat16", "0-d"],
)
def test_damaged_pt_files_end_in_torch_zip_error(tmp_path, tensor):
    def read(path: Path) -> None:
        array = read_torch_tensor(str(path))
        np.asarray(array, dtype=np.float64).sum()  # what a comparison does with it

    fuzz_file(_saved(tensor), tmp_path / "x.pt", read, TorchZipError)


class _Tensor:
    """A stand-in that pickles as torch's tensor rebuild with any size, stride and offset."""

    def __init__(self, offset: object, size: object, stride: object) -> None:
        self.args = (offset, size, stride)


class _Storage:
    """Stands for the tensor's storage: pickled as torch's persistent id of a FloatStorage."""


class _CraftedPickler(pickle.Pickler):
    def persistent_id(self, obj: object) -> object:
        return ("storage", torch.FloatStorage, "0", "cpu", 6) if isinstance(obj, _Storage) else None

    def reducer_override(self, obj: object) -> object:
        if isinstance(obj, _Tensor):
            offset, size, stride = obj.args
            rebuild = torch._utils._rebuild_tensor_v2
            return rebuild, (_Storage(), offset, size, stride, False, collections.OrderedDict())
        return NotImplemented


def _crafted(path: Path, offset: object, size: object, stride: object) -> None:
    """Write a .pt whose storage holds 6 float32 and whose pickle rebuilds the given view of it."""
    buffer = io.BytesIO()
    _CraftedPickler(buffer, protocol=2).dump(_Tensor(offset, size, stride))
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/data/0", np.arange(6, dtype=np.float32).tobytes())


def test_the_crafted_file_reads_when_its_view_is_sound(tmp_path):
    _crafted(tmp_path / "ok.pt", 0, (2, 3), (3, 1))
    np.testing.assert_array_equal(read_torch_tensor(str(tmp_path / "ok.pt")), np.arange(6).reshape(2, 3))
    _crafted(tmp_path / "t.pt", 0, (3, 2), (1, 3))
    np.testing.assert_array_equal(read_torch_tensor(str(tmp_path / "t.pt")), np.arange(6).reshape(2, 3).T)


def test_negative_strides_and_views_beyond_the_storage_are_refused(tmp_path):
    """These once read outside the memory map (a segfault) or allocated gigabytes."""
    cases = [
        (0, (2, 3), (-(1 << 40), 1)),  # read 8 TB before the map: SIGSEGV before the fix
        (0, (3,), (-5,)),  # bytes before the buffer, silently
        (0, (10**9,), (0,)),  # 4 GB from 24 bytes
        (0, (10**6, 10**6), (0, 0)),
        (7, (), ()),  # a scalar past its storage
        (-1, (2,), (1,)),
    ]

    def check() -> None:
        for index, (offset, size, stride) in enumerate(cases):
            path = tmp_path / f"bad{index}.pt"
            _crafted(path, offset, size, stride)
            with pytest.raises(TorchZipError, match=str(path)):
                read_torch_tensor(str(path))

    run_isolated(check)


def test_crafted_views_of_any_size_stride_and_offset(tmp_path):
    target = tmp_path / "x.pt"
    number = st.one_of(st.integers(-4, 8), st.sampled_from([-(1 << 40), 1 << 31, 1 << 40, 10**12]))

    def check() -> None:
        @SETTINGS
        @given(number, st.lists(number, max_size=3), st.lists(number, max_size=3))
        def one(offset: int, size: list[int], stride: list[int]) -> None:
            _crafted(target, offset, tuple(size), tuple(stride))
            try:
                array = read_torch_tensor(str(target))
            except TorchZipError:
                return
            assert array.shape == tuple(size)
            np.asarray(array, dtype=np.float64).sum()

        one()

    run_isolated(check)


def test_a_pickle_asking_for_a_huge_memo_is_refused(tmp_path):
    """17 bytes of pickle once made the unpickler allocate gigabytes for its memo table."""
    path = tmp_path / "memo.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02Nr" + (4_000_000_000).to_bytes(4, "little") + b".")

    def check() -> None:
        with pytest.raises(TorchZipError, match="memo slot"):
            read_torch_tensor(str(path))

    run_isolated(check)


def test_damaged_pth_checkpoints_end_in_checkpoint_read_error(tmp_path):
    seed_path = tmp_path / "seed.pth"
    torch.save({"conv.weight": torch.ones(2, 3), "bn.num_batches_tracked": torch.tensor(3)}, seed_path)
    fuzz_file(seed_path.read_bytes(), tmp_path / "x.pth", load_checkpoint, CheckpointReadError)
