"""Framework-neutral tensor helpers: they ask the plugins, never a framework."""

from __future__ import annotations

import numpy as np

from tscore.contract.tensors import TensorMeta
from tscore.errors import UnsupportedObjectError
from tscore.plugins import get_plugin_manager, hook


def type_name(obj: object) -> str:
    """Return the qualified type name of ``obj`` (``torch.Tensor``), for messages."""
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _unsupported(obj: object, action: str) -> UnsupportedObjectError:
    loaded = ", ".join(get_plugin_manager().loaded_names())
    return UnsupportedObjectError(
        f"cannot {action} an object of type {type_name(obj)}: no loaded tscore plugin claims it "
        f"(loaded: {loaded}). Install the plugin for its framework (ts_torch, ts_mindspore) "
        "or register one with tscore.register_plugin()"
    )


def is_tensor(obj: object) -> bool:
    """Say whether some loaded plugin (numpy included) claims ``obj`` as a tensor."""
    return bool(hook().ts_is_tensor(obj=obj))


def to_numpy(obj: object, copy: bool = True) -> np.ndarray:
    """Convert a tensor of any loaded framework to a numpy array with the same dtype.

    bfloat16 arrives as an ``ml_dtypes.bfloat16`` array. With ``copy=False``
    the array may share memory with the tensor: use it before the tensor
    changes.

    :raises UnsupportedObjectError: naming the type, when no plugin claims ``obj``.
    """
    array = hook().ts_to_numpy(obj=obj, copy=copy)
    if array is None:
        raise _unsupported(obj, "convert")
    return array


def tensor_meta(obj: object) -> TensorMeta:
    """Describe a tensor of any loaded framework: framework, dtype, shape, device.

    :raises UnsupportedObjectError: naming the type, when no plugin claims ``obj``.
    """
    meta = hook().ts_tensor_meta(obj=obj)
    if meta is None:
        raise _unsupported(obj, "describe")
    return meta


def from_numpy(array: np.ndarray, framework: str, like: object | None = None) -> object:
    """Make a tensor of ``framework`` (``"torch"``, ``"mindspore"``, ``"numpy"``) from ``array``.

    :raises UnsupportedObjectError: when no loaded plugin serves ``framework``.
    """
    tensor = hook().ts_from_numpy(array=array, framework=framework, like=like)
    if tensor is None:
        loaded = ", ".join(get_plugin_manager().loaded_names())
        raise UnsupportedObjectError(
            f"no loaded tscore plugin makes {framework!r} tensors (loaded: {loaded})"
        )
    return tensor
