"""Value transforms of a weight map, written as strings so that the map stays JSON.

A transform changes a parameter's layout on its way between frameworks:
torch's Conv1d weight ``(out, in, k)`` is MindSpore's ``(out, in, 1, k)``,
``"unsqueeze(2)"``. Each transform has an inverse, used to convert back.
Transforms return views where numpy can (reshapes), so converting does not
copy the data.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from tscore.errors import TscoreError


class TransformError(TscoreError, ValueError):
    """A transform string that is not known, or that does not fit the array."""


def _unsqueeze(array: np.ndarray, axis: int) -> np.ndarray:
    return np.expand_dims(array, axis)


def _squeeze(array: np.ndarray, axis: int) -> np.ndarray:
    if array.ndim <= axis or array.shape[axis] != 1:
        raise TransformError(f"squeeze({axis}) needs a size-1 axis {axis}, the array has shape {array.shape}")
    return np.squeeze(array, axis)


# name -> (function(array, int argument), inverse name)
TRANSFORMS: dict[str, tuple[Callable[[np.ndarray, int], np.ndarray], str]] = {
    "unsqueeze": (_unsqueeze, "squeeze"),
    "squeeze": (_squeeze, "unsqueeze"),
}

# TroubleShooter writes its value map as dotted names of its own functions.
TROUBLESHOOTER_TRANSFORMS = {
    "troubleshooter.migrator.mapping_relation.weight_adapter.trans_conv1d_weight_value": "unsqueeze(2)",
}

_SPEC = re.compile(r"^\s*([a-z_]+)\s*\(\s*(-?\d+)\s*\)\s*$")


def parse(spec: str) -> tuple[str, int]:
    """Split ``"unsqueeze(2)"`` into ``("unsqueeze", 2)``; TroubleShooter's names are accepted too.

    :raises TransformError: for a transform tscore does not know, listing the known ones.
    """
    spec = TROUBLESHOOTER_TRANSFORMS.get(spec, spec)
    match = _SPEC.match(spec)
    if match is None or match.group(1) not in TRANSFORMS:
        known = ", ".join(f"{name}(axis)" for name in TRANSFORMS)
        raise TransformError(f"unknown value transform {spec!r}; a weight map may use: {known}")
    return match.group(1), int(match.group(2))


def normalise(spec: str) -> str:
    """Return the canonical spelling of a transform (``"unsqueeze(2)"``)."""
    name, argument = parse(spec)
    return f"{name}({argument})"


def apply(spec: str, array: np.ndarray) -> np.ndarray:
    """Apply the transform ``spec`` to ``array``.

    :raises TransformError: when the transform is unknown or does not fit the array's shape.
    """
    name, argument = parse(spec)
    try:
        return TRANSFORMS[name][0](array, argument)
    except np.exceptions.AxisError as exc:
        raise TransformError(f"{spec} does not fit an array of shape {array.shape}: {exc}") from None


def inverse(spec: str) -> str:
    """Return the transform that undoes ``spec`` (``"squeeze(2)"`` for ``"unsqueeze(2)"``)."""
    name, argument = parse(spec)
    return f"{TRANSFORMS[name][1]}({argument})"
