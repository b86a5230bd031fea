"""Walking the nested values a network takes and returns: tuples, lists, dicts, dataclasses.

:func:`tensor_leaves` names every tensor in a nested output by its path, the
way TroubleShooter names a network's outputs (``out``, ``out_0``, ``logits``)
and deeper levels with dots (``out_1.hidden``). :func:`map_arrays` rebuilds a
nested value with a function applied to every numpy array in it, which is
how a backend turns numpy inputs into its tensors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from tscore.tensors import is_tensor, to_numpy

ROOT = "out"


def _children(value: Any) -> Iterator[tuple[str, Any]] | None:
    """Return the named parts of a container, None for a leaf."""
    if isinstance(value, Mapping):
        return ((str(key), item) for key, item in value.items())
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        return zip(value._fields, value, strict=False)
    if isinstance(value, (tuple, list)):
        return ((str(index), item) for index, item in enumerate(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    return None


def _join(path: str, key: str, top: bool) -> str:
    if not top:
        return f"{path}.{key}"
    return f"{ROOT}_{key}" if key.isdigit() else key


def tensor_leaves(value: Any, *, copy: bool = True) -> list[tuple[str, np.ndarray]]:
    """Every tensor (or numpy array) inside ``value`` with its path, in order, as numpy arrays.

    A single tensor is ``out``; the items of a returned tuple ``out_0``,
    ``out_1``; the keys of a dict or the fields of a dataclass their own
    names; deeper levels are joined with dots (``out_1.0``, ``logits.mask``).
    Leaves that are not tensors (``None``, numbers, strings) are left out.
    """
    found: list[tuple[str, np.ndarray]] = []

    def walk(item: Any, path: str, top: bool) -> None:
        if isinstance(item, np.ndarray):
            found.append((path, np.array(item, copy=True) if copy else item))
            return
        if is_tensor(item):
            found.append((path, to_numpy(item, copy=copy)))
            return
        children = _children(item)
        if children is not None:
            for key, child in children:
                walk(child, _join(path, key, top), False)

    walk(value, ROOT, True)
    return found


def as_arrays(value: Any) -> Any:
    """Rebuild ``value`` with every tensor replaced by a numpy copy; everything else is kept."""
    if is_tensor(value):
        return to_numpy(value, copy=True)
    return _rebuild(value, as_arrays)


def map_arrays(value: Any, function: Callable[[np.ndarray], Any]) -> Any:
    """Rebuild ``value`` with ``function`` applied to every numpy array inside it."""
    if isinstance(value, np.ndarray):
        return function(value)
    return _rebuild(value, lambda item: map_arrays(item, function))


def map_leaves(value: Any, function: Callable[[Any], Any]) -> Any:
    """Rebuild ``value`` (tuples, lists, dicts) with ``function`` applied to every other object inside it."""
    if isinstance(value, (tuple, list, dict)):
        return _rebuild(value, lambda item: map_leaves(item, function))
    return function(value)


def _rebuild(value: Any, inner: Callable[[Any], Any]) -> Any:
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(inner(item) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(inner(item) for item in value)
    if isinstance(value, dict):
        return {key: inner(item) for key, item in value.items()}
    return value


def array_leaves(value: Any) -> list[np.ndarray]:
    """List the numpy arrays inside ``value`` (as built by :func:`as_arrays`), in order."""
    found: list[np.ndarray] = []

    def keep(array: np.ndarray) -> np.ndarray:
        found.append(array)
        return array

    map_arrays(value, keep)
    return found


def replace_arrays(value: Any, replacements: list[np.ndarray]) -> Any:
    """Rebuild ``value`` with its numpy arrays replaced, in order, by ``replacements``.

    :raises ValueError: when the counts differ.
    """
    remaining = iter(replacements)
    count = len(array_leaves(value))
    if count != len(replacements):
        raise ValueError(f"{count} arrays to replace, {len(replacements)} replacements")
    return map_arrays(value, lambda _: next(remaining))


Leaf = tuple[str, np.ndarray]


def pair_leaves(
    left_value: Any, right_value: Any
) -> tuple[list[tuple[str, np.ndarray, str, np.ndarray]], list[Leaf], list[Leaf]]:
    """Pair the tensors of two nested values by path (by order when some left path is not on the right).

    :return: ``(left name, left array, right name, right array)`` per pair, then
        the leaves left over on each side. Arrays are not copied.
    """
    left, right = tensor_leaves(left_value, copy=False), tensor_leaves(right_value, copy=False)
    right_by = dict(right)
    if all(name in right_by for name, _ in left):
        pairs = [(name, array, name, right_by[name]) for name, array in left]
        used = {name for name, _ in left}
        return pairs, [], [(n, a) for n, a in right if n not in used]
    count = min(len(left), len(right))
    pairs = [(a, x, b, y) for (a, x), (b, y) in zip(left[:count], right[:count], strict=True)]
    return pairs, left[count:], right[count:]
