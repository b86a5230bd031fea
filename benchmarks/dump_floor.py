"""Where a dumped step's cost goes before any call is recorded: the floor under bench_dump's ratios.

One interpreter, one torch thread, the step of ``bench_dump.py`` (forward, backward, SGD step) run
in five ways, interleaved step by step so that the machine's drift falls on all of them alike:

* ``plain``: no dump;
* ``folder``: ``start(None)``, step, ``stop()``, ``step()`` with no capture at all: the step's folder,
  its lock, the writer, ``dump_info.json`` twice;
* ``+modules``: the same with the model handed to ``start``: its module hooks on and off each step;
* ``+mode``: and torch's API capture installed, with no function named an API, so every call
  passes through the capture's handler and none is recorded;
* ``dump``: the statistics dump (L1) as users run it.

The first four record nothing, so what they cost is the least any capture with the same per-step
promises (a folder per step, nothing left installed after ``stop()``) pays. The torch capture's
internals are patched for the middle rows: a measurement, not a way to run a dump.

    python benchmarks/dump_floor.py [--models resnet encoder] [--steps 40] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_dump import MODELS, _model, interleaved

WAYS = ("plain", "folder", "+modules", "+mode", "dump")


def floor(model_name: str, steps: int, root: str) -> dict[str, Any]:
    """Time the five ways for one model, interleaved; return each one's median and ratio to plain."""
    import torch
    import torch.nn.functional as F

    import tscore as ts
    from ts_torch import compiled_capture
    from tscore.dump import debugger as debugger_module

    torch.set_num_threads(1)
    # the rows without a capture would each warn that nothing reports API calls: they mean it
    logging.getLogger(debugger_module.__name__).setLevel(logging.ERROR)
    net, x, y = _model(model_name)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    debugger = ts.dump.Debugger(task="statistics", dump_path=root, level="L1")
    if compiled_capture.extension() is None:  # the Python capture's handler would record in '+mode'
        raise SystemExit(
            "no compiled torch capture here (the warning above says why): its floor cannot be measured"
        )
    api_hooks, api_name = debugger_module._api_hooks, compiled_capture.api_name

    def no_capture() -> Any:
        return lambda recorder: []

    def step(way: str) -> float:
        debugger_module._api_hooks = api_hooks if way in ("+mode", "dump") else no_capture
        compiled_capture.api_name = api_name if way == "dump" else (lambda function: None)
        began = time.perf_counter()
        if way != "plain":
            debugger.start(None if way == "folder" else net)
        optimizer.zero_grad()
        F.cross_entropy(net(x), y).backward()
        optimizer.step()
        if way != "plain":
            debugger.stop()
            debugger.step()
        return time.perf_counter() - began

    try:  # the first rounds pay for imports and the capture's build
        result: dict[str, Any] = {"model": model_name, "steps": steps, **interleaved(step, WAYS, steps)}
    finally:
        debugger_module._api_hooks, compiled_capture.api_name = api_hooks, api_name
        debugger.close()
    return result


def main() -> None:
    """Run every model and print one table of medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    rows = []
    for model in args.models:
        root = tempfile.mkdtemp(prefix="dump_floor_", dir=".")
        try:
            rows.append(floor(model, args.steps, root))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{'model':8} " + " ".join(f"{way:>16}" for way in WAYS))
    for row in rows:
        cells = " ".join(f"{row[w]['ms']:8.2f}ms {row[w]['ratio']:4.2f}x" for w in WAYS)
        print(f"{row['model']:8} {cells}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as stream:
            json.dump(rows, stream, indent=2)


if __name__ == "__main__":
    main()
