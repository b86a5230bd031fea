"""Layouts of activations, how a paired call's tensors are read, and layers ordered by their calls."""

from __future__ import annotations

import numpy as np
import pytest

from tscore.contract.kinds import NEUTRAL_KINDS, kind_family, kind_role
from tscore.contract.layers import LayerInfo
from tscore.layouts import (
    LayoutError,
    check_layout,
    for_rank,
    from_neutral,
    neutral_of,
    neutral_shape,
    reordered,
    to_neutral,
)
from tscore.netdiff.call_layouts import CallLayouts, call_layouts
from tscore.netdiff.pairing import in_call_order
from tscore.netdiff.recording import LayerCall


def test_layouts_move_axes_to_the_neutral_order_and_back() -> None:
    nchw = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    nhwc = np.transpose(nchw, (0, 2, 3, 1))
    assert neutral_of("NHWC") == "NCHW" and neutral_of("NLC") == "NCL" and neutral_of("NDHWC") == "NCDHW"
    np.testing.assert_array_equal(to_neutral(nhwc, "NHWC"), nchw)
    np.testing.assert_array_equal(from_neutral(nchw, "NHWC"), nhwc)
    assert neutral_shape((2, 4, 5, 3), "NHWC") == (2, 3, 4, 5)
    flat = nchw[:, :, 0, 0]
    assert to_neutral(flat, "NHWC") is flat  # a [N, C] tensor reads the same in every layout
    assert for_rank("channels_last", 3) == "NLC" and for_rank("channels_first", 5) == "NCDHW"
    assert for_rank("channels_last", 2) is None and for_rank("NHWC", 3) is None


@pytest.mark.parametrize("bad", ["nhwc", "NHW", "NHHC", "HWC", "", "channels_middle"])
def test_a_malformed_layout_is_refused_naming_its_source(bad: str) -> None:
    with pytest.raises(LayoutError, match="the paddle layer conv's layout"):
        check_layout(bad, "the paddle layer conv's layout")


def test_reordered_shapes_ignore_axes_of_size_one() -> None:
    assert reordered((2, 4, 8, 8), (2, 8, 8, 4))
    assert not reordered((2, 1, 4), (2, 4))
    assert not reordered((2, 3), (2, 3))
    assert not reordered((6,), (2, 3))


def call(start: int, *args: object, output: object = None) -> LayerCall:
    return LayerCall("x", "X", 0, start, None, args=args, kwargs={}, output=output)


def test_an_undeclared_call_is_read_in_the_network_layout_that_lines_its_inputs_up() -> None:
    rng = np.random.default_rng(0)
    nchw = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    nhwc = np.ascontiguousarray(np.transpose(nchw, (0, 2, 3, 1)))
    chosen = call_layouts(call(0, nchw), call(0, nhwc), (None, None), (set(), {"NHWC"}))
    assert (chosen.orig, chosen.target, chosen.unknown) == (None, "NHWC", "")
    np.testing.assert_array_equal(chosen.read(nhwc, 1), nchw)
    np.testing.assert_array_equal(chosen.into_target(nchw), nhwc)


def test_square_tensors_are_read_by_the_values_when_several_layouts_line_up() -> None:
    rng = np.random.default_rng(1)
    nchw = rng.standard_normal((2, 4, 4, 4)).astype(np.float32)
    nhwc = np.ascontiguousarray(np.transpose(nchw, (0, 2, 3, 1)))
    chosen = call_layouts(call(0, nchw), call(0, nhwc), (None, None), (set(), {"NHWC"}))
    assert chosen.target == "NHWC"
    as_given = call_layouts(call(0, nchw), call(0, nchw.copy()), (None, None), (set(), {"NHWC"}))
    assert as_given.target is None


def test_permuted_shapes_with_no_declared_layout_cannot_be_compared() -> None:
    nchw = np.zeros((2, 3, 5, 5), np.float32)
    chosen = call_layouts(
        call(0, nchw), call(0, np.zeros((2, 5, 5, 3), np.float32)), (None, None), (set(), set())
    )
    assert chosen.unknown.startswith("cannot tell which values to compare")
    assert "ts_layer_layout" in chosen.unknown


def test_a_flatten_of_a_moved_tensor_loses_the_order() -> None:
    nhwc = np.zeros((2, 5, 5, 3), np.float32)
    layouts = CallLayouts(None, "NHWC", "declared")
    assert layouts.loses_order(call(0, np.zeros((2, 3, 5, 5))), call(0, nhwc, output=nhwc.reshape(2, -1)))
    assert not layouts.loses_order(call(0, np.zeros((2, 3, 5, 5))), call(0, nhwc, output=nhwc))


def layer(path: str) -> LayerInfo:
    return LayerInfo(path=path, type_name="L")


def test_layers_are_ordered_by_their_first_calls_with_parents_first() -> None:
    listed = [layer(p) for p in ("", "a", "a.z", "a.b", "list", "list.0", "list.1", "unused", "unused.k")]
    calls = {"": 0, "a": 1, "a.b": 2, "a.z": 3, "list.1": 4, "list.0": 5}
    ordered = [layer.path for layer in in_call_order(listed, calls)]
    assert ordered == ["", "a", "a.b", "a.z", "list", "list.1", "list.0", "unused", "unused.k"]


def test_with_no_calls_known_the_listed_order_stays() -> None:
    listed = [layer(p) for p in ("", "a", "a.x", "a.x.k", "b")]
    assert [layer.path for layer in in_call_order(listed, {})] == ["", "a", "a.x", "a.x.k", "b"]


def test_every_kind_has_a_family_and_ranked_kinds_share_theirs() -> None:
    names = [kind.name for kind in NEUTRAL_KINDS]
    assert len(names) == len(set(names))
    assert kind_family("batchnorm2d") == kind_family("batchnorm") == "batchnorm"
    assert kind_family("conv3d") == "conv" and kind_family("conv_transpose1d") == "conv_transpose"
    assert kind_role("relu6") == kind_role("gelu") == "activation" and kind_role("maxpool2d") == "pooling"
    assert kind_family("my_block") == "my_block"


def test_a_mask_never_pairs_with_token_ids_of_its_shape() -> None:
    from tscore.netdiff.call_roles import pair_roles

    mask = np.ones((2, 16), np.float32)
    ids = np.arange(32, dtype=np.int64).reshape(2, 16)
    orig = LayerCall("x", "X", 0, 0, None, args=(), kwargs={"attention_mask": mask, "input_ids": ids})
    target = LayerCall("x", "X", 0, 0, None, args=(ids.copy(),), kwargs={})
    roles = pair_roles(orig, target)
    assert [(roles.orig[i][0], roles.target[j][0]) for i, j in roles.pairs] == [("input_ids", "arg0")]
    assert roles.orig_only == ["attention_mask"]
