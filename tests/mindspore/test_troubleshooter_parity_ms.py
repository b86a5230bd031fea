"""TroubleShooter 1.0.18's network functions on MindSpore alone (no torch installed in nox -s mindspore)."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import nn

import tscore as ts


def _cell(seed: int) -> nn.Cell:
    ms.set_seed(seed)
    return nn.SequentialCell(nn.Dense(4, 3), nn.ReLU(), nn.Dense(3, 2))


def test_save_net_and_weight_params_then_load_ms_weight2net(tmp_path):
    net = _cell(0)
    written = ts.migrator.save_net_and_weight_params(net, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "mindspore_net_architecture.txt",
        "mindspore_troubleshooter_create.ckpt",
    ]
    assert "Dense" in (tmp_path / "mindspore_net_architecture.txt").read_text()
    other = _cell(1)
    assert not np.array_equal(other[0].weight.asnumpy(), net[0].weight.asnumpy())
    result = ts.widget.load_ms_weight2net(other, written["weights"])
    assert result.complete and result.loaded == 4
    for mine, theirs in zip(net.get_parameters(), other.get_parameters(), strict=True):
        assert np.array_equal(mine.asnumpy(), theirs.asnumpy()), mine.name
    # MindSpore's own reader takes the file
    assert set(ms.load_checkpoint(written["weights"])) == {p.name for p in net.get_parameters()}
