"""Regenerate two training logs and what TroubleShooter 1.0.18's ``loss_compare`` made of them.

Run from the repository root, in TroubleShooter's environment (``nox -s bench_compare`` makes it;
``loss_compare`` needs the matplotlib and pandas it installs)::

    .nox/troubleshooter-1.0.18/bin/python tests/data/make_loss_logs.py

``troubleshooter_1.0.18/logs/gpu.log`` and ``npu.log`` are Megatron-style logs (``iteration
k/ 60 | ... | lm loss: 1.0E+01 | ...``) of 60 and 55 steps: the same losses up to step 30,
then the NPU run's drift by a growing relative error (0.1% a step). ``statistic.csv``,
``gpu.log.csv`` and ``npu.log.csv`` beside them are TroubleShooter's output for
``loss_compare({"path": gpu.log, "loss_tag": "lm loss:", "label": "gpu"}, {... npu ...})``.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile

ROOT = os.path.join("tests", "data", "troubleshooter_1.0.18", "logs")
DRIFT_FROM = 31  # the first step whose NPU loss differs


def loss_at(step: int) -> float:
    """The GPU run's loss at ``step``: a decaying curve with a little wobble."""
    return round(10.8 * math.exp(-step / 25) + 1.5 + 0.05 * math.sin(step), 6)


def write_log(path: str, steps: int, drift: bool) -> None:
    """Write a Megatron-style log of ``steps`` iterations, with other lines between them."""
    lines = ["using world size: 1, data-parallel size: 1", "> building GPT model ..."]
    for step in range(1, steps + 1):
        loss = loss_at(step)
        if drift and step >= DRIFT_FROM:
            loss *= 1 + 0.001 * (step - DRIFT_FROM + 1)
        lines.append(
            f" iteration {step:8d}/{steps:8d} | consumed samples: {8 * step:10d} | elapsed time per "
            f"iteration (ms): 512.3 | learning rate: 1.000E-04 | lm loss: {loss:.6E} | loss scale: 1.0 |"
        )
        if step % 20 == 0:
            lines.append(f"saving checkpoint at iteration {step:8d}")
    with open(path, "w", encoding="utf-8") as stream:
        stream.write("\n".join(lines) + "\n")


def main() -> None:
    """Write both logs and run TroubleShooter's loss_compare on them; keep its CSV files."""
    from troubleshooter.widget import loss_compare

    shutil.rmtree(ROOT, ignore_errors=True)
    os.makedirs(ROOT)
    gpu, npu = os.path.join(ROOT, "gpu.log"), os.path.join(ROOT, "npu.log")
    write_log(gpu, 60, drift=False)
    write_log(npu, 55, drift=True)
    here = os.getcwd()
    work = tempfile.mkdtemp()
    try:
        os.chdir(work)
        loss_compare(
            {"path": os.path.join(here, gpu), "loss_tag": "lm loss:", "label": "gpu"},
            {"path": os.path.join(here, npu), "loss_tag": "lm loss:", "label": "npu"},
            title="GPU vs NPU",
        )
        for name in ("statistic.csv", "gpu.log.csv", "npu.log.csv"):
            shutil.copy(os.path.join(work, "loss_compare", name), os.path.join(here, ROOT, name))
    finally:
        os.chdir(here)
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
