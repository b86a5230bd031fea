"""Compare throughput and memory: tscore against TroubleShooter 1.0.18, side by side in one run.

Usage: ``nox -s bench_compare`` or
``python benchmarks/bench_compare.py --ts-python VENV/bin/python [--repeat N] [--dir DIR]``.

Workloads, written once under ``--dir`` (about 4 GB of disk):

* ``mixed``: two folders of 150 float32 files of 1 KB and 50 of 20 MB (about
  2 GB in all), the target side with noise on every element.
* ``big``: two folders with one 1 GB float32 array each.
* ``many-N`` (with ``--many N ...``): two folders of N small float32 arrays
  (16 elements) each, every tenth pair differing; N = 100,000 and 1,000,000
  measure that time per pair and memory stay flat with the number of files
  (TroubleShooter runs up to ``--ts-many-max`` pairs). ``--many-only`` skips
  the other workloads. About 8 KB of disk per pair (two 4 KB blocks).

Each tool runs in its own fresh interpreter, taking turns run by run, with
the files already in the page cache. The child times only the compare call;
the parent samples the anonymous memory (``Pss_Anon`` of
``/proc/PID/smaps_rollup``, summed over the child and all its descendants,
so pages shared after fork count once and file pages mapped from the page
cache not at all) and reports the peak above the level before the call.
Throughput is bytes of both folders / wall time of the call. The floor is
one float32 subtract pass over the same mapped files, in this process.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

CHILD = r"""
import sys, time, contextlib, io
tool, orig, target, options = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
if tool == "troubleshooter":
    import troubleshooter as ts
    run = lambda: ts.migrator.compare_npy_dir(orig, target)
