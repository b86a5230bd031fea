"""TroubleShooter 1.0.18's functions on real torch: a network's files, loading them back, the API dump."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import tscore as ts
from tscore.plugins import get_plugin_manager


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 5 * 5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


def _net(seed: int) -> Net:
    torch.manual_seed(seed)
    return Net().eval()


def test_save_net_and_weight_params_writes_troubleshooters_files_and_they_load_back(tmp_path):
    net = _net(0)
    written = ts.migrator.save_net_and_weight_params(net, tmp_path / "saved")
    # the map goes to MindSpore's names: written when MindSpore's plugin is there (nox -s both)
    with_mindspore = "mindspore" in {info.name for info in get_plugin_manager().hook.ts_framework_info()}
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == [
        "torch_net_architecture.txt",
        *(["torch_net_map.json"] if with_mindspore else []),
        "torch_troubleshooter_create.pth",
    ]
    assert written["weights"].endswith("torch_troubleshooter_create.pth")
    assert "Conv2d(3, 4" in (tmp_path / "saved" / "torch_net_architecture.txt").read_text()
    if with_mindspore:
        assert ts.migrator.load_weight_map(written["weight_map"]).name_map["bn.weight"] == "bn.gamma"
    other = _net(1)
    result = ts.widget.load_ms_weight2net(other, written["weights"])
    assert result.complete and result.loaded == len(net.state_dict())
    for name, value in net.state_dict().items():
        assert torch.equal(other.state_dict()[name], value), name
    for name in ("w.pth", "w", "w.ckpt"):  # torch's own format whatever the name, as TroubleShooter writes
        named = ts.migrator.save_net_and_weight_params(net, tmp_path / "named", weight_params_filename=name)
        assert named["weights"].endswith(name)
        assert torch.load(named["weights"], weights_only=True).keys() == net.state_dict().keys()


def test_loading_a_checkpoint_of_another_network_says_what_did_not_fit(tmp_path):
    torch.save({"fc.weight": torch.zeros(3, 100), "extra": torch.ones(1)}, tmp_path / "part.pth")
    net = _net(0)
    result = ts.widget.load_ms_weight2net(net, tmp_path / "part.pth")
    assert result.loaded == 1 and result.unused == ["extra"] and "conv.weight" in result.missing
    assert torch.equal(net.fc.weight, torch.zeros(3, 100))


def test_convert_weight_takes_print_level(tmp_path, capsys):
    net = _net(0)
    torch.save(net.state_dict(), tmp_path / "net.pth")
    ts.migrator.get_weight_map(net, weight_map_save_path=tmp_path / "map.json", target="torch")
    args = (tmp_path / "map.json", tmp_path / "net.pth")
    ts.migrator.convert_weight(*args, tmp_path / "quiet.safetensors", print_level=0)
    assert "bn.running_mean" not in capsys.readouterr().out
    ts.migrator.convert_weight(*args, tmp_path / "table.safetensors", print_level=1)
    assert "bn.running_mean" in capsys.readouterr().out
    with pytest.raises(ValueError, match="print_level"):
        ts.migrator.convert_weight(*args, tmp_path / "bad.safetensors", print_level=5)


def _dump_steps(net: Net, folder, x: torch.Tensor, steps: int = 1) -> None:
    ts.migrator.api_dump_init(net, folder)
    for _ in range(steps):
        ts.migrator.api_dump_start(dump_type="statistics")
        net(x)
        ts.migrator.api_dump_stop()


def test_api_dump_entries_dump_and_compare_and_say_what_replaces_them(tmp_path):
    x = torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(0))
    base, changed = _net(0), _net(0)
    with torch.no_grad():
        changed.fc.weight.mul_(1.5)  # the planted difference: the last layer's weights
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _dump_steps(base, tmp_path / "base", x, steps=2)
        _dump_steps(changed, tmp_path / "changed", x, steps=2)
        reports = ts.migrator.api_dump_compare(
            tmp_path / "base", tmp_path / "changed", tmp_path / "new" / "out"
        )
    messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert any("api_dump_init" in m and "ts.dump.Debugger" in m for m in messages)
    assert any("api_dump_compare" in m and "compare_dumps" in m for m in messages)
    assert sorted(p.name for p in (tmp_path / "base").iterdir() if p.is_dir()) == ["step0", "step1"]
    assert len(reports) == 2  # each step with its namesake
    for report in reports:
        first = report.first_error
        assert first is not None and "linear" in first.target_call
        assert first.status == "weights"  # the weights of the call differ: said so, not an error of its own
        assert report.counts().get("ok", 0) >= 3  # conv, batch norm, relu agree
    written = sorted(p.name.split("_")[2] for p in (tmp_path / "new" / "out").glob("compare_result*.csv"))
    assert written == ["step0", "step1"]  # the output folder was created, one CSV per step


def test_api_dump_start_before_init_and_bad_arguments_are_clear_errors(tmp_path):
    with pytest.raises(RuntimeError, match="api_dump_init"), pytest.warns(DeprecationWarning):
        ts.migrator.api_dump_start()
    with pytest.warns(DeprecationWarning):
        ts.migrator.api_dump_init(_net(0), tmp_path / "d")
    with pytest.raises(ValueError, match="dump_type"), pytest.warns(DeprecationWarning):
        ts.migrator.api_dump_start(dump_type="xlsx")
    with pytest.raises(ValueError, match=r"api_dump_start: mode 'bogus'"), pytest.warns(DeprecationWarning):
        ts.migrator.api_dump_start(mode="bogus")
    with (
        pytest.raises(ValueError, match=r"api_dump_start\(mode='range'\) needs"),
        pytest.warns(DeprecationWarning),
    ):
        ts.migrator.api_dump_start(mode="range", scope=["Functional_relu_0_forward"])


def test_the_api_dump_leaves_the_run_as_it_was(tmp_path):
    x = torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(0))
    net = _net(0)
    plain = net(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ts.migrator.api_dump_init(net, tmp_path / "d")
        ts.migrator.api_dump_start()
        dumped = net(x)
        ts.migrator.api_dump_stop()
    assert torch.equal(plain, dumped) and torch.equal(net(x), plain)
    assert not net._forward_hooks and not net._forward_pre_hooks
    assert np.isfinite(plain.detach().numpy()).all()
