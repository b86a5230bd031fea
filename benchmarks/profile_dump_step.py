"""Where a dumped training step spends its time: cProfile of the training thread, or torch's profiler.

    python benchmarks/profile_dump_step.py [--model resnet50] [--device cuda] [--steps 3] [--lines 40]
    python benchmarks/profile_dump_step.py --task overflow_check     # what the overflow check costs
    python benchmarks/profile_dump_step.py --device cuda --kernels    # device time by kernel

cProfile prints the functions by their own time and by cumulative time (tscore's and ts_torch's
only in the second list). On Python 3.12 and later it profiles every thread at once (through
sys.monitoring), so the writer thread's time shows under the training thread's functions: read it
with that in mind, or use 3.11. ``--kernels`` runs torch's profiler instead and prints the
operators by device time (CUDA) or CPU time: how much of a dumped step the statistics' reductions
take on the device; on CUDA a second table by the host's own time shows the launches and any call
that waits for the device (``cudaStreamSynchronize``, ``cudaHostAlloc``). bench_dump.py gives the
ratios, this says what to make cheaper.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    """Profile ``--steps`` dumped steps after two unprofiled ones."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--task", default="statistics", help="statistics, tensor or overflow_check")
    parser.add_argument("--kernels", action="store_true", help="torch's profiler: operators by device time")
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F
    from bench_dump import _model

    import tscore as ts

    net, x, y = _model(args.model)
    net, x, y = net.to(args.device), x.to(args.device), y.to(args.device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    debugger = ts.dump.Debugger(task=args.task, dump_path=tempfile.mkdtemp(), level="L1")

    def dumped() -> None:
        debugger.start(net)
        optimizer.zero_grad()
        F.cross_entropy(net(x), y).backward()
        optimizer.step()
        debugger.stop()
        debugger.step()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    dumped()
    dumped()
    if args.kernels:
        from torch.profiler import ProfilerActivity, profile

        cuda = args.device.startswith("cuda")
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as found:
            for _ in range(args.steps):
                dumped()
        key = "cuda_time_total" if cuda else "self_cpu_time_total"
        table = found.key_averages()
        print(table.table(sort_by=key, row_limit=args.lines))
        if cuda:  # the host's side: launches, copies, and any call that waits for the device
            print(table.table(sort_by="self_cpu_time_total", row_limit=args.lines))
        return
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.steps):
        dumped()
    profile.disable()
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(args.lines)
    stats.sort_stats("cumtime").print_stats("tscore|ts_torch", args.lines)


if __name__ == "__main__":
    main()
