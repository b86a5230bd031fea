"""Value transforms of a weight map, written as strings so that the map stays JSON.

A transform changes a parameter's layout on its way between frameworks:
torch's Conv1d weight ``(out, in, k)`` is MindSpore's ``(out, in, 1, k)``,
``"unsqueeze(2)"``; torch's Linear weight ``(out, in)`` is PaddlePaddle's
``(in, out)``, ``"transpose(1, 0)"``. Several apply in turn when joined by
``;`` (``"squeeze(2); transpose(1, 0)"``). Each has an inverse, used to
convert back. Transforms return views where numpy can (reshapes,
transposes), so converting does not copy the data until it is written.

tscore's own are ``unsqueeze(axis)``, ``squeeze(axis)`` and
``transpose(*axes)``; a plugin adds more through ``ts_value_transforms``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tscore.errors import TscoreError


class TransformError(TscoreError, ValueError):
    """A transform string that is not known, or that does not fit the array."""


@dataclass(frozen=True)
class ValueTransform:
    """One named transform: how it changes an array, and how its inverse is written.

    :ivar apply: ``apply(array, args)`` with the integer arguments of the spelling.
    :ivar inverse: ``inverse(args)`` returns the spelling of the transform that
        undoes it (``"squeeze(2)"`` for ``unsqueeze`` with ``(2,)``).
    :ivar check: ``check(args)`` returns what is wrong with the arguments, or ``""``;
        a map with bad arguments is refused when it is read, not half way through a conversion.
    """

    apply: Callable[[np.ndarray, tuple[int, ...]], np.ndarray]
    inverse: Callable[[tuple[int, ...]], str]
    check: Callable[[tuple[int, ...]], str] = lambda args: ""


def _one_axis(args: tuple[int, ...]) -> str:
    return "" if len(args) == 1 and args[0] >= 0 else "takes one axis, counted from 0"


def _permutation(args: tuple[int, ...]) -> str:
    if len(args) >= 2 and sorted(args) == list(range(len(args))):
        return ""
    return "takes every axis once, 0 to n-1 in a new order"


def _unsqueeze(array: np.ndarray, args: tuple[int, ...]) -> np.ndarray:
    return np.expand_dims(array, args[0])


def _squeeze(array: np.ndarray, args: tuple[int, ...]) -> np.ndarray:
    axis = args[0]
    if array.ndim <= axis or array.shape[axis] != 1:
        raise TransformError(f"squeeze({axis}) needs a size-1 axis {axis}, the array has shape {array.shape}")
    return np.squeeze(array, axis)


def _transpose(array: np.ndarray, args: tuple[int, ...]) -> np.ndarray:
    if sorted(args) != list(range(array.ndim)):
        raise TransformError(
            f"transpose{args} needs a permutation of the {array.ndim} axes of an array of shape {array.shape}"
        )
    return np.transpose(array, args)


def _transpose_inverse(args: tuple[int, ...]) -> str:
    undo = np.argsort(args).tolist()
    return f"transpose({', '.join(str(a) for a in undo)})"


BUILTIN: dict[str, ValueTransform] = {
    "unsqueeze": ValueTransform(_unsqueeze, lambda args: f"squeeze({args[0]})", _one_axis),
    "squeeze": ValueTransform(_squeeze, lambda args: f"unsqueeze({args[0]})", _one_axis),
    "transpose": ValueTransform(_transpose, _transpose_inverse, _permutation),
}

# TroubleShooter writes its value map as dotted names of its own functions.
TROUBLESHOOTER_TRANSFORMS = {
    "troubleshooter.migrator.mapping_relation.weight_adapter.trans_conv1d_weight_value": "unsqueeze(2)",
}

_SPEC = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*\(\s*(-?\d+(?:\s*,\s*-?\d+)*)?\s*\)\s*$")


def known() -> dict[str, ValueTransform]:
    """Return tscore's transforms and those the loaded plugins add (``ts_value_transforms``)."""
    from tscore.plugins import hook

    found = dict(BUILTIN)
    for answer in hook().ts_value_transforms():
        for name, transform in (answer or {}).items():
            if not isinstance(transform, ValueTransform):
                raise TransformError(f"a plugin offers transform {name!r} that is not a ValueTransform")
            found.setdefault(name, transform)
    return found


def _steps(spec: str) -> list[str]:
    spec = TROUBLESHOOTER_TRANSFORMS.get(spec.strip(), spec)
    steps = [part for part in spec.split(";") if part.strip()]
    if not steps:
        raise TransformError("an empty value transform; leave the entry out of value_map instead")
    return steps


def parse(step: str, table: dict[str, ValueTransform] | None = None) -> tuple[str, tuple[int, ...]]:
    """Split one step, ``"transpose(1, 0)"``, into ``("transpose", (1, 0))``.

    :param table: the transforms to know, when the caller has :func:`known` at hand already.
    :raises TransformError: for a transform no one offers, listing the known ones.
    """
    step = TROUBLESHOOTER_TRANSFORMS.get(step.strip(), step)
    match = _SPEC.match(step)
    table = known() if table is None else table
    if match is None or match.group(1) not in table:
        names = ", ".join(f"{name}(...)" for name in table)
        raise TransformError(f"unknown value transform {step!r}; a weight map may use: {names}")
    args = tuple(int(a) for a in match.group(2).split(",")) if match.group(2) else ()
    problem = table[match.group(1)].check(args)
    if problem:
        raise TransformError(f"value transform {step.strip()!r}: {match.group(1)} {problem}")
    return match.group(1), args


def _spell(name: str, args: tuple[int, ...]) -> str:
    return f"{name}({', '.join(str(a) for a in args)})"


def normalise(spec: str) -> str:
    """Return the canonical spelling of a transform: ``"unsqueeze(2)"``, ``"squeeze(2); transpose(1, 0)"``."""
    table = known()
    return "; ".join(_spell(*parse(step, table)) for step in _steps(spec))


def apply(spec: str, array: np.ndarray) -> np.ndarray:
    """Apply the transform ``spec`` (its steps in turn) to ``array``.

    :raises TransformError: when a step is unknown or does not fit the array's shape.
    """
    table = known()
    for step in _steps(spec):
        name, args = parse(step, table)
        try:
            array = table[name].apply(array, args)
        except (np.exceptions.AxisError, IndexError) as exc:
            raise TransformError(
                f"{step.strip()} does not fit an array of shape {array.shape}: {exc}"
            ) from None
    return array


def inverse(spec: str) -> str:
    """Return the transform that undoes ``spec``: the steps' inverses in reverse order."""
    table = known()
    undone = []
    for step in reversed(_steps(spec)):
        name, args = parse(step, table)
        spelled = table[name].inverse(args)
        undone.append(_spell(*parse(spelled, table)))
    return "; ".join(undone)


def compose(first: str | None, then: str | None) -> str | None:
    """Join two transforms (either may be None); a step next to its own inverse cancels out."""
    table = known()
    steps = [*(_steps(first) if first else []), *(_steps(then) if then else [])]
    out: list[tuple[str, tuple[int, ...]]] = []
    for name, args in (parse(step, table) for step in steps):
        if out and parse(table[out[-1][0]].inverse(out[-1][1]), table) == (name, args):
            out.pop()
        else:
            out.append((name, args))
    return "; ".join(_spell(*step) for step in out) or None
