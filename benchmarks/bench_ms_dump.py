"""What an API-level dump costs a MindSpore training step (PyNative, CPU, one thread).

Each model and task runs in a fresh interpreter (``--worker``): plain steps
(forward, backward, SGD) and dumped steps (``start``, step, ``stop``,
``step()``) one after the other, then plain steps again; the ratio of the
medians is taken within one worker, so the machine's drift between workers
does not enter it. Plain and dumped steps alternate because MindSpore's own
steps drift within a process: on a 2-core machine they came out at 45-60 ms
or at 100-140 ms (its runtime's threads busy on both cores), and a block of
plain steps followed by a block of dumped ones read anything from 1.1x to
2.4x for the same dump.
msprobe's MindSpore dump is not run: on MindSpore's CPU build it stops the
step (``The kernel LinalgVectorNorm unregistered``, issue 12).

Graph mode (``--graph``) goes through MindSpore's own dump, which a process
arms once, before its first graph, and cannot switch off: plain and dumped
steps run in separate workers (plain, dumped, plain again) and the ratio is
the dumped median over the mean of the two plain medians.

    python benchmarks/bench_ms_dump.py [--steps 15] [--graph] [--json FILE]
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
from typing import Any

# (model, task, data_mode): backward records cost a Tensor.register_hook per output, measured apart;
# overflow_check (issue 14) on a step that does not overflow
CASES = [
    (model, task, mode)
    for model in ("resnet", "encoder")
    for task, mode in (
        ("statistics", "all"),
        ("statistics", "forward"),
        ("tensor", "all"),
        ("overflow_check", "all"),
    )
]


def _model(name: str) -> tuple[Any, Any, Any]:
    """Return ``(net, inputs, labels)`` for a small ResNet or transformer encoder."""
    import mindspore as ms
    import numpy as np
    from mindspore import nn, ops

    ms.set_seed(0)
    rng = np.random.default_rng(0)
    if name == "resnet":

        class Block(nn.Cell):
            def __init__(self, c_in: int, c_out: int, stride: int) -> None:
                super().__init__()
                self.c1 = nn.Conv2d(c_in, c_out, 3, stride, pad_mode="pad", padding=1)
                self.b1 = nn.BatchNorm2d(c_out)
                self.c2 = nn.Conv2d(c_out, c_out, 3, 1, pad_mode="pad", padding=1)
                self.b2 = nn.BatchNorm2d(c_out)
                self.short = nn.Conv2d(c_in, c_out, 1, stride) if stride != 1 or c_in != c_out else None

            def construct(self, x: ms.Tensor) -> ms.Tensor:
                y = ops.relu(self.b1(self.c1(x)))
                skip = x if self.short is None else self.short(x)
                return ops.relu(self.b2(self.c2(y)) + skip)

        class ResNet(nn.Cell):
            def __init__(self) -> None:
                super().__init__()
                self.stem = nn.SequentialCell(
                    nn.Conv2d(3, 16, 3, pad_mode="pad", padding=1), nn.BatchNorm2d(16)
                )
                self.blocks = nn.SequentialCell(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
                self.head = nn.Dense(64, 10)

            def construct(self, x: ms.Tensor) -> ms.Tensor:
                y = self.blocks(ops.relu(self.stem(x)))
                return self.head(y.mean(axis=(2, 3)))

        x = ms.Tensor(rng.standard_normal((8, 3, 32, 32)).astype(np.float32))
        return ResNet(), x, ms.Tensor(rng.integers(0, 10, 8).astype(np.int32))

    class Encoder(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(100, 64)
            self.layers = nn.CellList(
                [nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True) for _ in range(2)]
            )
            self.head = nn.Dense(64, 10)

        def construct(self, ids: ms.Tensor) -> ms.Tensor:
            y = self.embed(ids)
            for layer in self.layers:
                y = layer(y)
            return self.head(y.mean(axis=1))

    ids = ms.Tensor(rng.integers(0, 100, (8, 32)).astype(np.int32))
    return Encoder(), ids, ms.Tensor(rng.integers(0, 10, 8).astype(np.int32))


def worker(model_name: str, task: str, steps: int, folder: str, data_mode: str) -> dict[str, Any]:
    """Time plain, dumped and again plain steps in this process; return the medians."""
    import mindspore as ms
    from mindspore import nn

    import tscore as ts

    ms.set_context(mode=ms.PYNATIVE_MODE)
    net, x, labels = _model(model_name)
    opt = nn.SGD(net.trainable_params(), learning_rate=0.01)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    grad_fn = ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None, opt.parameters)

    def step() -> None:
        loss, grads = grad_fn(x, labels)
        opt(grads)
        loss.asnumpy()  # wait for the step's kernels

    def timed(dumped: bool, debugger: Any = None) -> float:
        began = time.perf_counter()
        if dumped:
            debugger.start(net)
        step()
        if dumped:
            debugger.stop()
            debugger.step()
        return time.perf_counter() - began

    for _ in range(3):
        step()  # warm-up: kernels selected, caches filled
    debugger = ts.dump.Debugger(task=task, dump_path=folder, level="L1", data_mode=[data_mode])
    timed(True, debugger)  # the first dumped step installs the wrappers' caches
    plain: list[float] = []
    dumped: list[float] = []
    for _ in range(steps):  # alternating: the runtime's drift within a process falls on both alike
        plain.append(timed(False))
        dumped.append(timed(True, debugger))
    after = [timed(False) for _ in range(steps)]
    debugger.close()
    return {
        "plain_ms": statistics.median(plain) * 1e3,
        "dumped_ms": statistics.median(dumped) * 1e3,
        "after_ms": statistics.median(after) * 1e3,
        "ratio": statistics.median(dumped) / statistics.median(plain),
        "after_ratio": statistics.median(after) / statistics.median(plain),
    }


def graph_worker(model_name: str, task: str, steps: int, folder: str, dumped: bool) -> dict[str, Any]:
    """Time compiled training steps (TrainOneStepCell), each dumped through MindSpore's own dump or not."""
    import mindspore as ms
    from mindspore import nn

    import tscore as ts

    ms.set_context(mode=ms.GRAPH_MODE)
    net, x, labels = _model(model_name)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), nn.SGD(net.trainable_params(), 0.01))
    debugger = ts.dump.Debugger(task=task, dump_path=folder, level="L1") if dumped else None

    inside: list[float] = []  # the step alone: with the dump on, MindSpore writing its files

    def timed() -> float:
        began = time.perf_counter()
        if debugger is not None:
            debugger.start(train)  # the first start arms MindSpore's dump, before the graph compiles
        ran = time.perf_counter()
        train(x, labels).asnumpy()
        inside.append(time.perf_counter() - ran)
        if debugger is not None:
            debugger.step()
        return time.perf_counter() - began

    for _ in range(3):
        timed()  # warm-up: the graph compiles
    del inside[:]
    times = [timed() for _ in range(steps)]
    if debugger is not None:
        debugger.close()
    return {"median_ms": statistics.median(times) * 1e3, "step_ms": statistics.median(inside) * 1e3}


