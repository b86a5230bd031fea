"""Value transforms: transposes and chains with their inverses, and transforms a plugin adds."""

from __future__ import annotations

import numpy as np
import pytest

import tscore as ts
from tscore import value_transforms as transforms
from tscore.plugin_api import hookimpl
from tscore.value_transforms import TransformError, ValueTransform


@pytest.mark.parametrize(
    ("spec", "undo", "shape"),
    [
        ("transpose(1, 0)", "transpose(1, 0)", (3, 4)),
        ("transpose(2,0,1)", "transpose(1, 2, 0)", (2, 3, 4)),
        ("unsqueeze(2)", "squeeze(2)", (2, 3, 4)),
        ("squeeze(2); transpose(1, 0)", "transpose(1, 0); unsqueeze(2)", (2, 3, 1)),
    ],
)
def test_each_transform_and_chain_has_an_inverse_that_restores_the_array(
    spec: str, undo: str, shape: tuple[int, ...]
) -> None:
    assert transforms.inverse(spec) == undo
    array = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    changed = transforms.apply(spec, array)
    assert changed.shape != array.shape
    back = transforms.apply(undo, changed)
    assert back.shape == array.shape
    np.testing.assert_array_equal(back, array)


def test_transpose_is_a_view_and_a_step_next_to_its_inverse_cancels() -> None:
    weight = np.arange(12, dtype=np.float32).reshape(3, 4)
    moved = transforms.apply("transpose(1, 0)", weight)
    assert moved.shape == (4, 3) and np.shares_memory(moved, weight)
    assert transforms.compose("transpose(1, 0)", "transpose(1, 0)") is None
    assert transforms.compose("squeeze(2)", "transpose(1, 0)") == "squeeze(2); transpose(1, 0)"
    assert transforms.compose(None, "unsqueeze(2)") == "unsqueeze(2)"


def test_a_transpose_that_does_not_fit_says_so() -> None:
    with pytest.raises(TransformError, match=r"needs a permutation of the 2 axes"):
        transforms.apply("transpose(2, 0, 1)", np.ones((2, 3)))
    with pytest.raises(TransformError, match="unknown value transform 'rotate"):
        transforms.normalise("rotate(90)")


class FlipPlugin:
    """A plugin whose framework stores a kind's weight reversed along axis 0."""

    @hookimpl
    def ts_value_transforms(self):
        return {"flip": ValueTransform(lambda a, args: np.flip(a, args[0]), lambda args: f"flip({args[0]})")}


def test_a_plugin_adds_a_transform_with_its_inverse() -> None:
    name = ts.register_plugin(FlipPlugin(), "flip")
    try:
        array = np.arange(6).reshape(2, 3)
        assert transforms.normalise("flip( 0 )") == "flip(0)"
        np.testing.assert_array_equal(transforms.apply("flip(0); transpose(1, 0)", array), array[::-1].T)
        assert transforms.inverse("flip(0); transpose(1, 0)") == "transpose(1, 0); flip(0)"
    finally:
        ts.unregister_plugin(name)
    with pytest.raises(TransformError, match="unknown value transform"):
        transforms.normalise("flip(0)")
