"""The API- and module-level dump: ``ts.dump.Debugger``, its config, and the files it writes.

See :mod:`tscore.dump.debugger` for the switch, :mod:`tscore.dump.recorder`
for what a backend reports, :mod:`tscore.dump.writer` for the files, and
:mod:`tscore.ptdbg` for ptdbg_ascend's functions on top of it; comparing two
dumps (``compare_dumps``, ptdbg's ``compare``) lives in :mod:`tscore.dump_compare`.
"""

from __future__ import annotations

from typing import Any

from tscore.dump.config import DumpConfig, DumpConfigError, load_config
from tscore.dump.debugger import Debugger

__all__ = [
    "Debugger",
    "DumpCompareReport",
    "DumpConfig",
    "DumpConfigError",
    "compare",
    "compare_distributed",
    "compare_dumps",
    "load_config",
]

_COMPARE = frozenset({"DumpCompareReport", "compare", "compare_distributed", "compare_dumps"})


def __getattr__(name: str) -> Any:
    """Give ``ts.dump.compare_dumps`` and the rest of :mod:`tscore.dump_compare` on first use.

    Imported lazily: the comparison reads this package's names and files, so importing it
    here eagerly would make the two packages import each other.
    """
    if name in _COMPARE:
        import tscore.dump_compare

        return getattr(tscore.dump_compare, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
