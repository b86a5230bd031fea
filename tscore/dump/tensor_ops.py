"""What the dump asks of a tensor's backend, found once per tensor type.

:class:`TensorOps` binds one backend's methods (dtype, device, statistics,
host copies, overflow probes, identity keys), or goes through the hooks when
no :class:`~tscore.backend.Backend` owns the type; :class:`TensorDispatch`
finds it for each value's type once per step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tscore.contract.settings import RunSetting
from tscore.contract.transfers import PendingArray
from tscore.plugins import get_plugin_manager, hook
from tscore.tensors import to_numpy


class TensorOps:
    """What the recorder asks of a tensor's backend: its dtype, device, statistics and identity key."""

    def __init__(self, backend: Any) -> None:
        """Bind the backend (a :class:`tscore.backend.Backend`), or None to go through the hooks.

        A Backend's methods are bound here, once: the recorder asks each of them of every tensor.
        """
        self._backend = backend
        self._dtypes: dict[str, str] = {}
        self._abs_max = backend is not None and backend.implements("ts_tensor_abs_max")
        self._probe = backend is None or backend.implements("ts_tensor_finite_probe")
        self._host_copy = backend is None or backend.implements("ts_copy_to_host")
        self._key = backend is not None and backend.implements("ts_tensor_key")  # else: none, write each
        self.framework = "" if backend is None else str(backend.framework)
        self._grad = backend is not None and backend.implements("ts_tensor_requires_grad")
        if backend is not None:
            self._native_dtype = backend.tensor_dtype
            self._device_of = backend.tensor_device
            self.stats = backend.tensor_stats  # type: ignore[method-assign]
            if self._key:
                self.key = backend.tensor_key  # type: ignore[method-assign]
            if self._grad:
                self._grad_of = backend.tensor_requires_grad

    def dtype(self, tensor: Any) -> str:
        """Return the neutral dtype name."""
        if self._backend is None:
            return str(hook().ts_tensor_meta(obj=tensor).dtype)
        native = self._native_dtype(tensor)
        neutral = self._dtypes.get(native)
        if neutral is None:
            neutral = self._dtypes[native] = self._backend.neutral_dtype(native)
        return neutral

    def device(self, tensor: Any) -> str:
        """Return where the tensor lives."""
        if self._backend is None:
            return str(hook().ts_tensor_meta(obj=tensor).device)
        return str(self._device_of(tensor))

    def stats(self, tensor: Any) -> Any:
        """Return max, min, mean and L2 norm, computed by the backend on the tensor's device."""
        return hook().ts_tensor_stats(tensor=tensor)

    def to_numpy(self, tensor: Any, copy: bool) -> Any:
        """Return the tensor's values as a host numpy array (the caller's own when ``copy``)."""
        if self._backend is None:
            return to_numpy(tensor, copy=copy)
        return self._backend.to_numpy(tensor, copy)

    def host_copy(self, tensor: Any) -> np.ndarray | PendingArray:
        """Return a copy of the tensor for its file: started on the device's side, or made here.

        A backend with ``ts_copy_to_host`` copies a device tensor asynchronously (the writer's
        thread waits for it); a tensor in host memory, or any other backend's, is copied now.
        """
        if self._host_copy:
            pending = (
                self._backend.copy_to_host(tensor)
                if self._backend is not None
                else hook().ts_copy_to_host(tensor=tensor)
            )
            if pending is not None:
                return pending  # type: ignore[no-any-return]
        return self.to_numpy(tensor, True)  # type: ignore[no-any-return]

    def settings(self, device: str) -> list[dict[str, Any]]:
        """Return the settings that change numbers on ``device``, as JSON (none when the backend has none)."""
        found = hook().ts_run_settings(framework=self.framework, device=device)
        return [RunSetting.model_validate(s).model_dump() for s in found or ()]

    def abs_max(self, tensor: Any, *, wait: bool = True) -> Any:
        """Return the largest |x| (NaN, inf when present; None: not floating), computed on the device.

        A backend without ``ts_tensor_abs_max`` is asked for its statistics instead.

        :param wait: False: a value the backend left on its device (unread) comes back as it is,
            to be read with others (:meth:`read_scalars`); a number comes back as a float.
        """
        if not self._abs_max:
            found = hook().ts_tensor_abs_max(tensor=tensor)
            if found is None:
                stats = self.stats(tensor)
                if stats is None or not self.dtype(tensor).startswith(("float", "bfloat")):
                    return None
                high, low = float(stats[0]), float(stats[1])
                return max(high, -low) if high == high and low == low else math.nan
        else:
            found = self._backend.tensor_abs_max(tensor)
        return _number(found, wait)

    def finite_probe(self, tensor: Any, *, wait: bool = True) -> Any:
        """Return a number that is finite when every element is (a sum on the device); None: not answered.

        The overflow check's cheap first look; it asks :meth:`abs_max` when this is None or not
        finite (a sum of finite values may overflow). ``wait`` as for :meth:`abs_max`.
        """
        if not self._probe:
            return None
        if self._backend is None:
            found = hook().ts_tensor_finite_probe(tensor=tensor)
        else:
            found = self._backend.tensor_finite_probe(tensor)
        return _number(found, wait)

    def read_scalars(self, values: Sequence[Any]) -> list[float]:
        """Read many values this backend left on its device (``ts_read_scalars``: one copy), as floats.

        A backend without that hook has each one read with ``float()``.
        """
        if self._backend is None:
            found = hook().ts_read_scalars(values=list(values))
        elif self._backend.implements("ts_read_scalars"):
            found = self._backend.read_scalars(values)
        else:
            found = None
        if found is None:
            return [float(value) for value in values]
        return [float(value) for value in found]

    def requires_grad(self, tensor: Any) -> bool | None:
        """Return whether the tensor takes part in autograd; None when its backend does not say."""
        if self._grad:
            found = self._grad_of(tensor)
        else:
            found = hook().ts_tensor_requires_grad(tensor=tensor)
        return found if isinstance(found, bool) else None

    def key(self, tensor: Any) -> Any:
        """Return an identity of the tensor's current contents, or None when the backend gives none."""
        return hook().ts_tensor_key(tensor=tensor)


