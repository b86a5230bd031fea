"""What a dumped training step hands to Python's oldest garbage-collector generation, by type.

    python benchmarks/gc_promotions.py [--model resnet50] [--device cuda] [--task statistics] [--steps 30]

Objects alive when a generation-1 collection runs move to the oldest generation; once those
moved since the last full collection pass a quarter of the oldest generation, the next full
collection comes, and in a process holding torch it walks hundreds of thousands of objects
(150-240 ms in a dumped ResNet-50 step on an H100 host, stop 38). This counts, for plain steps and
then for dumped ones: collections of each generation per step, the objects moved to the oldest
generation per step with their commonest types, and the milliseconds per step spent collecting.
The counting walks the oldest generation at every generation-1 collection: slow, never a timing.
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class Promotions:
    """A ``gc.callbacks`` entry counting collections, time and what each generation-1 collection promotes."""

    def __init__(self) -> None:
        self.collections: collections.Counter[int] = collections.Counter()
        self.types: collections.Counter[str] = collections.Counter()
        self.promoted = 0
        self.seconds = 0.0
        self._before: set[int] | None = None
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        """Note a collection's start (and the oldest generation then) or its end (and what joined it)."""
        generation = info["generation"]
        if phase == "start":
            self.collections[generation] += 1
            if generation == 1:
                self._before = {id(found) for found in gc.get_objects(2)}
            self._began = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._began
        if generation == 1 and self._before is not None:
            joined = [found for found in gc.get_objects(2) if id(found) not in self._before]
            self.promoted += len(joined)
            self.types.update(type(found).__name__ for found in joined)
            self._before = None


def measure(name: str, run: Callable[[], None], steps: int) -> None:
    """Run ``steps`` steps under a fresh :class:`Promotions` and print what it counted per step."""
    for _ in range(3):
        run()
    gc.collect()
    counter = Promotions()
    gc.callbacks.append(counter)
    try:
        for _ in range(steps):
            run()
    finally:
        gc.callbacks.remove(counter)
    per_step = {
        generation: round(count / steps, 2) for generation, count in sorted(counter.collections.items())
    }
    print(f"{name}: collections per step by generation {per_step}")
    print(f"  moved to the oldest generation per step: {counter.promoted / steps:.0f}")
    print(f"  collecting (counting included) per step: {counter.seconds / steps * 1e3:.2f} ms")
    print(f"  commonest types moved: {counter.types.most_common(12)}")


def main() -> None:
    """Count for plain steps, then for dumped ones (``start``, step, ``stop``, ``step()``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--task", default="statistics", help="statistics, tensor or overflow_check")
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F
    from bench_dump import _model

    import tscore as ts

    torch.set_num_threads(1)
    net, x, y = (part.to(args.device) for part in _model(args.model))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    debugger = ts.dump.Debugger(task=args.task, dump_path=tempfile.mkdtemp(), level="L1")

    def plain() -> None:
        optimizer.zero_grad()
        F.cross_entropy(net(x), y).backward()
        optimizer.step()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    def dumped() -> None:
        debugger.start(net)
        plain()
        debugger.stop()
        debugger.step()

    oldest = len(gc.get_objects(2))
    print(f"{args.model} on {args.device}, {args.task}, {args.steps} steps; oldest generation {oldest}")
    measure("plain", plain, args.steps)
    measure("dumped", dumped, args.steps)


if __name__ == "__main__":
    main()
