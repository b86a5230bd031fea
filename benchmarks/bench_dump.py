"""What an API-level dump costs a training step: tscore against msprobe, side by side, one thread.

Each measurement runs in a fresh interpreter (``--worker``), so that one tool's
patches cannot touch another's numbers: msprobe runs from its own venv
(``nox -s bench_dump`` installs ``mindstudio-probe`` 26.2 there), tscore from
this one. A worker times plain steps (forward, backward, SGD step) of a small
ResNet, a small transformer encoder or a tiny HuggingFace GPT-2 language model,
then dumped steps (``start``, step, ``stop``, ``step()``), then plain steps again after the dump stopped, and
reports the medians; ratios are taken within one worker. A statistics dump is timed twice for tscore: with
torch's compiled capture (``tscore``) and with the Python one it replaced (``tscore-python``).
``overflow_check`` (tscore only: msprobe 26.2 has no such task) times the check on a step that
does not overflow, which is what it costs a healthy training run. Tensor mode also
reports the bytes written per step against ``np.save`` of the same tensors,
and a 50-step statistics run reports how resident memory moves.

    python benchmarks/bench_dump.py [--msprobe-python .nox/msprobe-26.2/bin/python] [--steps 15]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

MODELS = ("resnet", "encoder", "gpt2")
# on a GPU: the three models (ResNet-50 at batch 64, a 6 x 512 encoder on 32 x 256 tokens, the
# small ResNet at batch 8); tensor mode on the small ResNet and on ResNet-50 at batch 16 (one step
# of it writes gigabytes)
CUDA_MODELS = ("resnet", "resnet50", "encoder6")
CUDA_TENSOR_MODELS = ("resnet", "resnet50_b16")


def _model(name: str) -> tuple[Any, Any, Any]:
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    if name.startswith("resnet50"):
        import torchvision

        batch = 16 if name.endswith("_b16") else 64
        return (
            torchvision.models.resnet50(),
            torch.randn(batch, 3, 224, 224),
            torch.randint(0, 1000, (batch,)),
        )
    if name == "resnet":

        class Block(nn.Module):
            def __init__(self, c_in: int, c_out: int, stride: int) -> None:
                super().__init__()
                self.c1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
                self.b1 = nn.BatchNorm2d(c_out)
                self.c2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
                self.b2 = nn.BatchNorm2d(c_out)
                self.short = (
                    nn.Sequential()
                    if stride == 1 and c_in == c_out
                    else nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
                )

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                y = F.relu(self.b1(self.c1(x)))
                return F.relu(self.b2(self.c2(y)) + self.short(x))

        class ResNet(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.stem = nn.Sequential(
                    nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()
                )
                self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
                self.fc = nn.Linear(64, 10)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.fc(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1).flatten(1))

        return ResNet(), torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))

    class Encoder(nn.Module):
        def __init__(self, vocab: int, width: int, heads: int, hidden: int, layers: int) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            layer = nn.TransformerEncoderLayer(width, heads, hidden, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(width, 10)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(self.embed(ids)).mean(1))

    if name == "gpt2":  # a tiny HuggingFace GPT-2 language model: many small calls per step
        from transformers import GPT2Config, GPT2LMHeadModel

        class LanguageModel(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=32)
                self.model = GPT2LMHeadModel(config)

            def forward(self, ids: torch.Tensor) -> torch.Tensor:
                return self.model(ids, use_cache=False).logits.flatten(0, 1)

        return LanguageModel(), torch.randint(0, 100, (8, 32)), torch.randint(0, 100, (8 * 32,))
    if name == "encoder6":  # the GPU's: 6 x 512 on 32 x 256 tokens
        return Encoder(1000, 512, 8, 2048, 6), torch.randint(0, 1000, (32, 256)), torch.randint(0, 10, (32,))
    return Encoder(100, 64, 4, 128, 2), torch.randint(0, 100, (8, 32)), torch.randint(0, 10, (8,))


def interleaved(
    step: Callable[[str], float], ways: Sequence[str], steps: int, warmup: int = 3
) -> dict[str, dict[str, float]]:
    """Time ``step(way)`` for each way in turn, round after round, so that drift falls on all alike.

    :param step: runs one step the given way and returns its seconds.
    :param warmup: rounds run first and not counted (imports, builds, first allocations).
    :return: each way's median milliseconds and its ratio to the first way's (``{"ms", "ratio"}``).
    """
    times: dict[str, list[float]] = {way: [] for way in ways}
    for index in range(warmup + steps):
        for way in ways:
            seconds = step(way)
            if index >= warmup:
                times[way].append(seconds)
    first = statistics.median(times[ways[0]])
    return {
        way: {"ms": statistics.median(times[way]) * 1e3, "ratio": statistics.median(times[way]) / first}
        for way in ways
    }


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class GcClock:
    """Python's garbage collections while it is on: how many full ones, how many milliseconds, any thread."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._began
            self.full += info["generation"] == 2


