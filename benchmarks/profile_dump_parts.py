"""Where a dumped training step's time goes, part by part: wall time against the calling thread's CPU time.

    python benchmarks/profile_dump_parts.py [--model resnet50] [--device cuda] [--steps 8]
    python benchmarks/profile_dump_parts.py --task overflow_check

Wraps, for this process only, the statistics' launches (the backend's ``tensor_stats``), the
recorder's ``begin``/``end``/``backward`` (each includes the statistics of its values) and
``enter``/``leave`` (module calls), ``start()``, the writer's
hand-over of a batch (staging the device statistics) and ``stop()``, and prints milliseconds per step
with the count of calls. ``backward`` runs on autograd's device thread on CUDA, so its CPU time is not
in the training thread's: the step's wall time can exceed the training thread's CPU time by as much.
profile_dump_step.py gives the functions and the kernels; this gives the parts and the threads.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    """Time ``--steps`` dumped steps after two untimed ones and print each part per step."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--task", default="statistics", help="statistics, tensor or overflow_check")
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F
    from bench_dump import _model

    import tscore as ts
    import tscore.dump.overflow as overflow_module
    import tscore.dump.recorder as recorder_module
    import tscore.dump.writer as writer_module
    from ts_torch.plugin import plugin as backend

    wall: dict[str, float] = collections.defaultdict(float)
    cpu: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()

    def timed(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def wrapper(*a: Any, **k: Any) -> Any:
            began, began_cpu = time.perf_counter(), time.thread_time()
            try:
                return original(*a, **k)
            finally:
                wall[label] += time.perf_counter() - began
                cpu[label] += time.thread_time() - began_cpu
                calls[label] += 1

        setattr(owner, name, wrapper)

    timed(backend, "tensor_stats", "statistics' launches")
    timed(backend, "tensor_finite_probe", "overflow probes")
    timed(writer_module.DumpWriter, "_hand_over", "hand-over (stage + queue)")
    recorder_class = (
        overflow_module.OverflowRecorder if args.task == "overflow_check" else recorder_module.DumpRecorder
    )
    for name in ("begin", "end", "backward", "enter", "leave"):
        timed(recorder_class, name, f"recorder.{name}")
    torch.set_num_threads(1)
    net, x, y = _model(args.model)
    net, x, y = net.to(args.device), x.to(args.device), y.to(args.device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    debugger = ts.dump.Debugger(task=args.task, dump_path=tempfile.mkdtemp(), level="L1")
    cuda = args.device.startswith("cuda")

    def dumped() -> None:
        began, began_cpu = time.perf_counter(), time.thread_time()
        debugger.start(net)
        wall["start()"] += time.perf_counter() - began
        cpu["start()"] += time.thread_time() - began_cpu
        calls["start()"] += 1
        optimizer.zero_grad()
        F.cross_entropy(net(x), y).backward()
        optimizer.step()
        began, began_cpu = time.perf_counter(), time.thread_time()
        debugger.stop()
        wall["stop()"] += time.perf_counter() - began
        cpu["stop()"] += time.thread_time() - began_cpu
        calls["stop()"] += 1
        debugger.step()
        if cuda:
            torch.cuda.synchronize()

    for _ in range(2):
        dumped()
    wall.clear(), cpu.clear(), calls.clear()
    writer_before = debugger.totals["writer_cpu_seconds"]
    began, began_cpu = time.perf_counter(), time.thread_time()
    for _ in range(args.steps):
        dumped()
    step_wall = (time.perf_counter() - began) / args.steps * 1e3
    step_cpu = (time.thread_time() - began_cpu) / args.steps * 1e3
    writer = (debugger.totals["writer_cpu_seconds"] - writer_before) / args.steps * 1e3
    print(
        f"{args.model} on {args.device}: step wall {step_wall:.1f} ms, training thread CPU "
        f"{step_cpu:.1f} ms, writer thread CPU {writer:.1f} ms"
    )
    for label in wall:
        print(
            f"  {label:28s} wall {wall[label] / args.steps * 1e3:7.2f}  "
            f"cpu {cpu[label] / args.steps * 1e3:7.2f} ms/step  ({calls[label] // args.steps}/step)"
        )


if __name__ == "__main__":
    main()