def _run_worker(arguments: list[str], env: dict[str, str]) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="ts_ms_dump_")
    try:
        out = subprocess.run(
            [sys.executable, __file__, *[a.replace("{folder}", folder) for a in arguments]],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def graph_cases(steps: int, env: dict[str, str]) -> list[dict[str, Any]]:
    """Plain, dumped and plain-again workers per model and task in graph mode; print each ratio."""
    results = []
    for model in ("resnet", "encoder"):
        for task in ("statistics", "tensor"):
            found = [
                _run_worker(["--graph-worker", model, task, str(steps), "{folder}", flag], env)
                for flag in ("0", "1", "0")
            ]
            runs = [f["median_ms"] for f in found]
            plain = (runs[0] + runs[2]) / 2
            row = {"model": model, "task": task, "mode": "graph", "plain_ms": plain, "dumped_ms": runs[1]}
            row["ratio"] = runs[1] / plain
            row["mindspore_writing_ms"] = found[1]["step_ms"] - plain  # MindSpore's own dump, in the step
            results.append(row)
            print(
                f"{model:8s} {task:10s} graph   plain {plain:7.1f} ms  dumped {runs[1]:7.1f} ms  "
                f"{row['ratio']:5.2f}x  (MindSpore writing {row['mindspore_writing_ms']:.1f} ms, "
                f"tscore converting {runs[1] - found[1]['step_ms']:.1f} ms; "
                f"plain workers {runs[0]:.1f} / {runs[2]:.1f} ms)",
                flush=True,
            )
    return results


def main() -> None:
    """Run every model and task in its own interpreter and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=5, metavar=("MODEL", "TASK", "STEPS", "FOLDER", "DATA_MODE"))
    parser.add_argument("--graph-worker", nargs=5, metavar=("MODEL", "TASK", "STEPS", "FOLDER", "DUMPED"))
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--graph", action="store_true", help="only graph mode, through MindSpore's own dump")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    if args.worker:
        model, task, steps, folder, data_mode = args.worker
        print(json.dumps(worker(model, task, int(steps), folder, data_mode)))
        return
    if args.graph_worker:
        model, task, steps, folder, dumped = args.graph_worker
        print(json.dumps(graph_worker(model, task, int(steps), folder, dumped == "1")))
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOG_v": "3"}
    env.pop("MINDSPORE_DUMP_CONFIG", None)
    results = graph_cases(args.steps, env) if args.graph else []
    for model, task, data_mode in [] if args.graph else CASES:
        found = _run_worker(["--worker", model, task, str(args.steps), "{folder}", data_mode], env)
        row = {"model": model, "task": task, "data_mode": data_mode, **found}
        results.append(row)
        print(
            f"{model:8s} {task:14s} {data_mode:7s} plain {row['plain_ms']:7.1f} ms  "
            f"dumped {row['dumped_ms']:7.1f} ms  {row['ratio']:5.2f}x  "
            f"(after stop: {row['after_ratio']:4.2f}x)",
            flush=True,
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as stream:
            json.dump(results, stream, indent=2)


if __name__ == "__main__":
    main()