else:
    import tscore as ts
    kernel = options[0]
    run = lambda: ts.migrator.compare_npy_dir(orig, target, print_level=0, kernel=kernel)
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    run()
print(time.perf_counter() - start, flush=True)
"""


def pss_anon_kib(pid: int) -> int:
    """Anonymous memory of one process in KiB, proportional to sharing; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as stream:
            for line in stream:
                if line.startswith("Pss_Anon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stream:
                    parent = int(stream.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def tree_anon_mib(root: int) -> float:
    """Anonymous memory of a process tree in MiB."""
    return sum(pss_anon_kib(pid) for pid in descendants(root)) / 1024


def run_child(python: str, tool: str, orig: str, target: str, options: list[str]) -> tuple[float, float]:
    """Run one compare in a fresh interpreter; return (seconds, peak extra anonymous MiB)."""
    child = subprocess.Popen(
        [python, "-c", CHILD, tool, orig, target, *options],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin and child.stdout
    if child.stdout.readline().strip() != "ready":
        raise RuntimeError(f"{tool} did not start")
    baseline = tree_anon_mib(child.pid)
    peak = baseline
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_anon_mib(child.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    child.stdin.write("go\n")
    child.stdin.flush()
    seconds = float(child.stdout.readline())
    done.set()
    sampler.join()
    child.wait()
    return seconds, peak - baseline


def write_pair(folder: str, name: str, shape: tuple[int, ...], rng: np.random.Generator) -> None:
    """Write an array and its noisy twin into ``folder/orig`` and ``folder/target``."""
    orig = rng.standard_normal(shape, dtype=np.float32)
    np.save(os.path.join(folder, "orig", name), orig)
    orig += rng.standard_normal(shape, dtype=np.float32) * np.float32(1e-5)
    np.save(os.path.join(folder, "target", name), orig)


def make_workloads(root: str) -> dict[str, str]:
    """Write the workloads once; return {name: folder holding orig/ and target/}."""
    rng = np.random.default_rng(0)
    layout = {
        "mixed": [(f"small_{i:03d}.npy", (256,)) for i in range(150)]
        + [(f"large_{i:02d}.npy", (5_000_000,)) for i in range(50)],
        "big": [("weights.npy", (268_435_456,))],
    }
    folders = {}
    for name, files in layout.items():
        folder = os.path.join(root, name)
        folders[name] = folder
        marker = os.path.join(folder, "complete")
        if os.path.exists(marker):
            continue
        for side in ("orig", "target"):
            os.makedirs(os.path.join(folder, side), exist_ok=True)
        for file, shape in files:
            write_pair(folder, file, shape, rng)
        open(marker, "w").close()
    return folders


def make_many(root: str, count: int) -> str:
    """Write ``count`` pairs of small arrays once (one header reused, no np.save per file)."""
    folder = os.path.join(root, f"many-{count}")
    marker = os.path.join(folder, "complete")
    if os.path.exists(marker):
        return folder
    rng = np.random.default_rng(1)
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(16, dtype=np.float32))
    header = buffer.getvalue()[: -16 * 4]
    for side in ("orig", "target"):
        os.makedirs(os.path.join(folder, side), exist_ok=True)
    for start in range(0, count, 10_000):
        block = rng.standard_normal((min(10_000, count - start), 16), dtype=np.float32)
        noisy = block.copy()
        noisy[::10] += np.float32(0.01)
        for offset, (orig, target) in enumerate(zip(block, noisy, strict=True)):
            name = f"{start + offset}_tensor.npy"
            for side, row in (("orig", orig), ("target", target)):
                with open(os.path.join(folder, side, name), "wb") as stream:
                    stream.write(header + row.tobytes())
    open(marker, "w").close()
    return folder


def folder_bytes(folder: str) -> int:
    """Bytes of every file under orig/ and target/."""
    return sum(
        os.path.getsize(os.path.join(folder, side, f))
        for side in ("orig", "target")
        for f in os.listdir(os.path.join(folder, side))
    )


def warm(folder: str) -> None:
    """Read every file once so that all runs start from the page cache."""
    for side in ("orig", "target"):
        for name in os.listdir(os.path.join(folder, side)):
            with open(os.path.join(folder, side, name), "rb") as stream:
                while stream.read(1 << 24):
                    pass


def subtract_floor(folder: str) -> float:
    """Seconds of one float32 subtract pass over the mapped files of both sides."""
    start = time.perf_counter()
    for name in sorted(os.listdir(os.path.join(folder, "orig"))):
        a = np.load(os.path.join(folder, "orig", name), mmap_mode="r")
        b = np.load(os.path.join(folder, "target", name), mmap_mode="r")
        for s in range(0, a.size, 1 << 20):
            np.subtract(a[s : s + (1 << 20)], b[s : s + (1 << 20)])
    return time.perf_counter() - start


def main() -> None:
    """Run every tool on every workload, taking turns, and print and save the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ts-python", help="python of a venv with troubleshooter==1.0.18 (omit to skip it)")
    parser.add_argument("--dir", default="benchmarks/results/compare_data")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-ts-big", action="store_true", help="skip TroubleShooter on the 1 GB pair")
    parser.add_argument("--json", default="benchmarks/results/compare.json")
    parser.add_argument("--many", type=int, nargs="*", default=[], metavar="N", help="pairs of small files")
    parser.add_argument("--many-only", action="store_true", help="run only the --many workloads")
    parser.add_argument(
        "--ts-many-max", type=int, default=100_000, help="largest --many run for TroubleShooter"
    )
    args = parser.parse_args()

    folders = {} if args.many_only else make_workloads(args.dir)
    for count in args.many:
        folders[f"many-{count}"] = make_many(args.dir, count)
    tools: list[tuple[str, str, list[str]]] = [
        ("tscore", sys.executable, ["auto"]),
        ("tscore", sys.executable, ["c"]),
        ("tscore", sys.executable, ["numba"]),
        ("tscore", sys.executable, ["numpy"]),
    ]
    if args.ts_python:
        tools.append(("troubleshooter", args.ts_python, []))
    results: dict[str, dict[str, dict[str, float]]] = {}
    for workload, folder in folders.items():
        size = folder_bytes(folder)
        warm(folder)
        samples: dict[str, list[tuple[float, float]]] = {}
        for _ in range(args.repeat):
            for tool, python, options in tools:
                if tool == "troubleshooter" and workload == "big" and args.skip_ts_big:
                    continue
                many = workload.startswith("many-")
                if many and tool == "troubleshooter" and int(workload[5:]) > args.ts_many_max:
                    continue
                if many and options and options[0] in ("c", "numba"):
                    continue  # small files never reach the compiled kernels
                label = f"{tool} ({options[0]})" if options else tool
                samples.setdefault(label, []).append(
                    run_child(
                        python, tool, os.path.join(folder, "orig"), os.path.join(folder, "target"), options
                    )
                )
        many = workload.startswith("many-")
        floor = None if many else statistics.median(subtract_floor(folder) for _ in range(args.repeat))
        rows = {
            label: {
                "seconds": statistics.median(s for s, _ in runs),
                "gb_per_s": size / statistics.median(s for s, _ in runs) / 1e9,
                "peak_extra_anon_mib": max(m for _, m in runs),
            }
            for label, runs in samples.items()
        }
        if floor is not None:  # mapping a million files costs more than comparing them: no floor there
            rows["float32 subtract floor"] = {"seconds": floor, "gb_per_s": size / floor / 1e9}
        results[workload] = rows
        print(f"\n{workload}: {size / 1e9:.2f} GB in both folders, median of {args.repeat}")
        if workload.startswith("many-"):
            pairs = int(workload[5:])
            for row in rows.values():
                row["us_per_pair"] = row["seconds"] / pairs * 1e6
        reference = rows.get("troubleshooter", {}).get("gb_per_s")
        for label, row in rows.items():
            ratio = f"  {row['gb_per_s'] / reference:5.1f}x troubleshooter" if reference else ""
            memory = (
                f"  peak +{row['peak_extra_anon_mib']:7.1f} MiB anon" if "peak_extra_anon_mib" in row else ""
            )
            per_pair = f"  {row['us_per_pair']:6.1f} us/pair" if "us_per_pair" in row else ""
            print(
                f"  {label:24s} {row['seconds']:7.2f} s  {row['gb_per_s']:5.2f} GB/s{per_pair}{memory}{ratio}"
            )
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as stream:
        json.dump(results, stream, indent=2)


if __name__ == "__main__":
    main()
