"""End to end: a torch network, its MindSpore twin, get_weight_map, convert_weight, load, same outputs."""

from __future__ import annotations

import json
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
import torch
from mindspore import nn as mnn
from mindspore import ops
from torch import nn as tnn

import tscore as ts


class CustomLayerNorm(tnn.LayerNorm):
    """A subclass of a mapped layer: it must be mapped as LayerNorm."""


class TorchNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = tnn.Embedding(20, 8)
        self.conv1d = tnn.Conv1d(8, 8, 3, padding=1)
        self.bn1d = tnn.BatchNorm1d(8)
        self.prelu = tnn.PReLU(8)
        self.lstm = tnn.LSTM(8, 8, batch_first=True)
        self.ln = CustomLayerNorm(8)
        self.conv2d = tnn.Conv2d(1, 4, 3, padding=1)
        self.bn2d = tnn.BatchNorm2d(4)
        self.gn = tnn.GroupNorm(2, 4)
        self.bn3d = tnn.BatchNorm3d(1)
        self.head = tnn.Sequential(tnn.Linear(8 * 4 * 8 + 8, 16), tnn.ReLU(), tnn.Linear(16, 3))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids).transpose(1, 2)  # (N, 8, L)
        x = self.prelu(self.bn1d(self.conv1d(x))).transpose(1, 2)  # (N, L, 8)
        x, _ = self.lstm(x)
        x = self.ln(x)  # (N, 8, 8) with L = 8
        image = self.gn(self.bn2d(self.conv2d(x.unsqueeze(1))))  # (N, 4, 8, 8)
        volume = self.bn3d(x.unsqueeze(1).unsqueeze(1))  # (N, 1, 1, 8, 8)
        pooled = volume.mean(dim=(1, 2, 3))
        features = torch.cat([image.reshape(image.shape[0], -1)[:, : 8 * 4 * 8], pooled], dim=1)
        return self.head(features)


class MsNet(mnn.Cell):
    """The twin as a person migrating it would write it."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = mnn.Embedding(20, 8)
        self.conv1d = mnn.Conv1d(8, 8, 3, pad_mode="pad", padding=1, has_bias=True)
        self.bn1d = mnn.BatchNorm1d(8, momentum=0.9)
        self.prelu = mnn.PReLU(8)
        self.lstm = mnn.LSTM(8, 8, batch_first=True)
        self.ln = mnn.LayerNorm((8,), epsilon=1e-5)
        self.conv2d = mnn.Conv2d(1, 4, 3, pad_mode="pad", padding=1, has_bias=True)
        self.bn2d = mnn.BatchNorm2d(4, momentum=0.9)
        self.gn = mnn.GroupNorm(2, 4)
        self.bn3d = mnn.BatchNorm3d(1, momentum=0.9)
        self.head = mnn.SequentialCell(mnn.Dense(8 * 4 * 8 + 8, 16), mnn.ReLU(), mnn.Dense(16, 3))

    def construct(self, ids: ms.Tensor) -> ms.Tensor:
        x = self.emb(ids).transpose(0, 2, 1)
        x = self.prelu(self.bn1d(self.conv1d(x))).transpose(0, 2, 1)
        x, _ = self.lstm(x)
        x = self.ln(x)
        image = self.gn(self.bn2d(self.conv2d(x.expand_dims(1))))
        volume = self.bn3d(x.expand_dims(1).expand_dims(1))
        pooled = volume.mean(axis=(1, 2, 3))
        features = ops.cat([image.reshape(image.shape[0], -1)[:, : 8 * 4 * 8], pooled], axis=1)
        return self.head(features)


def trained_torch_net() -> TorchNet:
    torch.manual_seed(0)
    net = TorchNet()
    with torch.no_grad():  # running statistics away from their defaults, so a wrong map shows
        for module in net.modules():
            if isinstance(module, tnn.modules.batchnorm._BatchNorm):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.num_batches_tracked.fill_(7)
        net.prelu.weight.uniform_(0.1, 0.4)
    return net.eval()


@pytest.mark.parametrize("fmt", ["ckpt", "safetensors"])
def test_every_layer_kind_converts_loads_and_gives_the_same_outputs(in_tmp: Path, fmt: str) -> None:
    pt_net = trained_torch_net()
    torch.save({"state_dict": pt_net.state_dict(), "epoch": 3}, "torch_net.pth")
    ts.migrator.get_weight_map(pt_net=pt_net, weight_map_save_path="torch_net_map.json")
    target = f"converted.{fmt}"
    report = ts.migrator.convert_weight(
        weight_map_path="torch_net_map.json",
        pt_file_path="torch_net.pth",
        ms_file_save_path=target,
        format=fmt,
        print_conv_info=False,
    )
    assert report.counts["skipped"] == 1 and report.counts["dropped"] == 3  # epoch; 3 batch counters
    ms_net = MsNet()
    ms_net.set_train(False)
    param_not_load, ckpt_not_load = ms.load_param_into_net(ms_net, ms.load_checkpoint(target, format=fmt))
    assert param_not_load == [] and ckpt_not_load == []
    ids = np.random.default_rng(0).integers(0, 20, size=(2, 8))
    expected = pt_net(torch.tensor(ids)).detach().numpy()
    actual = ms_net(ms.Tensor(ids, ms.int32)).asnumpy()
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5)


def test_the_map_names_every_special_layer(in_tmp: Path) -> None:
    name_map, value_map = ts.migrator.get_weight_map(pt_model=trained_torch_net())
    assert name_map["bn3d.weight"] == "bn3d.bn2d.gamma"
    assert name_map["bn1d.running_var"] == "bn1d.moving_variance"
    assert name_map["bn2d.num_batches_tracked"] is None
    assert name_map["ln.weight"] == "ln.gamma"  # through the subclass
    assert name_map["gn.bias"] == "gn.beta"
    assert name_map["emb.weight"] == "emb.embedding_table"
    assert name_map["prelu.weight"] == "prelu.w"
    assert name_map["lstm.weight_hh_l0"] == "lstm.weight_hh_l0"
    assert name_map["head.0.weight"] == "head.0.weight"
    assert value_map == {"conv1d.weight": "unsqueeze(2)"}


def test_mindspore_checkpoint_converts_back_to_torch(in_tmp: Path) -> None:
    pt_net = trained_torch_net()
    ts.migrator.get_weight_map(pt_net=pt_net, weight_map_save_path="map.json")
    torch.save(pt_net.state_dict(), "net.pth")
    ts.migrator.convert_weight("map.json", "net.pth", "net.ckpt", print_conv_info=False)
    ts.migrator.convert_weight_to_pt("map.json", "net.ckpt", "back.pth", print_conv_info=False)
    restored = TorchNet()
    restored.load_state_dict(torch.load("back.pth", weights_only=True), strict=True)
    for name, value in pt_net.state_dict().items():
        if not name.endswith("num_batches_tracked"):
            assert torch.equal(restored.state_dict()[name], value), name


def test_spec_prefix_and_custom_name_func(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Spec 003 scenario 1, uses 2 and 3: a prefix, then the spec's custom function."""

    def custorm_weight_name(weight_name_map: dict[str, str]) -> dict[str, str]:
        prefix = ".custorm."
        custorm_name_map = {}
        for key, value in weight_name_map.items():
            index = value.find(".")
            value = value[0:index] + prefix + value[index + 1 :]
            custorm_name_map[key] = str(value)
        return custorm_name_map

    net = trained_torch_net()
    prefixed = ts.migrator.get_weight_map(pt_model=net, weight_name_prefix="uvp", print_map=True)
    assert prefixed.name_map["bn1d.weight"] == "uvp.bn1d.gamma"
    assert "uvp.bn1d.gamma" in capsys.readouterr().out
    custom = ts.migrator.get_weight_map(pt_model=net, custom_name_func=custorm_weight_name)
    assert custom.name_map["head.0.weight"] == "head.custorm.0.weight"
    assert custom.name_map["bn1d.num_batches_tracked"] is None


class PTNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = tnn.Linear(2, 10)
        self.bn1 = tnn.BatchNorm1d(10)
        self.fc2 = tnn.Linear(10, 1)


class MSNet(mnn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = mnn.Dense(3, 10)
        self.bn1 = mnn.BatchNorm1d(10)
        self.fc2 = mnn.Dense(10, 1)


def test_spec_compare_pth_and_ckpt_example(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Spec 003 scenario 2: fc1 is Linear(2, 10) in torch and Dense(3, 10) in MindSpore."""
    pt_net, ms_net = PTNet(), MSNet()
    ts.migrator.get_weight_map(pt_model=pt_net, weight_map_save_path="torch_net_map.json")
    torch.save(pt_net.state_dict(), "pt_net.pth")
    ms.save_checkpoint(ms_net, "ms_net.ckpt")
    diff = ts.migrator.compare_pth_and_ckpt("torch_net_map.json", "pt_net.pth", "ms_net.ckpt", print_level=2)
    out = capsys.readouterr().out
    assert "Parameter name of torch" in out and "Parameter name of mindspore" in out
    shape = {row.orig_name: row for row in diff.shape_rows}
    assert shape["fc1.weight"].shape_equal is False
    assert shape["bn1.weight"].target_name == "bn1.gamma" and shape["bn1.weight"].shape_equal is True
    assert diff.dropped == ["bn1.num_batches_tracked"]
    values = {row.orig_name: row for row in diff.value_rows}
    assert values["bn1.running_var"].passed  # ones on both sides
    assert not values["fc2.weight"].passed  # independent random initialisations
    assert not diff.passed


def test_a_troubleshooter_map_file_converts(in_tmp: Path) -> None:
    net = tnn.Sequential(tnn.Conv1d(2, 3, 3), tnn.BatchNorm1d(3))
    torch.save(net.state_dict(), "net.pth")
    ts_adapter = "troubleshooter.migrator.mapping_relation.weight_adapter.trans_conv1d_weight_value"
    names = {k: k for k in net.state_dict()}
    names.update(
        {
            "1.weight": "1.gamma",
            "1.bias": "1.beta",
            "1.running_mean": "1.moving_mean",
            "1.running_var": "1.moving_variance",
        }
    )
    Path("ts_map.json").write_text(json.dumps([names, {"0.weight": ts_adapter}]))
    ts.migrator.convert_weight("ts_map.json", "net.pth", "net.ckpt", print_conv_info=False)
    loaded = ms.load_checkpoint("net.ckpt")
    assert tuple(loaded["0.weight"].shape) == (3, 2, 1, 3)
    assert "1.num_batches_tracked" in loaded  # TroubleShooter's map keeps the counter under its own name