def _number(found: Any, wait: bool) -> Any:
    """Return a backend's answer as a float; with ``wait=False`` one left on its device stays as it is."""
    if found is None or type(found) is float:  # the common case, read on the host: as it is
        return found
    if wait or isinstance(found, (int, float, np.generic)):
        return float(found)
    return found


class TensorDispatch:
    """The :class:`TensorOps` for a value's type, found once per type: a Backend's methods, else the hooks."""

    def __init__(self) -> None:
        self._by_type: dict[type, TensorOps | None] = {}
        self._frameworks: dict[str, TensorOps] = {}
        self.frameworks: set[str] = set()  # of the tensors met: which framework the dump recorded

    def for_framework(self, framework: str) -> TensorOps:
        """Return the ops of ``framework``'s tensors for what needs no tensor (its settings)."""
        ops = self._frameworks.get(framework)
        if ops is None:
            backend = next((b for b in get_plugin_manager().backends() if b.framework == framework), None)
            ops = self._frameworks[framework] = TensorOps(backend)
            ops.framework = framework
        return ops

    def of(self, value: Any) -> TensorOps | None:
        """Return the ops for ``value``, or None when it is no tensor of any loaded plugin."""
        cls = type(value)
        if cls in self._by_type:
            return self._by_type[cls]
        ops: TensorOps | None = None
        for plugin in get_plugin_manager().backends():  # one that builds on another framework first
            if plugin.implements("ts_tensor_stats") and plugin.owns_tensor(value):
                ops = TensorOps(plugin)
                self.frameworks.add(plugin.framework)
                break
        if ops is None and hook().ts_is_tensor(obj=value):
            ops = TensorOps(None)
            ops.framework = str(hook().ts_tensor_meta(obj=value).framework)
            self.frameworks.add(ops.framework)
        self._by_type[cls] = ops
        return ops
