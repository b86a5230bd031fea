"""The torch settings that change the numbers a device computes, as ``ts_run_settings`` reports them.

What each one explains is worked out from the precision it trades: TF32 keeps
10 of float32's 23 mantissa bits, so each operand of a product is rounded by up
to 2⁻¹¹ (two operands: about 1e-3, 2e-3 with room for accumulation); bfloat16
keeps 7 (2 * 2⁻⁸, about 1e-2); float16 keeps 10 (about 2e-3). A change of
algorithm (cuDNN's benchmark, deterministic kernels) only reorders float32 sums:
about 1e-5.
"""

from __future__ import annotations

import sys
from typing import Any

from tscore.plugin_api import RunSetting

TF32 = 2e-3
BF16 = 1e-2
REORDERED = 1e-5


def run_settings(device: str) -> list[RunSetting]:
    """Return torch's settings as they hold for ``device`` (``cpu``, ``cuda:0``): TF32 is off on a CPU."""
    torch = sys.modules["torch"]
    kind = device.split(":", 1)[0]
    cuda = kind == "cuda"
    precision = str(torch.get_float32_matmul_precision())
    settings = [
        RunSetting(
            name="torch.backends.cuda.matmul.allow_tf32",
            value=bool(torch.backends.cuda.matmul.allow_tf32) if cuda else False,
            meaning="float32 matrix products on TF32 tensor cores (10 mantissa bits)",
            explains=TF32,
        ),
        RunSetting(
            name="torch.backends.cudnn.allow_tf32",
            value=bool(torch.backends.cudnn.allow_tf32) if cuda else False,
            meaning="float32 cuDNN convolutions on TF32 tensor cores (10 mantissa bits)",
            explains=TF32,
        ),
        RunSetting(
            name="torch.get_float32_matmul_precision()",
            value=precision,
            meaning="'high' lets float32 products use TF32, 'medium' bfloat16",
            explains=BF16,  # the most a change of it can do: 'highest' against 'medium'
        ),
        RunSetting(
            name="torch.are_deterministic_algorithms_enabled()",
            value=bool(torch.are_deterministic_algorithms_enabled()),
            meaning="deterministic kernels: another summation order",
            explains=REORDERED,
        ),
        RunSetting(
            name="autocast",
            value=_autocast(torch, kind),
            meaning="mixed precision: the dtype autocast runs eligible operations in",
            explains=BF16,  # bfloat16's 7 mantissa bits; float16 (10) explains less
        ),
    ]
    if cuda:
        settings.append(
            RunSetting(
                name="torch.backends.cudnn.benchmark",
                value=bool(torch.backends.cudnn.benchmark),
                meaning="cuDNN picks the fastest convolution algorithm: another summation order",
                explains=REORDERED,
            )
        )
    return settings


def _autocast(torch: Any, kind: str) -> str | None:
    """Return the dtype autocast runs in on this kind of device, None when it is off."""
    try:
        if not torch.is_autocast_enabled(kind):
            return None
        return str(torch.get_autocast_dtype(kind)).removeprefix("torch.")
    except (RuntimeError, TypeError, AttributeError):  # a device kind autocast does not know
        return None
