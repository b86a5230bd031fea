"""A torch network and its PaddlePaddle port: the finder, weight conversion both ways, .pdparams files."""

from __future__ import annotations

import pickle
import subprocess
import sys

import ml_dtypes
import numpy as np
import paddle
import pytest
import torch
from paddle import nn as pnn
from torch import nn as tnn

import tscore as ts
from tscore.checkpoint.files import load_checkpoint
from tscore.cli import main
from tscore.contract.checkpoints import CheckpointReadError

INPUT = (((2, 3, 8, 8), np.float32),)


class TorchNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = tnn.Conv2d(3, 4, 3, padding=1)
        self.bn = tnn.BatchNorm2d(4)
        self.relu = tnn.ReLU()
        self.norm = tnn.LayerNorm(8)
        self.fc = tnn.Linear(4 * 8 * 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.norm(self.relu(self.bn(self.conv(x)))).flatten(1))


class PaddleNet(pnn.Layer):
    def __init__(self, bn_eps: float = 1e-5, pool: bool = False) -> None:
        super().__init__()
        self.conv = pnn.Conv2D(3, 4, 3, padding=1)
        self.bn = pnn.BatchNorm2D(4, epsilon=bn_eps)
        self.relu = pnn.ReLU()
        self.norm = pnn.LayerNorm(8)
        self.fc = pnn.Linear(4 * 8 * 8, 5)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc(self.norm(self.relu(self.bn(self.conv(x)))).flatten(1))


def torch_net() -> TorchNet:
    torch.manual_seed(0)
    net = TorchNet().eval()
    with torch.no_grad():  # statistics that are not the defaults, so that a wrong mapping shows
        net.bn.running_mean.uniform_(-1, 1)
        net.bn.running_var.uniform_(0.5, 2.0)
    return net


def find(a: object, b: object) -> ts.migrator.NetDiffReport:
    return ts.migrator.NetDifferenceFinder(a, b, print_level=0).compare(auto_inputs=INPUT)


def test_the_paddle_port_agrees_once_the_weights_go_through_the_conventions() -> None:
    report = find(torch_net(), PaddleNet())
    assert report.passed, report.render()
    assert (report.orig_label, report.target_label) == ("torch (cpu)", "paddle (cpu)")
    rows = {row.source_name: row for row in report.weights.conversion.rows}  # type: ignore[union-attr]
    assert rows["fc.weight"].target_shape == (256, 5) and rows["bn.running_var"].target_name == "bn._variance"
    assert "mindspore" not in (report.render() + report.to_json()).lower()


def test_a_planted_batchnorm_epsilon_in_the_port_is_named() -> None:
    report = find(torch_net(), PaddleNet(bn_eps=0.5))
    first = report.first_divergence
    assert first is not None, report.render()
    assert (first.orig_path, first.orig_type, first.target_type) == ("bn", "BatchNorm2d", "BatchNorm2D")
    assert first.own_error is not None and first.own_error > 1e-2
    assert first.inherited_error is not None and first.inherited_error < 1e-5
    assert [(s.name, s.orig, s.target) for s in first.settings] == [("eps", 1e-5, 0.5)]


def test_paddle_first_and_torch_second_works_too() -> None:
    paddle.seed(3)
    report = find(PaddleNet(), torch_net())
    assert report.passed, report.render()
    assert (report.weights.conversion.source, report.weights.conversion.target) == ("paddle", "torch")  # type: ignore[union-attr]


def test_pooling_settings_read_as_torch_s_so_a_lost_ceil_mode_is_named() -> None:
    from tscore.plugins import hook

    (pooled,) = hook().ts_named_layers(model=pnn.MaxPool2D(3, 2, padding=1, ceil_mode=True))
    assert pooled.config == {
        "kernel_size": [3, 3],
        "stride": [2, 2],
        "padding": [[1, 1], [1, 1]],
        "ceil_mode": True,
    }
    (pooled,) = hook().ts_named_layers(model=pnn.AvgPool1D(2))
    assert pooled.config == {"kernel_size": [2], "stride": [2], "padding": [[0, 0]], "ceil_mode": False}
    torch_pool = tnn.Sequential(tnn.MaxPool2d(3, 2, ceil_mode=True), tnn.Flatten())
    paddle_pool = pnn.Sequential(pnn.MaxPool2D(3, 2), pnn.Flatten())
    report = ts.migrator.NetDifferenceFinder(torch_pool, paddle_pool, print_level=0).compare(
        auto_inputs=(((1, 2, 8, 8), np.float32),)
    )
    assert "ceil_mode torch (cpu) True, paddle (cpu) False" in report.verdict()


