"""The GPU statistics kernel run by Triton's interpreter on CPU tensors (``TRITON_INTERPRET=1``).

`nox -s torch` installs Triton for these tests: the kernel's source, the slabs its rows go into and
the host's finishing of them are the ones a GPU runs; only the compiler and the direct launch
(tests/gpu) are not.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

# Triton decides at import whether its own language functions are interpreted: torch imports it
# with torch._dynamo, so `nox -s torch` sets this for the whole run, and a run of this folder alone
# sets it here, before anything imports Triton
os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(autouse=True)
def interpreted_kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make ts_torch define its kernel afresh under the interpreter, and forget it afterwards."""
    from ts_torch import fused_stats

    if "triton.language" in sys.modules:
        standard = sys.modules["triton.language"].standard
        if type(standard.max).__name__ != "InterpretedFunction":
            pytest.fail(
                "Triton was imported without TRITON_INTERPRET=1 (torch._dynamo imports it): "
                "run these tests with TRITON_INTERPRET=1 set in the environment"
            )
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv("TSCORE_DUMP_STATS_KERNEL", raising=False)
    for name, value in (("_kernel", None), ("_direct", True)):
        monkeypatch.setattr(fused_stats, name, value)
    monkeypatch.setattr(fused_stats, "_COMPILED", {})
    monkeypatch.setattr(fused_stats, "_SLABS", {})
    yield
