"""Import time of tscore and save throughput against plain np.save, side by side in one run.

Usage: ``nox -s bench`` or ``python benchmarks/bench_save.py [--repeat N] [--json FILE]``.

* import: a fresh interpreter runs ``import numpy`` or ``import tscore``; the
  median over repeats, and tscore's time above numpy's.
* save: the same arrays written by ``np.save`` and by ``tscore.save`` (numpy
  arrays and torch tensors), taking turns file by file so that all see the
  same machine load; medians over repeats and the ratio. Two workloads: many small arrays
  (per-file overhead) and a few large ones (bandwidth).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np


def time_import(module: str, repeat: int) -> float:
    """Median wall time of ``import module`` in a fresh interpreter, in seconds."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    samples = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(repeat)
    ]
    return statistics.median(samples)


def time_interleaved(
    writers: dict[str, tuple[Callable[[str, int, object], None], list]], folder: str
) -> dict[str, float]:
    """Seconds each writer takes for its arrays, taking turns array by array.

    Creating a file on this machine's disk costs a varying 0.1-0.8 ms, so
    the writers alternate per file to see the same conditions.
    """
    totals = dict.fromkeys(writers, 0.0)
    folders = {name: os.path.join(folder, str(k)) for k, name in enumerate(writers)}
    for path in folders.values():
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
    count = len(next(iter(writers.values()))[1])
    for index in range(count):
        for name, (write, arrays) in writers.items():
            start = time.perf_counter()
            write(folders[name], index, arrays[index])
            totals[name] += time.perf_counter() - start
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", default="benchmarks/results/save.json")
    args = parser.parse_args()

    import torch

    import tscore

    rng = np.random.default_rng(0)
    workloads = {
        "2000 x 1 KB": [rng.standard_normal(256).astype(np.float32) for _ in range(2000)],
        "16 x 16 MB": [rng.standard_normal(4 << 20).astype(np.float32) for _ in range(16)],
    }

    def np_save(folder: str, index: int, array: object) -> None:
        np.save(os.path.join(folder, f"{index}_x.npy"), array)

    def ts_save(folder: str, index: int, array: object) -> None:
        tscore.save(os.path.join(folder, "x"), array)

    results: dict[str, object] = {
        "import_numpy_s": time_import("numpy", args.repeat),
        "import_tscore_s": time_import("tscore", args.repeat),
        "save": {},
    }
    rows = []
    with tempfile.TemporaryDirectory(prefix="tscore-bench-") as tmp:
        for label, arrays in workloads.items():
            tensors = [torch.from_numpy(a) for a in arrays]
            total = sum(a.nbytes for a in arrays)
            writers = {
                "np.save": (np_save, arrays),
                "tscore.save numpy": (ts_save, arrays),
                "tscore.save torch": (ts_save, tensors),
            }
            runs: dict[str, list[float]] = {name: [] for name in writers}
            for _ in range(args.repeat):
                for name, seconds in time_interleaved(writers, tmp).items():
                    runs[name].append(seconds)
            base = statistics.median(runs["np.save"])
            for name, samples in runs.items():
                median = statistics.median(samples)
                entry = {
                    "seconds": median,
                    "GB_per_s": total / median / 1e9,
                    "time_vs_np_save": median / base,
                }
                results["save"][f"{label} / {name}"] = entry  # type: ignore[index]
                rows.append(
                    (
                        label,
                        name,
                        f"{median * 1e3:.1f} ms",
                        f"{entry['GB_per_s']:.3f}",
                        f"{entry['time_vs_np_save']:.2f}x",
                    )
                )

    print(f"import numpy  {results['import_numpy_s'] * 1e3:7.1f} ms (median of {args.repeat})")
    print(f"import tscore {results['import_tscore_s'] * 1e3:7.1f} ms (numpy included)")
    from tabulate import tabulate

    print(tabulate(rows, headers=["workload", "writer", "median", "GB/s", "time / np.save"]))
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as stream:
        json.dump(results, stream, indent=2)
    print(f"written {args.json}")


if __name__ == "__main__":
    main()