def worker(
    tool: str, model_name: str, task: str, steps: int, folder: str, device: str = "cpu", gc_mode: str = "on"
) -> dict[str, Any]:
    """Time plain, dumped and after-stop steps in this interpreter; return the medians.

    :param gc_mode: ``on`` (Python's default), or, to see what the garbage collector costs a dumped
        step, ``freeze`` (every object made before the timing moved out of its reach) or ``off``.
    """
    import gc

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    net, x, y = _model(model_name)
    net, x, y = net.to(device), x.to(device), y.to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    cuda = device.startswith("cuda")

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(net(x), y).backward()
        optimizer.step()

    host: list[float] = []  # the training thread's CPU seconds per step, before waiting for the device

    def timed(run: Any, count: int) -> list[float]:
        times = []
        host.clear()
        for _ in range(count):
            began, began_cpu = time.perf_counter(), time.thread_time()
            run()
            host.append(time.thread_time() - began_cpu)
            if cuda:  # the step's kernels are done, not only launched
                torch.cuda.synchronize()
            times.append(time.perf_counter() - began)
        return times

    timed(step, 3)
    plain = timed(step, steps)
    plain_host = statistics.median(host) * 1e3
    if tool == "tscore":
        import tscore as ts

        debugger: Any = ts.dump.Debugger(task=task, dump_path=folder, level="L1")
    else:
        from msprobe.pytorch import PrecisionDebugger

        debugger = PrecisionDebugger(task=task, dump_path=folder, level="L1")

    def dumped() -> None:
        debugger.start(net)
        step()
        debugger.stop()
        debugger.step()

    timed(dumped, 1)  # the first dumped step pays for imports and set-up; not timed
    if gc_mode == "freeze":
        gc.freeze()
    elif gc_mode == "off":
        gc.disable()
    clock = GcClock()
    gc.callbacks.append(clock)
    during = timed(dumped, steps)
    gc.callbacks.remove(clock)
    dumped_host = statistics.median(host) * 1e3
    after = timed(step, steps)
    result: dict[str, Any] = {
        "tool": tool,
        "model": model_name,
        "task": task,
        "device": device,
        "plain_ms": statistics.median(plain) * 1e3,
        "dumped_ms": statistics.median(during) * 1e3,
        "after_ms": statistics.median(after) * 1e3,
        # the means: what a run of many steps pays, Python's full collections (one step in several) included
        "plain_mean_ms": statistics.fmean(plain) * 1e3,
        "dumped_mean_ms": statistics.fmean(during) * 1e3,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        # the training thread's own CPU time: on a GPU, dumped_host near dumped_ms means the host is the limit
        "plain_host_ms": plain_host,
        "dumped_host_ms": dumped_host,
        # Python's garbage collections during the dumped steps, whichever thread ran them
        "gc_ms_per_step": clock.seconds / steps * 1e3,
        "full_gc_per_step": clock.full / steps,
        "gc_mode": gc_mode,
    }
    if cuda:
        result["gpu"] = torch.cuda.get_device_name()
    if task == "tensor":
        result.update(_files_and_references(folder))
    if tool == "tscore":
        # the writer thread's CPU per dumped step: under the GIL, time the training thread may lose to it
        result["writer_cpu_ms"] = debugger.totals.get("writer_cpu_seconds", 0.0) / (steps + 1) * 1e3
    if tool == "tscore" and task == "tensor" and debugger.totals["tensor_seconds"] > 0:
        # the writer's own throughput: tensor bytes over the seconds its thread spent writing them
        result["writer_mb_s"] = debugger.totals["tensor_bytes"] / debugger.totals["tensor_seconds"] / 1e6
    written = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(folder) for f in files)
    result["bytes_per_step"] = written / (steps + 1)
    if tool == "tscore" and task == "statistics" and not cuda:
        rss = []
        for index in range(50):
            dumped()
            if index in (9, 49):
                rss.append(_rss_mb())
        result["rss_growth_mb_steps_10_to_50"] = rss[1] - rss[0]
    return result


