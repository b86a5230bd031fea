"""Lining up the tensors two layer calls take, by the role each plays, when the two calls differ in form.

A HuggingFace attention module is called with its hidden states and a
dozen keyword arguments (masks, a cache, flags) and returns a tuple; its
port takes one tensor and returns one. Each tensor a call takes gets a role
(``arg0``, ``arg1.0`` for the first item of a tuple argument, the keyword's
name, ``attention_mask``), and two calls' tensors pair by role: the same
role first, then positional against keyword and leftovers by order where
their shapes hold as many values. What only one side passes is said, not
compared, and never stops the rest from being compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tscore.netdiff.recording import LayerCall


def _walk(value: Any, role: str, found: list[tuple[str, np.ndarray]]) -> None:
    """Collect ``(role, array)`` in the order :func:`tscore.structures.array_leaves` visits them."""
    if isinstance(value, np.ndarray):
        found.append((role, value))
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            _walk(item, f"{role}.{index}", found)
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk(item, f"{role}.{key}", found)


def input_roles(call: LayerCall) -> list[tuple[str, np.ndarray]]:
    """List every array a recorded call took with its role, in ``array_leaves((args, kwargs))`` order."""
    found: list[tuple[str, np.ndarray]] = []
    for index, item in enumerate(call.args or ()):
        _walk(item, f"arg{index}", found)
    for key, item in (call.kwargs or {}).items():
        _walk(item, str(key), found)
    return found


@dataclass
class RolePairs:
    """The tensors of two calls paired by role.

    :ivar pairs: ``(orig index, target index)`` into each call's :func:`input_roles`.
    :ivar orig_only: roles only the orig call passes a tensor for.
    :ivar target_only: roles only the target call passes a tensor for.
    """

    orig: list[tuple[str, np.ndarray]]
    target: list[tuple[str, np.ndarray]]
    pairs: list[tuple[int, int]] = field(default_factory=list)
    orig_only: list[str] = field(default_factory=list)
    target_only: list[str] = field(default_factory=list)

    def arrays(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Give the paired arrays, the orig call's and the target call's, in pair order."""
        return [self.orig[i][1] for i, _ in self.pairs], [self.target[j][1] for _, j in self.pairs]

    def one_sided(self, labels: tuple[str, str]) -> str:
        """Say which tensors one side alone passes (not compared), ``""`` when none."""
        parts = [
            f"only {label} passes {', '.join(roles[:4])}{', ...' if len(roles) > 4 else ''}"
            for label, roles in zip(labels, (self.orig_only, self.target_only), strict=True)
            if roles
        ]
        return "; ".join(parts) + " (not compared)" if parts else ""


def _same_shape(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and _same_kind(a, b)


def _same_values_count(a: np.ndarray, b: np.ndarray) -> bool:
    """Say whether two arrays of one kind of number have shapes that differ only by axes of size 1."""
    return [n for n in a.shape if n != 1] == [n for n in b.shape if n != 1] and _same_kind(a, b)


def _same_kind(a: np.ndarray, b: np.ndarray) -> bool:
    """Say whether two arrays hold one kind of number (floats with floats; a mask is not token ids)."""
    return (a.dtype.kind in "fcV") == (b.dtype.kind in "fcV") and (a.dtype.kind == "b") == (
        b.dtype.kind == "b"
    )


def _keyword(role: str) -> bool:
    return not role.startswith("arg")


def pair_roles(orig_call: LayerCall, target_call: LayerCall) -> RolePairs:
    """Pair two calls' input tensors by role.

    Same role first; then, in order, a leftover tensor of one side with the first leftover of the
    other of the same shape, then one whose shape differs only by axes of size 1, where at least
    one of the two is positional (a hidden state passed positionally against the same passed by
    keyword); what remains is one-sided.
    """
    result = RolePairs(input_roles(orig_call), input_roles(target_call))
    target_by_role = {role: index for index, (role, _) in enumerate(result.target)}
    taken: set[int] = set()
    left: list[int] = []
    for i, (role, _) in enumerate(result.orig):
        j = target_by_role.get(role)
        if j is not None and j not in taken:
            result.pairs.append((i, j))
            taken.add(j)
        else:
            left.append(i)
    right = [j for j in range(len(result.target)) if j not in taken]
    for alike in (_same_shape, _same_values_count):  # exact shapes first, then [N, 1, C] against [N, C]
        for i in list(left):
            role, array = result.orig[i]
            match = next(
                (  # two keywords of different names are two different things
                    j
                    for j in right
                    if alike(array, result.target[j][1])
                    and not (_keyword(role) and _keyword(result.target[j][0]))
                ),
                None,
            )
            if match is None:
                continue
            result.pairs.append((i, match))
            right.remove(match)
            left.remove(i)
    result.pairs.sort()
    result.orig_only = [result.orig[i][0] for i in left]
    result.target_only = [result.target[j][0] for j in right]
    return result


def opaque_outputs(output: Any, prefix: str = "out") -> list[str]:
    """Name what a call returned that is neither an array nor a plain value (a cache object): not compared."""
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if value is None or isinstance(value, (np.ndarray, bool, int, float, str, bytes, np.generic)):
            return
        if isinstance(value, (tuple, list)):
            for index, item in enumerate(value):
                walk(item, f"{path}_{index}" if path == prefix else f"{path}.{index}")
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, str(key) if path == prefix else f"{path}.{key}")
        else:
            found.append(f"{path} ({type(value).__name__})")

    walk(output, prefix)
    return found
