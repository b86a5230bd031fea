"""Comparing two dumps: tscore's dump compare against ``msprobe compare``, on the same msprobe dumps.

Two pairs of tensor dumps of one training step of a small ResNet (the one of
``bench_dump.py``), made by msprobe 26.2 itself (``--msprobe-python``, its own
venv): a base run and one whose first convolution weight is perturbed, at
batch 8 (about 40 MB a dump) and at ``--large-batch`` (default 64, about ten
times that). Then two statistics-only dumps of ``--records`` calls (default
100,000), written in msprobe's ``dump.json`` format. Each tool compares each
pair in a fresh process; the wall time includes starting the interpreter and
the imports, as a user running either command sees it; tscore's time inside
``compare_dumps`` is given too, and its peak memory (that of the process itself; a big
comparison's CSV helper process, ``tscore.dump_compare.csv_helper``, holds a block at a
time: 67 MB at 100,000 calls, measured once from its ``/proc`` status).

    python benchmarks/bench_dump_compare.py --msprobe-python .nox/msprobe-26.2/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def make_msprobe_dump(folder: str, batch: int, perturb: bool) -> None:
    """Dump one training step of bench_dump's ResNet with msprobe (runs in msprobe's venv)."""
    sys.path.insert(0, HERE)
    import torch
    import torch.nn.functional as F
    from bench_dump import _model
    from msprobe.pytorch import PrecisionDebugger

    net, _, _ = _model("resnet")
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, 32, 32, generator=generator)
    y = torch.randint(0, 10, (batch,), generator=generator)
    if perturb:
        with torch.no_grad():
            first = next(m for m in net.modules() if isinstance(m, torch.nn.Conv2d))
            first.weight.add_(torch.randn(first.weight.shape, generator=generator) * 1e-2)
    debugger = PrecisionDebugger(task="tensor", dump_path=folder, level="L1")
    debugger.start()
    F.cross_entropy(net(x), y).backward()
    debugger.stop()
    debugger.step()
    step = os.path.join(folder, "step0")
    for name in os.listdir(step):  # msprobe names a single process's folder proc{pid}
        if name.startswith("proc"):
            os.rename(os.path.join(step, name), os.path.join(step, "rank0"))


def write_statistics_dump(folder: str, records: int, seed: int) -> None:
    """Write an msprobe statistics dump.json of ``records`` calls (conv2d, relu, linear, add in turn)."""
    rnd = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    data: dict[str, Any] = {}
    apis = ("conv2d", "relu", "linear", "add")
    for index in range(records):
        api = apis[index % 4]

        def tensor() -> dict[str, Any]:
            return {
                "type": "torch.Tensor",
                "dtype": "torch.float32",
                "shape": [8, 16, 32, 32],
                "Max": 1.0 + rnd.random() * 1e-6,
                "Min": -1.0,
                "Mean": 0.01,
                "Norm": 100.0,
                "requires_grad": False,
            }

        data[f"Functional.{api}.{index // 4}.forward"] = {
            "input_args": [tensor(), tensor()],
            "input_kwargs": {},
            "output": [tensor()],
        }
    document = {
        "task": "statistics",
        "level": "L1",
        "framework": "pytorch",
        "dump_data_dir": None,
        "data": data,
    }
    with open(os.path.join(folder, "dump.json"), "w", encoding="utf-8") as stream:
        json.dump(document, stream, indent=1)  # as msprobe writes it
    with open(os.path.join(folder, "stack.json"), "w", encoding="utf-8") as stream:
        stream.write("{}")


def folder_bytes(folder: str) -> int:
    """Bytes of every file under ``folder``."""
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(folder) for f in files)


def timed(command: list[str]) -> tuple[float, str]:
    """Run a command; return its wall seconds and the end of its output."""
    began = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    seconds = time.perf_counter() - began
    if out.returncode not in (0, 1):
        raise RuntimeError(f"{command[:3]} failed: {(out.stderr or out.stdout)[-800:]}")
    return seconds, out.stdout[-300:]


def own_peak_mb() -> float:
    """This process's peak resident memory in MB since it started (exec'd).

    Linux's ``ru_maxrss`` keeps the high-water mark of the process before ``exec``: a worker
    started by a parent holding a big dump would report the parent's size. ``VmHWM`` is the
    new program's own.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def tscore_worker(npu: str, bench: str, output: str) -> None:
    """Compare in this process and print tscore's own seconds and peak memory as JSON."""
    from tscore.dump_compare import compare_dumps

    report = compare_dumps(npu, bench, output)
    peak = own_peak_mb()
    first = report.first_error.target_call if report.first_error else None
    print(json.dumps({"seconds": report.seconds, "peak_mb": peak, "rows": len(report.rows), "first": first}))