def _files_and_references(folder: str) -> dict[str, int]:
    """Count the tensor files a dump wrote and the record entries that name one (msprobe's too)."""
    files = sum(1 for _, _, names in os.walk(folder) for name in names if name.endswith((".npy", ".pt")))
    references = 0
    for root, _, names in os.walk(folder):
        for name in names:
            if name == "dump.jsonl":
                with open(os.path.join(root, name), "rb") as stream:
                    references += sum(line.count(b'"file":') for line in stream)
            elif name == "dump.json":
                with open(os.path.join(root, name), "rb") as stream:
                    references += stream.read().count(b'"data_name":')
    return {"tensor_files": files, "tensor_references": references}


def disk_write_rate(root: str, size: int = 2 << 30) -> float:
    """MB/s of one sequential write of ``size`` bytes in 8 MiB buffers, fsync included: the disk's speed."""
    block = os.urandom(8 << 20)
    path = os.path.join(root, "disk_speed.bin")
    began = time.perf_counter()
    with open(path, "wb", buffering=0) as stream:
        for _ in range(size // len(block)):
            stream.write(block)
        os.fsync(stream.fileno())
    seconds = time.perf_counter() - began
    os.unlink(path)
    return size / seconds / 1e6


def np_save_rate(folder: str) -> float:
    """MB/s of np.save writing the tensors of one dumped step again, to the same disk."""
    import numpy as np

    arrays = []
    for root, _, files in os.walk(folder):
        arrays += [np.load(os.path.join(root, f)) for f in files if f.endswith(".npy")]
        if arrays:
            break
    target = tempfile.mkdtemp(dir=os.path.dirname(folder))
    began = time.perf_counter()
    for index, array in enumerate(arrays):
        with open(os.path.join(target, f"{index}.npy"), "wb") as stream:
            np.save(stream, array)
    seconds = time.perf_counter() - began
    total = sum(a.nbytes for a in arrays)
    shutil.rmtree(target)
    return total / seconds / 1e6


def run(
    python: str,
    tool: str,
    model: str,
    task: str,
    steps: int,
    root: str,
    device: str = "cpu",
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    folder = os.path.join(root, f"{tool}-{model}-{task}")
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(extra_env or {})}
    os.sync()  # the previous worker's files reach the disk before this one is timed
    out = subprocess.run(
        [python, __file__, "--worker", tool, model, task, str(steps), folder, "--device", device],
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode != 0:
        return {"tool": tool, "model": model, "task": task, "error": out.stderr.strip().splitlines()[-1:]}
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if task == "tensor" and tool == "tscore":
        os.sync()
        result["np_save_mb_s"] = np_save_rate(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return result


def main() -> None:
    """Run every worker, tscore's and msprobe's, and print one table of ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=5, metavar=("TOOL", "MODEL", "TASK", "STEPS", "FOLDER"))
    parser.add_argument("--msprobe-python", default=None, help="an interpreter with mindstudio-probe")
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument(
        "--device",
        default="cpu",
        help="cpu, or cuda: the issue's GPU models (ResNet-50, a 6-layer encoder, the small ResNet)",
    )
    parser.add_argument(
        "--tensor-steps", type=int, default=None, help="steps of tensor mode (default: --steps)"
    )
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--also-aten",
        action="store_true",
        help="on a GPU, time tscore's statistics a second time with ATen's two reductions instead of "
        "the Triton kernel (TSCORE_DUMP_STATS_KERNEL=aten), side by side in the same run",
    )
    parser.add_argument(
        "--gc",
        default="on",
        choices=("on", "freeze", "off"),
        help="a worker's garbage collector during the dumped steps: what it costs them (on: as users run)",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=["statistics", "tensor", "overflow_check"],
        help="tasks to time (msprobe 26.2 has no overflow_check: tscore alone there)",
    )
    args = parser.parse_args()
    if args.worker:
        tool, model, task, steps, folder = args.worker
        print(json.dumps(worker(tool, model, task, int(steps), folder, args.device, args.gc)))
        return
    root = tempfile.mkdtemp(prefix="bench_dump_", dir=".")
    rows = []
    cuda = args.device.startswith("cuda")
    plan = [
        (model, task)
        for task in args.tasks
        for model in ((CUDA_TENSOR_MODELS if task == "tensor" else CUDA_MODELS) if cuda else MODELS)
    ]
    disk = disk_write_rate(root) if "tensor" in args.tasks else None
    for model, task in plan:
        steps = args.tensor_steps or args.steps if task == "tensor" else args.steps
        rows.append(run(sys.executable, "tscore", model, task, steps, root, args.device))
        if task == "statistics":  # torch's Python capture, which the compiled one replaced, in the same run
            python = {"TSCORE_TORCH_CAPTURE": "python"}
            rows.append(run(sys.executable, "tscore", model, task, steps, root, args.device, python))
            rows[-1]["tool"] = "tscore-python"
            print(json.dumps(rows[-1]), flush=True)
        if args.also_aten and cuda and task == "statistics":
            aten = {"TSCORE_DUMP_STATS_KERNEL": "aten"}
            rows.append(run(sys.executable, "tscore", model, task, steps, root, args.device, aten))
            rows[-1]["tool"] = "tscore-aten"
            print(json.dumps(rows[-1]), flush=True)
        if args.msprobe_python and task != "overflow_check":
            rows.append(run(args.msprobe_python, "msprobe", model, task, steps, root, args.device))
        print(json.dumps(rows[-1]), flush=True)  # as it goes: a run cut short keeps what it measured
    shutil.rmtree(root, ignore_errors=True)
    if disk is not None:
        print(f"disk: one sequential write of 2 GiB with fsync, {disk:.0f} MB/s")
    for row in rows:  # what writing the tensors costs: tensor mode over statistics mode, same tool and model
        stats = next(
            (
                r
                for r in rows
                if (r["tool"], r["model"], r.get("task")) == (row["tool"], row["model"], "statistics")
            ),
            None,
        )
        if row.get("task") == "tensor" and stats is not None and "error" not in row and "error" not in stats:
            extra = (row["dumped_ms"] / row["plain_ms"] - stats["dumped_ms"] / stats["plain_ms"]) * row[
                "plain_ms"
            ]
            row["tensor_write_mb_s"] = row["bytes_per_step"] / 1e3 / extra if extra > 0 else float("inf")
    print(
        f"{'tool':13} {'model':12} {'task':10} {'plain':>8} {'dumped':>8} {'ratio':>6} {'after stop':>10}"
        "  notes"
    )
    for row in rows:
        if "error" in row:
            print(f"{row['tool']:13} {row['model']:12} {row['task']:10} failed: {row['error']}")
            continue
        notes = []
        if "tensor_write_mb_s" in row:
            notes.append(f"tensors written at {row['tensor_write_mb_s']:.0f} MB/s")
        if "writer_mb_s" in row:
            notes.append(f"writer thread {row['writer_mb_s']:.0f} MB/s")
        if "np_save_mb_s" in row:
            notes.append(f"np.save of the same tensors {row['np_save_mb_s']:.0f} MB/s")
        if "tensor_files" in row:
            notes.append(f"{row['tensor_files']} files for {row['tensor_references']} tensor entries")
        if "rss_growth_mb_steps_10_to_50" in row:
            notes.append(f"RSS {row['rss_growth_mb_steps_10_to_50']:+.1f} MB from step 10 to 50")
        notes.append(f"{row['bytes_per_step'] / 1e6:.1f} MB/step")
        notes.append(f"peak RSS {row['peak_rss_mb']:.0f} MB")
        notes.append(f"host CPU {row['plain_host_ms']:.1f} -> {row['dumped_host_ms']:.1f} ms")
        if "dumped_mean_ms" in row:
            notes.append(
                f"means {row['dumped_mean_ms'] / row['plain_mean_ms']:.2f}x, collector "
                f"{row['gc_ms_per_step']:.1f} ms/step ({row['full_gc_per_step']:.2f} full)"
            )
        print(
            f"{row['tool']:13} {row['model']:12} {row['task']:10} {row['plain_ms']:7.1f}ms "
            f"{row['dumped_ms']:7.1f}ms "
            f"{row['dumped_ms'] / row['plain_ms']:5.2f}x {row['after_ms'] / row['plain_ms']:9.2f}x  "
            + "; ".join(notes)
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as stream:
            json.dump({"rows": rows, "disk_mb_s": disk}, stream, indent=2)


if __name__ == "__main__":
    main()
