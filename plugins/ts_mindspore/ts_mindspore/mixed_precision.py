"""MindSpore's stack of mixed-precision types, set back when the dump stops a step inside a cell.

In PyNative mode a cell made with ``to_float`` (``mixed_precision_type`` set) pushes its type
on an executor-wide stack before ``construct`` and pops it after. An exception raised inside
``construct`` skips the pop: every later call of the process would then run in float16 (seen
with MindSpore 2.10: a float32 ``nn.Dense`` returns float16-rounded values). When tscore stops
the step on purpose (:class:`~tscore.plugin_api.StepStopped`, raised in an API call), the cells
it unwinds are those whose ``_complex_call`` frames are on the Python stack; their pushes are
popped, one each, before the exception leaves the wrapper. Popping more than were pushed
is not harmless either (MindSpore then casts again), so only those frames are counted.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

log = logging.getLogger(__name__)


def _pushing_code() -> Any:
    """Return the code object of the Cell method that pushes and pops the type around ``construct``."""
    from mindspore import nn

    call = getattr(nn.Cell, "_complex_call", None)
    return getattr(call, "__code__", None)


def open_mixed_precision_cells() -> int:
    """Count the cells on the Python stack whose mixed-precision type is pushed and not yet popped."""
    code = _pushing_code()
    if code is None:
        return 0
    count = 0
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            cell = frame.f_locals.get("self")
            if getattr(cell, "mixed_precision_type", None) is not None:
                count += 1
        frame = frame.f_back
    return count


def pop_mixed_precision(count: int) -> None:
    """Pop ``count`` mixed-precision types off MindSpore's executor stack, as the unwound cells would."""
    if count <= 0:
        return
    from mindspore._c_expression import MixedPrecisionType

    from ts_mindspore.api_capture import pynative_executor

    executor = pynative_executor()
    for _ in range(count):
        executor.set_mixed_precision_type(MixedPrecisionType.NOTSET, False)
    log.debug("dump stopped the step inside %d to_float cell(s): their mixed-precision types popped", count)
