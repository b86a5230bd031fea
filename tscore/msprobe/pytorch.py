"""``from tscore.msprobe.pytorch import PrecisionDebugger, seed_all``: msprobe.pytorch's entry points.

Those tscore has (the manual's "Coming from msprobe" page, docs/coming-from/msprobe.md, lists every one):
:class:`PrecisionDebugger`, :func:`seed_all`, and the comparison of two dumps,
:func:`compare` and :func:`compare_distributed` (ptdbg's signatures).
"""

from __future__ import annotations

from tscore.dump_compare.compare import compare
from tscore.dump_compare.distributed import compare_distributed
from tscore.msprobe.debugger import PrecisionDebugger
from tscore.seeding import seed_all

__all__ = ["PrecisionDebugger", "compare", "compare_distributed", "seed_all"]
