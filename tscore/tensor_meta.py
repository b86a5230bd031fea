"""Framework-neutral descriptions of tensors and plugins.

Tensors cross the hook boundary as numpy arrays plus a :class:`TensorMeta`
that remembers what the array was before conversion: its framework, its dtype
as the framework spells it, its shape and its device.
"""

from __future__ import annotations

import importlib.metadata
import sys

from pydantic import BaseModel, ConfigDict


class TensorMeta(BaseModel):
    """What a tensor was in its own framework.

    ``dtype`` keeps the framework's own spelling (``"torch.bfloat16"``,
    ``"BFloat16"``), so a report can show it even where the numpy array that
    carries the values has another dtype.
    """

    model_config = ConfigDict(frozen=True)

    framework: str
    dtype: str
    shape: tuple[int, ...]
    device: str = "cpu"


class FrameworkInfo(BaseModel):
    """A plugin's answer to ``ts_framework_info``: which framework it serves."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str | None = None
    imported: bool = False

    @classmethod
    def installed(cls, module: str, distribution: str | None = None) -> FrameworkInfo:
        """Describe the installed framework whose top-level module is ``module``, without importing it.

        :param module: the import name (``"torch"``), also the framework name.
        :param distribution: the package name when it differs from ``module``.
        """
        try:
            version: str | None = importlib.metadata.version(distribution or module)
        except importlib.metadata.PackageNotFoundError:
            version = None
        return cls(name=module, version=version, imported=module in sys.modules)
