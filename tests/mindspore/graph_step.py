"""A MindSpore graph-mode training step, run in a process of its own by test_ms_graph_dump.py.

MindSpore reads its dump configuration once per process, at the first graph it compiles, so each
case needs a fresh process. ``python graph_step.py CASE OUT [SCALE]``; the losses go to
``OUT/losses.json``.

* ``plain``: two steps, no dump.
* ``dump``: two steps dumped with ``task="tensor"`` into ``OUT/dump``.
* ``late``: one plain step first (its graph compiles without a dump), then one dumped step.
* ``gap``: a dumped step, a step run without the debugger, a dumped step.
* ``step1``: two steps with ``step=[1]``: only the second is dumped.
* ``deep``: a Dense inside six cells with long names (MindSpore writes its files under hashes).
* ``overflow``: ``task="overflow_check"``, refused in graph mode; the message goes to ``OUT/error.txt``.

``SCALE`` multiplies the second Dense's weight: a planted difference to be found.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

import tscore as ts


def network(scale: float) -> nn.Cell:
    """Dense, ReLU, Dense, with weights drawn from numpy; the second Dense scaled by ``scale``."""
    net = nn.SequentialCell(nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 2))
    rng = np.random.default_rng(0)
    for param in net.get_parameters():
        param.set_data(Tensor(rng.standard_normal(param.shape).astype(np.float32)))
    net[2].weight.set_data(net[2].weight * scale)
    return net


class Wrap(nn.Cell):
    """A cell around a cell, ``depth`` times, each under a long attribute name."""

    def __init__(self, inner: nn.Cell, depth: int) -> None:
        super().__init__()
        self.a_rather_long_attribute_name_for_a_sub_cell = inner if depth == 0 else Wrap(inner, depth - 1)

    def construct(self, x: Tensor) -> Tensor:
        return self.a_rather_long_attribute_name_for_a_sub_cell(x)


def main(case: str, out: Path, scale: float) -> None:
    """Run the case; write the losses."""
    logging.basicConfig(level=logging.WARNING)
    ms.set_context(mode=ms.GRAPH_MODE)
    net = network(scale) if case != "deep" else Wrap(nn.Dense(4, 2), 5)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.1))
    rng = np.random.default_rng(1)
    x = Tensor(rng.standard_normal((3, 4)).astype(np.float32))
    y = Tensor(rng.standard_normal((3, 2)).astype(np.float32))
    losses = []
    if case == "late":
        losses.append(float(train(x, y).asnumpy()))
    task = "overflow_check" if case == "overflow" else "tensor"
    steps = [1] if case == "step1" else []
    debugger = ts.dump.Debugger(dump_path=str(out / "dump"), task=task, level="L1", step=steps)
    if case == "overflow":
        try:
            debugger.start(train)
        except ts.dump.DumpConfigError as exc:
            (out / "error.txt").write_text(str(exc))
        (out / "losses.json").write_text("[]")
        return
    if case == "gap":  # a dumped step, one not dumped, a dumped step
        for dumped in (True, False, True):
            if dumped:
                debugger.start(train)
            losses.append(float(train(x, y).asnumpy()))
            if dumped:
                debugger.step()
        debugger.close()
        (out / "losses.json").write_text(json.dumps(losses))
        return
    for _ in range(1 if case == "late" else 2):
        if case != "plain":
            debugger.start(train)
        losses.append(float(train(x, y).asnumpy()))
        debugger.step()
    debugger.close()
    (out / "losses.json").write_text(json.dumps(losses))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 1.0)
