"""tscore: find where two runs of a deep-learning model stop agreeing.

``import tscore as ts`` gives the functions TroubleShooter users know
(``ts.save``, ``ts.save_grad``, ``ts.widget.get_pt_grads``, ``ts.seed_all``)
for every framework whose plugin is installed. Importing tscore imports no
framework; plugins load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tscore import mindspore_jit, widget
from tscore.errors import (
    InvalidNameError,
    PluginError,
    TargetPathError,
    TscoreError,
    UnsupportedObjectError,
)
from tscore.hookspecs import hookimpl
from tscore.plugins import register_plugin, unregister_plugin
from tscore.saving import reset_save_id, save, save_grad
from tscore.seeding import seed_all
from tscore.tensor_meta import TensorMeta
from tscore.tensors import from_numpy, is_tensor, tensor_meta, to_numpy

__version__ = "0.1.0"

__all__ = [
    "InvalidNameError",
    "PluginError",
    "TargetPathError",
    "TensorMeta",
    "TscoreError",
    "UnsupportedObjectError",
    "__version__",
    "from_numpy",
    "hookimpl",
    "is_tensor",
    "migrator",
    "register_plugin",
    "reset_save_id",
    "save",
    "save_grad",
    "seed_all",
    "tensor_meta",
    "to_numpy",
    "unregister_plugin",
    "widget",
]

if TYPE_CHECKING:
    from tscore import migrator


def __getattr__(name: str) -> object:
    """Import ``tscore.migrator`` (the compare engine, with tqdm and its workers) on first use only."""
    if name == "migrator":
        import tscore.migrator

        return tscore.migrator
    raise AttributeError(f"module 'tscore' has no attribute {name!r}")


mindspore_jit.declare_runtime_module()
