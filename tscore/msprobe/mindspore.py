"""``from tscore.msprobe.mindspore import PrecisionDebugger``: msprobe.mindspore's entry points.

The same debugger as :mod:`tscore.msprobe.pytorch`: tscore's dump works on any
framework a plugin supports, MindSpore's PyNative mode among them (a graph-mode
network is dumped through MindSpore's own dump, as ``ts.dump.Debugger`` does).
"""

from __future__ import annotations

from tscore.msprobe.debugger import PrecisionDebugger
from tscore.seeding import seed_all

__all__ = ["PrecisionDebugger", "seed_all"]
