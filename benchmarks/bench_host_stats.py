"""The dump's statistics of host memory: one compiled pass against numpy's and torch's reductions.

    python benchmarks/bench_host_stats.py [--rounds 40]

Three measurements, each side by side in this one process:

1. ``array_stats`` (MindSpore on CPU, msadapter, kernel records of a native dump) on float32
   arrays of 64 to 1M elements: numpy's reductions against the compiled kernel
   (``tscore_array_stats`` in ``tscore/compare/pair_kernel.c``);
2. torch's CPU ``tensor_stats`` on the same sizes: ``aminmax``, ``sum`` and ``vector_norm`` with
   four reads, against the compiled pass on the tensor's memory;
3. a training step of the small ResNet and of the encoder (bench_dump's models, one thread), plain
   and dumped at L1 statistics with each of the two, the three interleaved round by round; the
   lower quartile of the training thread's CPU time, which this shared machine's load moves least.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SIZES = (64, 4096, 131072, 1 << 20)


def _best_us(run: Callable[[], Any], size: int) -> float:
    number = max(20, 400_000 // size)
    return min(timeit.repeat(run, number=number, repeat=5)) / number * 1e6


def per_call() -> None:
    """Print microseconds per call of both summaries, numpy's and torch's against the compiled pass."""
    import numpy as np
    import torch

    import ts_torch.plugin as torch_plugin
    import tscore.array_stats as host
    from tscore import native_kernel

    if native_kernel.load_error() is not None:
        raise SystemExit(f"no compiled kernel to measure: {native_kernel.load_error()}")
    compiled_host_stats = torch_plugin._host_stats
    print("per call, float32, microseconds (best of 5):")
    print(
        f"{'elements':>9} {'numpy':>9} {'compiled':>9} {'ratio':>6} {'torch':>9} {'compiled':>9} {'ratio':>6}"
    )
    for size in SIZES:
        array = np.random.default_rng(0).standard_normal(size).astype(np.float32)
        tensor = torch.from_numpy(array)
        summarise = functools.partial(host.array_stats, array)
        summarise_tensor = functools.partial(torch_plugin.plugin.tensor_stats, tensor)
        host._KERNEL = False
        numpy_us = _best_us(summarise, size)
        host._KERNEL = native_kernel
        kernel_us = _best_us(summarise, size)
        torch_plugin._host_stats = lambda t: None
        torch_us = _best_us(summarise_tensor, size)
        torch_plugin._host_stats = compiled_host_stats
        pass_us = _best_us(summarise_tensor, size)
        print(
            f"{size:9d} {numpy_us:9.1f} {kernel_us:9.1f} {numpy_us / kernel_us:5.1f}x"
            f" {torch_us:9.1f} {pass_us:9.1f} {torch_us / pass_us:5.1f}x"
        )


def per_step(model: str, rounds: int) -> None:
    """Print a plain and two dumped steps of ``model``, interleaved, as ratios to the plain step."""
    import torch
    import torch.nn.functional as F
    from bench_dump import _model

    import ts_torch.plugin as torch_plugin
    import tscore as ts

    torch.set_num_threads(1)
    net, x, y = _model(model)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    compiled = torch_plugin._host_stats
    debugger = ts.dump.Debugger(task="statistics", dump_path=tempfile.mkdtemp(), level="L1")

    def plain() -> None:
        optimizer.zero_grad()
        F.cross_entropy(net(x), y).backward()
        optimizer.step()

    def dumped() -> None:
        debugger.start(net)
        plain()
        debugger.stop()
        debugger.step()

    def with_reductions() -> None:
        torch_plugin._host_stats = lambda t: None
        try:
            dumped()
        finally:
            torch_plugin._host_stats = compiled

    variants = {"plain": plain, "torch reductions": with_reductions, "compiled pass": dumped}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for run in variants.values():
        for _ in range(3):
            run()
    for _ in range(rounds):
        for name, run in variants.items():
            began = time.thread_time()
            run()
            times[name].append(time.thread_time() - began)
    quartile = {name: statistics.quantiles(found, n=4)[0] for name, found in times.items()}
    base = quartile["plain"]
    shown = ", ".join(
        f"{name} {value * 1e3:.2f} ms ({value / base:.2f}x)" for name, value in quartile.items()
    )
    print(f"{model}, L1 statistics, {rounds} rounds: {shown}")


def main() -> None:
    """Run the per-call and the per-step measurements."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    per_call()
    for model in ("resnet", "encoder"):
        per_step(model, args.rounds)


if __name__ == "__main__":
    main()
