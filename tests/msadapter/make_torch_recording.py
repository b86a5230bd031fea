"""Write ``tests/data/recorded_torch_smallnet{,_bn}``: the source networks recorded on REAL torch.

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


def main() -> None:
    """Record both networks (without and with BatchNorm) on their inputs and say where."""
    for batchnorm, name in ((False, "recorded_torch_smallnet"), (True, "recorded_torch_smallnet_bn")):
        net = source_net(batchnorm=batchnorm)
        assert type(net.features[0]).__module__.startswith("torch."), "run this with real torch"
        print(ts.migrator.record_network(net, DATA / name, auto_inputs=(((2, 3, 8, 8), np.float32),)))


if __name__ == "__main__":
    main()