def test_a_torch_state_dict_to_pdparams_and_back_is_bit_identical(tmp_path) -> None:
    net = torch_net()
    torch.save(net.state_dict(), tmp_path / "net.pth")
    ts.migrator.get_weight_map(net, str(tmp_path / "map.json"), target="paddle")
    ts.migrator.convert_weight(
        str(tmp_path / "map.json"), str(tmp_path / "net.pth"), str(tmp_path / "net.pdparams")
    )
    # Paddle itself loads the file, and the port computes what the torch network computes
    port = PaddleNet()
    missing, unexpected = port.set_state_dict(paddle.load(str(tmp_path / "net.pdparams")))
    assert not missing and not unexpected
    port.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(port(paddle.to_tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-5)
    ts.migrator.convert_weight_to_pt(
        str(tmp_path / "map.json"), str(tmp_path / "net.pdparams"), str(tmp_path / "back.pth")
    )
    diff = ts.migrator.compare_pth_and_ckpt(
        str(tmp_path / "map.json"), str(tmp_path / "net.pth"), str(tmp_path / "net.pdparams"), print_level=0
    )
    assert diff.passed and (diff.orig_label, diff.target_label) == ("torch", "paddle")
    assert (
        main(
            [
                "ckpt-diff",
                str(tmp_path / "net.pth"),
                str(tmp_path / "net.pdparams"),
                "--map",
                str(tmp_path / "map.json"),
                "-q",
            ]
        )
        == 0
    )
    back = torch.load(tmp_path / "back.pth", weights_only=True)
    original = net.state_dict()
    assert set(back) == set(original) - {"bn.num_batches_tracked"}
    for name, tensor in back.items():
        assert tensor.dtype == original[name].dtype, name
        assert tensor.numpy().tobytes() == original[name].numpy().tobytes(), name  # -0.0 and NaN bits too


def test_pdparams_written_by_paddle_keep_bfloat16_and_list_what_is_not_a_tensor(tmp_path) -> None:
    weights = {"w": paddle.to_tensor(np.array([1.5, -0.0, 2.0], np.float32)).astype("bfloat16")}
    paddle.save({"model": weights, "epoch": 3, "name": "run1"}, str(tmp_path / "ckpt.pdparams"))
    contents = load_checkpoint(tmp_path / "ckpt.pdparams")
    assert contents.params["w"].dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(contents.params["w"].astype(np.float32), [1.5, -0.0, 2.0])
    assert set(contents.skipped) == {"epoch", "name"}


def test_a_pdparams_that_would_run_code_is_refused_and_nothing_runs(tmp_path) -> None:
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (subprocess.call, (f"touch {marker}",))

    (tmp_path / "evil.pdparams").write_bytes(pickle.dumps({"w": np.ones(2), "x": Payload()}))
    with pytest.raises(CheckpointReadError, match=r"evil\.pdparams.*subprocess\.call.*trust_pickle=True"):
        load_checkpoint(tmp_path / "evil.pdparams")
    assert not marker.exists()


def test_a_truncated_pdparams_names_the_file(tmp_path) -> None:
    paddle.save({"w": paddle.ones([64])}, str(tmp_path / "ok.pdparams"))
    data = (tmp_path / "ok.pdparams").read_bytes()
    (tmp_path / "cut.pdparams").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointReadError, match=r"cut\.pdparams: not a readable \.pdparams file"):
        load_checkpoint(tmp_path / "cut.pdparams")


def test_loading_the_plugin_or_seeding_imports_no_paddle() -> None:
    probe = (
        "import sys, tscore as ts; from tscore.plugins import get_plugin_manager; "
        "pm = get_plugin_manager(); assert pm.records['paddle'].status == 'loaded', pm.records; "
        "ts.seed_all(1); print('paddle' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False"


class TorchRNN(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = tnn.LSTM(4, 6, num_layers=2, batch_first=True, bidirectional=True)
        self.head = tnn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0][:, -1])


class PaddleRNN(pnn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = pnn.LSTM(4, 6, num_layers=2, direction="bidirect")
        self.head = pnn.Linear(12, 3)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.head(self.lstm(x)[0][:, -1])


def test_recurrent_weights_convert_both_ways_although_paddle_lists_them_twice(tmp_path) -> None:
    paddle.seed(1)
    port = PaddleRNN()
    port.eval()
    paddle.save(port.state_dict(), str(tmp_path / "rnn.pdparams"))  # holds 0.cell_fw.* aliases as well
    weight_map = ts.migrator.get_weight_map(port, ms_net=TorchRNN())
    report = ts.migrator.convert_weight(
        weight_map=weight_map,
        pt_file_path=str(tmp_path / "rnn.pdparams"),
        ms_file_save_path=str(tmp_path / "rnn.pth"),
        print_conv_info=False,
    )
    skipped = [row.source_name for row in report.rows if row.status.value == "skipped"]
    assert len(skipped) == 16 and all(".cell_" in name for name in skipped)
    net = TorchRNN().eval()
    net.load_state_dict(torch.load(tmp_path / "rnn.pth", weights_only=True))  # strict: every entry
    x = np.random.default_rng(2).standard_normal((2, 5, 4)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(port(paddle.to_tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-6)
    assert find_rnn(net, PaddleRNN()).passed


def find_rnn(a: object, b: object) -> ts.migrator.NetDiffReport:
    report = ts.migrator.NetDifferenceFinder(a, b, print_level=0).compare(
        auto_inputs=(((2, 5, 4), np.float32),)
    )
    assert report.weights is not None and report.weights.passed, report.render()
    return report
