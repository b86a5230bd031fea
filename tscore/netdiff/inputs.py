"""The inputs of ``NetDifferenceFinder.compare``: given tensors, arrays and ``.npy`` files, or generated ones.

Every case becomes a tuple of numpy arrays, which each backend turns into its
own tensors, so both networks see the same numbers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from tscore.errors import TscoreError, UnsupportedObjectError
from tscore.tensors import is_tensor, to_numpy

Case = tuple[np.ndarray, ...]

# Integer inputs drawn by auto_inputs fall in [0, INT_HIGH) unless a range is given.
INT_HIGH = 10


class InputError(TscoreError, ValueError):
    """Inputs that cannot be given to the networks."""


def _load_npy(path: str, where: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{where}: {path!r} does not exist; give the path of a .npy file") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{where}: {path!r} cannot be read as a .npy file: {exc}") from exc


def _array(item: object, where: str) -> np.ndarray:
    if isinstance(item, np.ndarray):
        return item
    if isinstance(item, (str, os.PathLike)):
        return _load_npy(os.fspath(item), where)
    if is_tensor(item):
        return to_numpy(item, copy=True)
    raise UnsupportedObjectError(
        f"{where} is a {type(item).__name__}; give a tensor of a loaded framework, a numpy array "
        "or the path of a .npy file"
    )


def _case(items: object, where: str) -> Case:
    if not isinstance(items, tuple):
        raise InputError(
            f"{where} must be a tuple of the network's inputs, not a {type(items).__name__} "
            "(one input: (x,); several cases: a list of tuples)"
        )
    return tuple(_array(item, f"{where}[{index}]") for index, item in enumerate(items))


def given_cases(inputs: object) -> list[Case]:
    """Turn ``inputs`` (a tuple for one case, a list of tuples for several) into arrays."""
    if isinstance(inputs, tuple):
        return [_case(inputs, "inputs")]
    if isinstance(inputs, list):
        if not inputs:
            raise InputError("inputs is an empty list; give at least one tuple of inputs")
        return [_case(items, f"inputs[{index}]") for index, items in enumerate(inputs)]
    raise InputError(f"inputs must be a tuple, or a list of tuples, not a {type(inputs).__name__}")


def _generate(spec: object, rng: np.random.Generator, where: str) -> np.ndarray:
    if not isinstance(spec, (tuple, list)) or len(spec) not in (2, 3):
        raise InputError(f"{where} must be (shape, dtype) or (shape, dtype, (low, high)), not {spec!r}")
    shape, dtype_like = spec[0], spec[1]
    try:
        dims = tuple(int(d) for d in shape)
        dtype = np.dtype(dtype_like)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: {spec!r} is not (shape, dtype): {exc}") from None
    if any(d < 0 for d in dims):
        raise InputError(f"{where}: shape {dims} has a negative size")
    if dtype.kind in "iu":
        low, high = spec[2] if len(spec) == 3 else (0, INT_HIGH)
        return rng.integers(int(low), int(high), size=dims).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=dims).astype(bool)
    if dtype.kind != "f":
        raise InputError(f"{where}: cannot draw random values of dtype {dtype}; pass inputs= instead")
    values = rng.standard_normal(size=dims)
    if len(spec) == 3:
        low, high = spec[2]
        values = rng.uniform(float(low), float(high), size=dims)
    return values.astype(dtype)


def auto_cases(auto_inputs: object, seed: int) -> list[Case]:
    """Draw inputs from ``((shape, dtype), ...)`` or ``{"input": ((shape, dtype), ...), "num": N}``.

    Floats are standard normal, integers uniform in ``[0, 10)``; a third
    element ``(low, high)`` sets the range. The draws depend only on ``seed``.
    """
    rng = np.random.default_rng(seed)
    if isinstance(auto_inputs, Mapping):
        missing = {"input", "num"} - auto_inputs.keys()
        if missing:
            raise InputError(
                f"auto_inputs as a dict needs the keys 'input' and 'num'; missing {sorted(missing)}"
            )
        num = auto_inputs["num"]
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise InputError(f"auto_inputs['num'] must be a positive int, not {num!r}")
        specs = auto_inputs["input"]
    elif isinstance(auto_inputs, tuple):
        specs, num = auto_inputs, 1
    else:
        raise InputError(
            f"auto_inputs must be ((shape, dtype), ...) or {{'input': ..., 'num': N}}, not a "
            f"{type(auto_inputs).__name__}"
        )
    if not isinstance(specs, Sequence) or not specs:
        raise InputError("auto_inputs gives no input: write ((shape, dtype), ...), one pair per input")
    return [
        tuple(_generate(spec, rng, f"auto_inputs[{index}]") for index, spec in enumerate(specs))
        for _ in range(num)
    ]


def input_cases(inputs: object, auto_inputs: object, seed: int) -> list[Case]:
    """Return the cases to run: from ``inputs`` or from ``auto_inputs``, exactly one of them."""
    if inputs is not None and auto_inputs is not None:
        raise InputError("pass inputs or auto_inputs, not both")
    if inputs is not None:
        return given_cases(inputs)
    if auto_inputs is not None:
        return auto_cases(auto_inputs, seed)
    raise InputError("pass inputs (tensors, arrays or .npy paths) or auto_inputs (((shape, dtype), ...))")


def describe(case: Case) -> str:
    """Shapes and dtypes of a case, for messages: ``(2, 3) float32, (2,) int64``."""
    return ", ".join(f"{tuple(a.shape)} {a.dtype}" for a in case) or "no inputs"