def run_pair(label: str, npu: str, bench: str, msprobe_python: str | None, root: str) -> dict[str, Any]:
    """Compare one pair with both tools, each in a fresh process."""
    size = folder_bytes(npu) + folder_bytes(bench)
    row: dict[str, Any] = {"pair": label, "mb": size / 1e6}
    out = tempfile.mkdtemp(dir=root)
    seconds, text = timed([sys.executable, __file__, "--tscore-worker", npu, bench, out])
    row["tscore_s"] = seconds
    row.update({f"tscore_{k}": v for k, v in json.loads(text.strip().splitlines()[-1]).items()})
    if msprobe_python:
        msprobe = os.path.join(os.path.dirname(msprobe_python), "msprobe")
        out = tempfile.mkdtemp(dir=root)
        seconds, _ = timed(
            [
                msprobe,
                "compare",
                "-tp",
                os.path.join(npu, "dump.json"),
                "-gp",
                os.path.join(bench, "dump.json"),
                "-o",
                out,
            ]
        )
        row["msprobe_s"] = seconds
    return row


def main() -> None:
    """Make the dumps, compare each pair with both tools and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--msprobe-python", help="an interpreter with mindstudio-probe (makes the tensor dumps)"
    )
    parser.add_argument(
        "--records",
        type=int,
        nargs="+",
        default=[100_000],
        help="calls of each statistics pair (msprobe compares those of at most 100,000)",
    )
    parser.add_argument("--large-batch", type=int, default=64)
    parser.add_argument("--statistics-only", action="store_true", help="skip the ResNet tensor pairs")
    parser.add_argument(
        "--make-dump", nargs=3, metavar=("FOLDER", "BATCH", "PERTURB"), help=argparse.SUPPRESS
    )
    parser.add_argument("--tscore-worker", nargs=3, metavar=("NPU", "BENCH", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make_dump:
        make_msprobe_dump(args.make_dump[0], int(args.make_dump[1]), args.make_dump[2] == "1")
        return
    if args.tscore_worker:
        tscore_worker(*args.tscore_worker)
        return
    root = tempfile.mkdtemp(prefix="bench_dump_compare_", dir=".")
    rows = []
    try:
        if args.msprobe_python and not args.statistics_only:
            for batch in (8, args.large_batch):
                pair = []
                for perturb in ("1", "0"):
                    folder = os.path.join(root, f"resnet-b{batch}-{perturb}")
                    subprocess.run(
                        [args.msprobe_python, __file__, "--make-dump", folder, str(batch), perturb],
                        check=True,
                        capture_output=True,
                    )
                    pair.append(os.path.join(folder, "step0", "rank0"))
                rows.append(run_pair(f"ResNet tensors, batch {batch}", *pair, args.msprobe_python, root))
        for records in args.records:
            npu, bench = (
                os.path.join(root, f"stats-npu-{records}"),
                os.path.join(root, f"stats-bench-{records}"),
            )
            write_statistics_dump(npu, records, 0)
            write_statistics_dump(bench, records, 1)
            msprobe = args.msprobe_python if records <= 100_000 else None
            rows.append(run_pair(f"statistics, {records} calls", npu, bench, msprobe, root))
            shutil.rmtree(npu)
            shutil.rmtree(bench)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"{'pair':34} {'MB':>8} {'tscore':>8} {'(inside)':>9} {'msprobe':>8} {'ratio':>6} {'peak MB':>8}"
        "  first own error"
    )
    for row in rows:
        ms = row.get("msprobe_s")
        ratio = f"{ms / row['tscore_s']:5.1f}x" if ms else "   n/a"
        print(
            f"{row['pair']:34} {row['mb']:8.1f} {row['tscore_s']:7.2f}s {row['tscore_seconds']:8.2f}s "
            f"{(f'{ms:7.2f}s' if ms else '    n/a'):>8} {ratio:>6} {row['tscore_peak_mb']:8.0f}  "
            f"{row['tscore_first']}"
        )


if __name__ == "__main__":
    main()
