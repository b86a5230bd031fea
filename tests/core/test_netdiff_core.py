"""The framework-free parts of the difference finder: inputs, nested outputs, layer pairing, hook handles."""

from __future__ import annotations

import dataclasses
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

from tscore.checkpoint.weight_map import WeightMap
from tscore.contract.layers import HookHandles, LayerInfo
from tscore.errors import UnsupportedObjectError
from tscore.netdiff.inputs import InputError, input_cases
from tscore.netdiff.pairing import pair_layers
from tscore.netdiff.report import Divergence, short
from tscore.structures import array_leaves, as_arrays, replace_arrays, tensor_leaves


def test_given_inputs_become_arrays_and_npy_paths_are_read(tmp_path: Path) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    cases = input_cases((x, str(tmp_path / "x.npy")), None, 0)
    assert len(cases) == 1 and all(np.array_equal(a, x) for a in cases[0])
    assert len(input_cases([(x,), (x,)], None, 0)) == 2


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([], "empty list"),
        ({"x": 1}, "must be a tuple, or a list of tuples"),
        ([(np.ones(2),), [np.ones(2)]], r"inputs\[1\] must be a tuple"),
        (("missing.npy",), r"inputs\[0\]: 'missing.npy' does not exist"),
    ],
)
def test_bad_inputs_name_the_argument(inputs: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        input_cases(inputs, None, 0)


def test_an_object_that_is_not_a_tensor_names_its_position() -> None:
    with pytest.raises(UnsupportedObjectError, match=r"inputs\[1\] is a list"):
        input_cases((np.ones(2), [1, 2]), None, 0)


def test_a_corrupt_npy_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(InputError, match=r"cannot be read as a \.npy file"):
        input_cases((str(tmp_path / "bad.npy"),), None, 0)


def test_auto_inputs_are_seeded_and_follow_shapes_dtypes_and_ranges() -> None:
    spec = (((2, 3), np.float32), ((4,), np.int64, (5, 7)), ((1,), "float16", (2.0, 2.0)))
    first, again = input_cases(None, spec, 3), input_cases(None, spec, 3)
    (a, ids, scale) = first[0]
    assert a.shape == (2, 3) and a.dtype == np.float32
    assert ids.dtype == np.int64 and set(ids.tolist()) <= {5, 6}
    assert scale.dtype == np.float16 and scale[0] == 2.0
    assert all(np.array_equal(x, y) for x, y in zip(first[0], again[0], strict=True))
    several = input_cases(None, {"input": spec[:1], "num": 3}, 0)
    assert len(several) == 3 and not np.array_equal(several[0][0], several[1][0])


@pytest.mark.parametrize(
    ("auto", "message"),
    [
        ({"input": (((2,), np.float32),)}, "needs the keys 'input' and 'num'"),
        ({"input": (((2,), np.float32),), "num": 0}, "must be a positive int"),
        ([((2,), np.float32)], "must be"),
        ((((2,), "complex64"),), "cannot draw random values"),
        ((((-1,), np.float32),), "negative size"),
        ((((2,), "no-such-dtype"),), "is not"),
    ],
)
def test_bad_auto_inputs_are_refused(auto: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        input_cases(None, auto, 0)


def test_inputs_and_auto_inputs_exclude_each_other() -> None:
    with pytest.raises(InputError, match="not both"):
        input_cases((np.ones(1),), (((1,), np.float32),), 0)
    with pytest.raises(InputError, match="pass inputs"):
        input_cases(None, None, 0)


Pair = namedtuple("Pair", "hidden cell")


@dataclasses.dataclass
class Output:
    logits: np.ndarray
    extra: object


def test_nested_outputs_are_named_by_path() -> None:
    a, b, c = np.zeros(1), np.ones(2), np.full(3, 2.0)
    assert [n for n, _ in tensor_leaves(a)] == ["out"]
    assert [n for n, _ in tensor_leaves((a, [b, c]))] == ["out_0", "out_1.0", "out_1.1"]
    assert [n for n, _ in tensor_leaves({"logits": a, "aux": (b, None)})] == ["logits", "aux.0"]
    assert [n for n, _ in tensor_leaves(Output(a, Pair(b, c)))] == ["logits", "extra.hidden", "extra.cell"]
    copied = tensor_leaves(a)[0][1]
    copied[0] = 5.0
    assert a[0] == 0.0  # leaves are copies unless asked otherwise


def test_arrays_in_a_structure_can_be_replaced_in_order() -> None:
    structure = as_arrays(((np.zeros(2), 3, None), {"mask": np.ones(1), "flag": True}))
    assert [a.shape for a in array_leaves(structure)] == [(2,), (1,)]
    replaced = replace_arrays(structure, [np.full(2, 7.0), np.full(1, 8.0)])
    assert replaced[0][1] == 3 and replaced[1]["flag"] is True
    assert replaced[0][0].tolist() == [7.0, 7.0] and replaced[1]["mask"].tolist() == [8.0]
    with pytest.raises(ValueError, match="2 arrays to replace, 1 replacements"):
        replace_arrays(structure, [np.zeros(2)])


def _layers(*entries: tuple[str, str, str, tuple[str, ...]]) -> list[LayerInfo]:
    return [LayerInfo(path=p, type_name=t, kind=k, params=params) for p, t, k, params in entries]


def test_layers_pair_through_the_map_by_path_and_by_order() -> None:
    torch_layers = _layers(
        ("", "Net", "", ()),
        ("bn3d", "BatchNorm3d", "batchnorm3d", ("bn3d.weight", "bn3d.bias")),
        ("body", "Sequential", "sequential", ()),
        ("body.0", "Linear", "linear", ("body.0.weight",)),
        ("body.1", "ReLU", "relu", ()),
        ("body.2", "Dropout", "dropout", ()),
        ("act", "GELU", "gelu", ()),
    )
    ms_layers = _layers(
        ("", "MsNet", "", ()),
        ("bn3d", "BatchNorm3d", "batchnorm3d", ()),
        ("bn3d.bn2d", "BatchNorm2d", "batchnorm2d", ("bn3d.bn2d.gamma", "bn3d.bn2d.beta")),
        ("trunk", "SequentialCell", "sequential", ()),
        ("trunk.0", "Dense", "linear", ("trunk.0.weight",)),
        ("trunk.1", "Dropout", "dropout", ()),
        ("trunk.2", "ReLU", "relu", ()),
        ("gelu", "GELU", "gelu", ()),
    )
    weight_map = WeightMap(
        {"bn3d.weight": "bn3d.bn2d.gamma", "bn3d.bias": "bn3d.bn2d.beta", "body.0.weight": "trunk.0.weight"},
        {},
    )
    pairs = {
        p.orig.path: (p.target.path, p.paired_by) for p in pair_layers(torch_layers, ms_layers, weight_map)
    }
    assert pairs[""] == ("", "root")
    assert pairs["bn3d"] == ("bn3d", "weights")  # the cell at the torch path, not its inner bn2d
    assert pairs["body.0"] == ("trunk.0", "weights")
    assert pairs["body"] == ("trunk", "contents")  # it holds the twin of body.0
    # the kinds decide, not the positions: ReLU and Dropout swapped places
    assert pairs["body.1"] == ("trunk.2", "order")
    assert pairs["body.2"] == ("trunk.1", "order")
    assert pairs["act"] == ("gelu", "order")


def test_a_map_edited_after_its_alignment_pairs_as_its_names_say() -> None:
    """The user fixed an ambiguous pair in the map's names; the stale alignment must not win."""
    from tscore.checkpoint.layer_alignment import LayerMatch

    orig = _layers(
        ("", "Net", "", ()),
        ("a", "Linear", "linear", ("a.weight",)),
        ("b", "Linear", "linear", ("b.weight",)),
    )
    target = _layers(
        ("", "Net", "", ()),
        ("x", "Dense", "linear", ("x.weight",)),
        ("y", "Dense", "linear", ("y.weight",)),
    )
    stale = (LayerMatch("a", "x", "linear", "ambiguous"), LayerMatch("b", "y", "linear", "ambiguous"))
    edited = WeightMap({"a.weight": "y.weight", "b.weight": "x.weight"}, {}, alignment=stale)
    pairs = {p.orig.path: (p.target.path, p.paired_by) for p in pair_layers(orig, target, edited)}
    assert pairs["a"] == ("y", "weights") and pairs["b"] == ("x", "weights")
    followed = WeightMap({"a.weight": "x.weight", "b.weight": "y.weight"}, {}, alignment=stale)
    pairs = {p.orig.path: (p.target.path, p.paired_by) for p in pair_layers(orig, target, followed)}
    assert pairs["a"] == ("x", "ambiguous")


def test_the_divergence_line_reads_as_the_issue_writes_it() -> None:
    first = Divergence(
        orig_path="features.3",
        target_path="features.3",
        orig_type="MaxPool2d",
        target_type="MaxPool2d",
        own_error=2.0,
        inherited_error=0.0,
    )
    assert (
        first.line() == "first divergence: features.3 (MaxPool2d / MaxPool2d): own error 2.0, inherited 0.0"
    )
    assert short(0.000153) == "0.000153" and short(None) == "-" and short(1.5e8) == "1.5e+08"


def test_hook_handles_remove_everything_once_even_when_one_fails() -> None:
    removed: list[int] = []

    def failing() -> None:
        removed.append(2)
        raise RuntimeError("cannot remove")

    handles = HookHandles([lambda: removed.append(1), failing, lambda: removed.append(3)])
    with pytest.raises(RuntimeError, match="cannot remove"):
        handles.remove()
    assert removed == [3, 2, 1] and len(handles) == 0
    handles.remove()  # a second call removes nothing
    assert removed == [3, 2, 1]
