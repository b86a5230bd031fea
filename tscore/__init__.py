"""tscore: find where two runs of a deep-learning model stop agreeing.

``import tscore as ts`` gives the functions TroubleShooter users know
(``ts.save``, ``ts.save_grad``, ``ts.widget.get_pt_grads``, ``ts.seed_all``)
for every framework whose plugin is installed. Importing tscore imports no
framework and changes no framework's settings; the plugins load on first use,
and at the latest when ``ts.save`` or ``ts.save_grad`` is first looked up, so
that a framework that compiles the code calling them (MindSpore's graph mode)
has been told how to treat them (:mod:`tscore.contract.runtime`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tscore.contract.tensors import TensorMeta
from tscore.errors import (
    InvalidNameError,
    PluginError,
    TargetPathError,
    TscoreError,
    UnsupportedObjectError,
)
from tscore.hookspecs import hookimpl
from tscore.plugins import register_plugin, unregister_plugin
from tscore.seeding import seed_all
from tscore.tensors import from_numpy, is_tensor, tensor_meta, to_numpy
from tscore.version import __version__

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
    "dump",
    "fix_random",
    "migrator",
    "ptdbg",
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
    from tscore import dump, migrator, ptdbg, widget
    from tscore.saving import reset_save_id, save, save_grad
    from tscore.widget import fix_random


def _provide_runtime() -> None:
    """Tell every backend, registered from now on, how a compiler treats tscore (``ts_prepare_runtime``).

    tscore's functions run at run time in compiled code; ``save_grad`` is translated instead. It
    is looked up only when a backend asks, so this import still loads no saving code.
    """
    from collections.abc import Callable

    from tscore.contract.runtime import Runtime
    from tscore.plugins import provide_runtime

    def traced() -> tuple[Callable[..., object], ...]:
        from tscore.saving import save_grad

        return (save_grad,)

    provide_runtime(Runtime(package=__name__, traced_from=traced))


_provide_runtime()  # here, before any plugin can load

_MODULES = ("migrator", "dump", "ptdbg", "widget")
_PREPARED_FUNCTIONS = ("save", "save_grad", "reset_save_id")


def __getattr__(name: str) -> object:
    """Resolve the names that need more than the import.

    ``migrator`` imports the compare engine (tqdm, its workers) on first use;
    ``dump`` and ``ptdbg`` the dump engine; ``widget`` and ``fix_random`` the widget's
    functions. So ``import tscore.plugin_api``, which runs this package's code first,
    loads no feature. ``save`` and ``save_grad`` load the plugins first, so every
    framework has been prepared for them (``ts_prepare_runtime``) before a compiler
    meets them in a user's network.
    """
    if name in _MODULES:
        import importlib

        return importlib.import_module(f"tscore.{name}")
    if name == "fix_random":
        from tscore.widget import fix_random

        return fix_random
    if name in _PREPARED_FUNCTIONS:
        from tscore import saving
        from tscore.plugins import get_plugin_manager

        get_plugin_manager()
        function = getattr(saving, name)
        globals()[name] = function
        return function
    raise AttributeError(f"module 'tscore' has no attribute {name!r}")
