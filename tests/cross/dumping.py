"""One step dumped by ``ts.dump.Debugger``: shared by the cross-framework dump tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import tscore as ts


def dump_step(net: object, run: Callable[[], object], path: Path, level: str, task: str) -> Path:
    """Dump ``run()`` (a step of ``net``) at ``level`` with ``task``; return its step/rank folder."""
    debugger = ts.dump.Debugger(task=task, dump_path=str(path), level=level)
    debugger.start(net)
    try:
        run()
    finally:
        debugger.stop()
        debugger.close()
    return path / "step0" / "rank0"
