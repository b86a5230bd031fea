import os

import pytest

from tscore import naming
from tscore.errors import InvalidNameError


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        (None, (os.curdir, "")),
        ("", (os.curdir, "")),
        ("x", (os.curdir, "x")),
        ("./ms_ts_save/input", ("./ms_ts_save", "input")),
        ("/tmp/save/ms_tensor", ("/tmp/save", "ms_tensor")),
        ("out/", ("out", "")),
        ("out/x.npy", ("out", "x")),
    ],
)
def test_split_target(file, expected):
    assert naming.split_target(file) == expected


def test_clean_part_keeps_names_inside_the_folder():
    assert naming.clean_part("../../etc/passwd", "key") == ".._.._etc_passwd"
    assert naming.clean_part("a\\b\x00c\nd", "key") == "a_b_c_d"
    assert naming.clean_part(3, "key") == "3"
    assert naming.clean_part("fc.weight", "key") == "fc.weight"


def test_clean_part_refuses_empty():
    with pytest.raises(InvalidNameError, match="dict key is empty"):
        naming.clean_part("", "a dict key")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((0, "input", (), None), "0_input.npy"),
        ((2, "dense", (), "backward"), "2_dense_backward.npy"),
        ((3, "ms_tensor", ("x1",), None), "3_ms_tensor_x1.npy"),
        ((2, "tensor_(2,)", ("x1",), "torch"), "2_tensor_(2,)_x1_torch.npy"),
        ((None, "data", ("1",), None), "data_1.npy"),
    ],
)
def test_file_name(args, expected):
    assert naming.file_name(*args) == expected


def test_shape_name():
    assert naming.shape_name((2,)) == "tensor_(2,)"
    assert naming.shape_name((2, 1)) == "tensor_(2, 1)"
    assert naming.shape_name(()) == "tensor_()"
