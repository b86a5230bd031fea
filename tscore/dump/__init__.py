"""The API- and module-level dump: ``ts.dump.Debugger``, its config, and the files it writes.

See :mod:`tscore.dump.debugger` for the switch, :mod:`tscore.dump.recorder`
for what a backend reports, :mod:`tscore.dump.writer` for the files, and
:mod:`tscore.ptdbg` for ptdbg_ascend's functions on top of it.
"""

from __future__ import annotations

from tscore.dump.config import DumpConfig, DumpConfigError, load_config
from tscore.dump.debugger import Debugger

__all__ = ["Debugger", "DumpConfig", "DumpConfigError", "load_config"]
