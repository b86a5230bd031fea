"""Framework-neutral descriptions of tensors and plugins.

Tensors cross the hook boundary as numpy arrays plus a :class:`TensorMeta`
that remembers what the array was before conversion: its framework, its dtype
(neutral name and the framework's own spelling), its shape and its device.
Networks are described by a :class:`ModelInfo`, which gives each side of a
comparison its label (``torch (cpu)``).
"""

from __future__ import annotations

import functools
import importlib.metadata
import sys

from pydantic import BaseModel, ConfigDict


class TensorMeta(BaseModel):
    """What a tensor was in its own framework.

    ``dtype`` is the neutral name (:mod:`tscore.dtypes`: ``"bfloat16"``),
    the same for every framework, so two runs compare by it even where the
    numpy array that carries the values has another dtype; ``native_dtype``
    keeps the framework's own spelling (``"torch.bfloat16"``, ``"BFloat16"``)
    for people.
    """

    model_config = ConfigDict(frozen=True)

    framework: str
    dtype: str
    shape: tuple[int, ...]
    device: str = "cpu"
    native_dtype: str = ""


class ModelInfo(BaseModel):
    """A plugin's answer to ``ts_model_info``: which framework a network belongs to and where it runs."""

    model_config = ConfigDict(frozen=True)

    framework: str
    device: str = "cpu"

    def label(self) -> str:
        """``torch (cpu)``, ``mindspore (Ascend:0)``: how reports name a side."""
        return f"{self.framework} ({self.device})" if self.device else self.framework


@functools.lru_cache(maxsize=64)
def installed_version(distribution: str) -> str | None:
    """Return the installed version of a package, read once per process (reading parses its metadata)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


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
        return cls(
            name=module, version=installed_version(distribution or module), imported=module in sys.modules
        )
