"""Comparing two dumps, API by API: which call goes wrong first, and is the error its own.

Reads tscore's, msprobe's and ptdbg_ascend's dumps (:mod:`.sources`; call by
call in step when both runs made the same calls, :mod:`.streams`), pairs their
calls so that one extra call shifts nothing (:mod:`.pairing`), compares each
pair of values with the compare engine or from the statistics (:mod:`.rows`),
judges each call against its inputs (:mod:`.verdicts`), and writes ptdbg's CSV
and advisor a block of calls at a time (:mod:`.row_stream`, :mod:`.report`).
:mod:`.compare` holds the functions users call: ``compare_dumps``, ptdbg's
``compare`` and ``compare_distributed``.
"""

from __future__ import annotations

from tscore.dump_compare.calls import DumpReadError, DumpSource
from tscore.dump_compare.compare import compare, compare_dumps, compare_sources
from tscore.dump_compare.distributed import compare_distributed
from tscore.dump_compare.report import DumpCompareReport
from tscore.dump_compare.sources import read_dump

__all__ = [
    "DumpCompareReport",
    "DumpReadError",
    "DumpSource",
    "compare",
    "compare_distributed",
    "compare_dumps",
    "compare_sources",
    "read_dump",
]
