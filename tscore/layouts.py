"""Layouts of activations: the order of a tensor's axes, and moving arrays to and from the neutral one.

A layout is a string of axis letters, one per axis: ``N`` (batch), ``C``
(channels) and spatial or sequence letters (``L``, ``D``, ``H``, ``W``), each
once: ``"NHWC"`` is channels last, ``"NCHW"`` torch's channels first. The
*neutral* layout of a layout has the same letters with ``N`` first, ``C``
second and the others in their order (``"NHWC"`` -> ``"NCHW"``,
``"NLC"`` -> ``"NCL"``): torch's, so that a backend whose layers are channels
first declares the neutral layout and one whose layers are channels last
declares ``"NHWC"`` (``ts_layer_layout``). A layout applies to the tensors
of its rank; others (a Linear layer's ``[N, C]`` input) are the same in every
layout.
"""

from __future__ import annotations

import numpy as np

from tscore.contract.kinds import KINDS_BY_NAME
from tscore.errors import TscoreError

CHANNELS_FIRST = "channels_first"
CHANNELS_LAST = "channels_last"


class LayoutError(TscoreError, ValueError):
    """A layout string that is not a permutation of axis letters with ``N`` and ``C``."""


def check_layout(layout: str, what: str = "layout") -> str:
    """Return ``layout`` if well formed (``"NHWC"``, ``"channels_last"``); raise :class:`LayoutError` if not.

    :param what: how the error names the layout's source (``"the paddle plugin's layout of conv"``).
    """
    if layout in (CHANNELS_FIRST, CHANNELS_LAST):
        return layout
    if (
        not isinstance(layout, str)
        or not layout.isalpha()
        or not layout.isupper()
        or len(set(layout)) != len(layout)
        or "N" not in layout
        or "C" not in layout
        or len(layout) < 3
    ):
        raise LayoutError(
            f"{what} {layout!r} is not a layout: give one capital letter per axis, each once, with N for "
            "the batch and C for the channels, such as 'NCHW' (channels first) or 'NHWC' (channels last), "
            "or 'channels_first' / 'channels_last' for any rank"
        )
    return layout


def for_rank(layout: str, rank: int) -> str | None:
    """Give the axis string ``layout`` means for a tensor of ``rank`` (None: not that rank)."""
    if layout == CHANNELS_FIRST:
        return neutral_layout(rank) if 3 <= rank <= 5 else None
    if layout == CHANNELS_LAST:
        return channels_last(rank) if 3 <= rank <= 5 else None
    return layout if len(layout) == rank else None


def from_attributes(layer: object, kind: str, names: tuple[str, ...], default: str | None) -> str | None:
    """Read a layer's layout from the first of its attributes ``names`` holding one (``data_format="NHWC"``).

    For a backend's ``layer_layout``: when no attribute holds a layout, a layer of a kind with
    channels (:data:`tscore.contract.kinds.NEUTRAL_KINDS`) gets ``default`` (what the framework's
    layers do unless told otherwise), any other layer None.
    """
    for name in names:
        value = getattr(layer, name, None)
        if isinstance(value, str):
            try:
                return check_layout(value.upper())
            except LayoutError:
                continue
    found = KINDS_BY_NAME.get(kind)
    return default if found is not None and found.channels else None


def neutral_of(layout: str) -> str:
    """Give the neutral layout with the letters of ``layout``: ``N``, ``C``, then the others in order."""
    return "NC" + "".join(axis for axis in layout if axis not in "NC")


def neutral_layout(rank: int) -> str:
    """Give the neutral layout of a rank (3 -> ``"NCL"``, 4 -> ``"NCHW"``, 5 -> ``"NCDHW"``)."""
    spatial = {1: "L", 2: "HW", 3: "DHW"}.get(rank - 2)
    if spatial is None:
        raise LayoutError(f"no neutral layout for rank {rank}: layouts cover ranks 3 to 5")
    return "NC" + spatial


def channels_last(rank: int) -> str:
    """Give the channels-last layout of a rank (4 -> ``"NHWC"``)."""
    neutral = neutral_layout(rank)
    return "N" + neutral[2:] + "C"


def is_neutral(layout: str) -> bool:
    """Say whether ``layout`` is already the neutral order (channels first)."""
    return layout == neutral_of(layout)


def to_neutral_axes(layout: str) -> tuple[int, ...]:
    """Give the ``transpose`` axes that take an array in ``layout`` to the neutral layout."""
    return tuple(layout.index(axis) for axis in neutral_of(layout))


def from_neutral_axes(layout: str) -> tuple[int, ...]:
    """Give the ``transpose`` axes that take an array in the neutral layout to ``layout``."""
    neutral = neutral_of(layout)
    return tuple(neutral.index(axis) for axis in layout)


def to_neutral(array: np.ndarray, layout: str) -> np.ndarray:
    """``array`` (in ``layout``) in the neutral layout; unchanged when its rank is not the layout's."""
    if array.ndim != len(layout) or is_neutral(layout):
        return array
    return np.transpose(array, to_neutral_axes(layout))


def from_neutral(array: np.ndarray, layout: str) -> np.ndarray:
    """``array`` (neutral) in ``layout``; unchanged when its rank is not the layout's."""
    if array.ndim != len(layout) or is_neutral(layout):
        return array
    return np.transpose(array, from_neutral_axes(layout))


def neutral_shape(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    """Give the shape an array of ``shape`` in ``layout`` has in the neutral layout."""
    if len(shape) != len(layout):
        return tuple(shape)
    return tuple(shape[axis] for axis in to_neutral_axes(layout))


def reordered(shape: tuple[int, ...], other: tuple[int, ...]) -> bool:
    """Say whether two shapes hold the same axes in another order (axes of size 1 aside).

    ``(2, 4, 8, 8)`` against ``(2, 8, 8, 4)`` is; ``(1, 4)`` against ``(4,)`` is not (a reshape
    keeps every value in its place), nor are two equal shapes.
    """
    a = tuple(n for n in shape if n != 1)
    b = tuple(n for n in other if n != 1)
    return a != b and sorted(a) == sorted(b)
