"""The built-in plugin for numpy arrays and Python's own random generator.

It is always registered, so ``save`` and the compare engine accept plain
numpy data with no backend installed.
"""

from __future__ import annotations

import random

import numpy as np

from tscore.contract.tensors import FrameworkInfo, TensorMeta
from tscore.hookspecs import hookimpl

FRAMEWORK = "numpy"


@hookimpl
def ts_framework_info() -> FrameworkInfo:
    """Name numpy as the framework of this plugin."""
    return FrameworkInfo.installed(FRAMEWORK)


@hookimpl(trylast=True)
def ts_is_tensor(obj: object) -> bool | None:
    """Claim numpy arrays and numpy scalars."""
    return True if isinstance(obj, (np.ndarray, np.generic)) else None


@hookimpl(trylast=True)
def ts_to_numpy(obj: object, copy: bool) -> np.ndarray | None:
    """Return a C-contiguous array; a copy when ``copy`` is set."""
    if not isinstance(obj, (np.ndarray, np.generic)):
        return None
    return np.array(obj, copy=True, order="C") if copy else np.asarray(obj, order="C")


@hookimpl(trylast=True)
def ts_tensor_meta(obj: object) -> TensorMeta | None:
    """Describe a numpy array or scalar."""
    if not isinstance(obj, (np.ndarray, np.generic)):
        return None
    return TensorMeta(framework=FRAMEWORK, dtype=str(obj.dtype), shape=tuple(obj.shape))


@hookimpl(trylast=True)
def ts_from_numpy(array: np.ndarray, framework: str) -> np.ndarray | None:
    """Answer requests for numpy itself."""
    return np.asarray(array) if framework == FRAMEWORK else None


@hookimpl(trylast=True)
def ts_tensor_stats(tensor: object) -> list[float | None] | None:
    """Max, min, mean and L2 norm of a numpy array (None values when empty)."""
    if not isinstance(tensor, (np.ndarray, np.generic)):
        return None
    values = np.asarray(tensor, dtype=np.float64).ravel()
    if values.size == 0:
        return [None] * 4
    return [float(values.max()), float(values.min()), float(values.mean()), float(np.linalg.norm(values))]


@hookimpl(trylast=True)
def ts_tensor_key(tensor: object) -> int | None:
    """Numpy keeps no version counter: an array is taken as unchanged while it is the same object."""
    return 0 if isinstance(tensor, (np.ndarray, np.generic)) else None


@hookimpl
def ts_seed_all(seed: int) -> str:
    """Seed Python's ``random`` and numpy's legacy global generator."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    return FRAMEWORK
