"""Write ``tests/data/recorded_torch_smallnet{,_bn}`` and ``torch_smallnet_dump``: made on REAL torch.

The recordings hold the source networks' runs (for the difference finder); the dump is tscore's
statistics dump of one forward call of the first network, at API level, on :data:`DUMP_INPUT`.

Run it where real torch and tscore's torch plugin are installed (``nox -s
torch`` has them)::

    .nox/torch/bin/python tests/msadapter/make_torch_recording.py

The MSAdapter session, which cannot import real torch, reads the recording.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import tscore as ts  # noqa: E402
from tests.msadapter.torch_source_nets import source_net  # noqa: E402

DATA = ROOT / "tests" / "data"


def dump_input() -> np.ndarray:
    """The input of the dumped forward call, made the same way in either process."""
    return np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)


def dump_forward(net: object, folder: Path) -> None:
    """Dump one forward call of ``net`` on :func:`dump_input` at API level (statistics), without gradients.

    Run on real torch here, and on mindtorch by the MSAdapter tests: ``import torch`` is either.
    """
    import torch

    debugger = ts.dump.Debugger(task="statistics", dump_path=str(folder), level="L1")
    x = torch.tensor(dump_input())
    debugger.start(net)
    with torch.no_grad():
        net(x)
    debugger.stop()


def main() -> None:
    """Record both networks (without and with BatchNorm) on their inputs and say where."""
    for batchnorm, name in ((False, "recorded_torch_smallnet"), (True, "recorded_torch_smallnet_bn")):
        net = source_net(batchnorm=batchnorm)
        assert type(net.features[0]).__module__.startswith("torch."), "run this with real torch"
        print(ts.migrator.record_network(net, DATA / name, auto_inputs=(((2, 3, 8, 8), np.float32),)))
    dump_forward(source_net(), DATA / "torch_smallnet_dump")
    print(DATA / "torch_smallnet_dump")


if __name__ == "__main__":
    main()
