"""Checkpoint conversion and reading: tscore against torch.load + mindspore.save_checkpoint, side by side.

Usage: ``nox -s bench_checkpoint`` or
``python benchmarks/bench_checkpoint.py [--repeat N] [--dir DIR] [--gib SIZE]``.

The workload is a torch state dict of about 1 GiB (float32 Linear weights,
Conv1d weights that the map reshapes, BatchNorm entries that it renames and
drops), saved with ``torch.save``, and its weight map from ``get_weight_map``.

Each measurement runs in a fresh interpreter that has already imported torch,
MindSpore and tscore, so only the operation is timed; the tools take turns run
by run, from the page cache. Memory is sampled inside the child every 5 ms from
``/proc/self/status``: the peak of ``VmRSS`` (everything resident, file pages
of mapped checkpoints included) and of ``RssAnon`` (private memory only),
above their level before the operation.

Operations:

* ``convert/baseline``: ``torch.load(weights_only=True)`` then
  ``mindspore.save_checkpoint`` of the same tensors (no renaming).
* ``convert/tscore``: ``ts.migrator.convert_weight(map, pth, ckpt)``.
* ``read/mindspore``: ``mindspore.load_checkpoint(ckpt)``. MindSpore refuses
  files larger than its estimate of free memory, which counts the page cache
  as used (FRAMEWORKS.md); that check is switched off in the child so the load
  itself can be timed.
* ``read/tscore-mmap``: ``read_ckpt(ckpt)`` and one read of every 4 KiB page.
* ``read/tscore-memory``: ``read_ckpt(ckpt, use_mmap=False)``: the whole file in memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys, threading, time
import numpy as np
import torch
import mindspore as ms
import mindspore.train.serialization as serialization
import tscore as ts
from tscore.checkpoint.ckpt_format import read_ckpt

operation, pth, weight_map, ckpt, out = sys.argv[1:6]

def status():
    values = {}
    with open("/proc/self/status") as stream:
        for line in stream:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                values[key] = int(rest.split()[0]) / 1024
    return values

def baseline_convert():
    state = torch.load(pth, map_location="cpu", weights_only=True)
    ms.save_checkpoint([{"name": k, "data": ms.Tensor(v.numpy())} for k, v in state.items()], out)

def tscore_convert():
    ts.migrator.convert_weight(weight_map, pth, out, print_conv_info=False)

def ms_read():
    serialization._check_checkpoint_protobuf_size = lambda *args: None
    loaded = ms.load_checkpoint(ckpt)
    assert len(loaded) > 0

def tscore_read_mmap():
    contents = read_ckpt(ckpt)
    for array in contents.params.values():
        flat = array.reshape(-1)
        flat[:: max(1, 4096 // flat.itemsize)].sum()

def tscore_read_memory():
    read_ckpt(ckpt, use_mmap=False)

run = {"convert/baseline": baseline_convert, "convert/tscore": tscore_convert, "read/mindspore": ms_read,
       "read/tscore-mmap": tscore_read_mmap, "read/tscore-memory": tscore_read_memory}[operation]
if os.path.exists(out):
    os.remove(out)
before = status()
peak = dict(before)
done = threading.Event()

def sample():
    while not done.is_set():
        for key, value in status().items():
            peak[key] = max(peak[key], value)
        time.sleep(0.005)

sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
start = time.perf_counter()
run()
seconds = time.perf_counter() - start
done.set()
sampler.join()
for key, value in status().items():
    peak[key] = max(peak[key], value)
print(json.dumps({"seconds": seconds, "rss": peak["VmRSS"] - before["VmRSS"],
                  "anon": peak["RssAnon"] - before["RssAnon"]}))
"""

OPERATIONS = (
    "convert/baseline",
    "convert/tscore",
    "read/mindspore",
    "read/tscore-mmap",
    "read/tscore-memory",
)


def make_workload(folder: str, gib: float) -> tuple[str, str, str, int]:
    """Write the state dict, its weight map and a converted .ckpt; return their paths and the size."""
    import torch

    import tscore as ts

    pth = os.path.join(folder, "net.pth")
    weight_map = os.path.join(folder, "map.json")
    ckpt = os.path.join(folder, "net.ckpt")
    layers: list[torch.nn.Module] = []
    block_bytes = 2 * 4096 * 2048 * 4  # two Linear weights
    for _ in range(max(1, int(gib * 0.9 * 2**30 // block_bytes))):
        layers += [torch.nn.Linear(2048, 4096, bias=False), torch.nn.BatchNorm1d(4096)]
        layers += [torch.nn.Linear(4096, 2048, bias=False)]
    layers += [
        torch.nn.Conv1d(512, 512, 16) for _ in range(max(1, int(gib * 0.1 * 2**30 // (512 * 512 * 64))))
    ]
    net = torch.nn.Sequential(*layers)
    if not os.path.exists(pth):
        torch.save(net.state_dict(), pth)
    ts.migrator.get_weight_map(pt_net=net, weight_map_save_path=weight_map)
    if not os.path.exists(ckpt):
        ts.migrator.convert_weight(weight_map, pth, ckpt, print_conv_info=False)
    return pth, weight_map, ckpt, os.path.getsize(pth)


def run_child(operation: str, pth: str, weight_map: str, ckpt: str, out: str) -> dict[str, float]:
    """Run one operation in a fresh interpreter; return its seconds and peak extra memory (MiB)."""
    env = {**os.environ, "GLOG_v": "3"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, operation, pth, weight_map, ckpt, out],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{operation} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def warm(path: str) -> None:
    """Read a file once so that every run starts from the page cache."""
    with open(path, "rb") as stream:
        while stream.read(64 << 20):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "tscore_bench_checkpoint"))
    parser.add_argument("--gib", type=float, default=1.0, help="state dict size in GiB (default 1)")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    pth, weight_map, ckpt, size = make_workload(args.dir, args.gib)
    out = os.path.join(args.dir, "out.ckpt")
    results: dict[str, list[dict[str, float]]] = {op: [] for op in OPERATIONS}
    for _ in range(args.repeat):
        for operation in OPERATIONS:
            warm(pth)
            warm(ckpt)
            results[operation].append(run_child(operation, pth, weight_map, ckpt, out))
    size_mib = size / 2**20
    print(f"state dict: {size_mib:.0f} MiB ({pth}); medians of {args.repeat} runs")
    print(f"{'operation':<20} {'seconds':>8} {'MiB/s':>8} {'peak RSS':>16} {'peak anon':>16}")
    medians = {}
    for operation, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        rss = statistics.median(r["rss"] for r in runs)
        anon = statistics.median(r["anon"] for r in runs)
        medians[operation] = seconds
        print(
            f"{operation:<20} {seconds:8.2f} {size_mib / seconds:8.0f} "
            f"{rss:8.0f} ({rss / size_mib:4.2f}x) {anon:8.0f} ({anon / size_mib:4.2f}x)"
        )
    convert_ratio = medians["convert/tscore"] / medians["convert/baseline"]
    print(f"convert: tscore takes {convert_ratio:.2f}x the time of torch.load + mindspore.save_checkpoint")
    for reader in ("read/tscore-mmap", "read/tscore-memory"):
        speedup = medians["read/mindspore"] / medians[reader]
        print(f"{reader}: {speedup:.1f}x as fast as mindspore.load_checkpoint")


if __name__ == "__main__":
    main()
