"""TroubleShooter 1.0.18's network functions across torch and MindSpore: convert and load, save and load."""

from __future__ import annotations

import mindspore as ms
import numpy as np
import torch

import tscore as ts
from tests.cross.netdiff_nets import TorchCNN, ms_cnn, torch_net


def _ms_params(net) -> dict[str, np.ndarray]:
    return {p.name: p.asnumpy() for p in net.get_parameters()}


def test_convert_weight_and_load_gives_the_twin_the_torch_weights_and_the_same_outputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch_model = torch_net(0, TorchCNN).eval()
    torch.save(torch_model.state_dict(), tmp_path / "cnn.pth")
    ts.migrator.get_weight_map(torch_model, weight_map_save_path=tmp_path / "map.json")
    twin = ms_cnn()
    twin.set_train(False)
    result = ts.migrator.convert_weight_and_load(tmp_path / "map.json", tmp_path / "cnn.pth", twin)
    assert result.complete and result.loaded == len(torch_model.state_dict()) - 1  # num_batches_tracked
    params = _ms_params(twin)
    assert np.array_equal(params["features.1.gamma"], torch_model.features[1].weight.detach().numpy())
    assert np.array_equal(params["features.1.moving_mean"], torch_model.features[1].running_mean.numpy())
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    expected = torch_model(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(twin(ms.Tensor(x)).asnumpy(), expected, rtol=1e-4, atol=1e-5)
    # no temporary checkpoint (TroubleShooter writes one in the current folder): only what the test wrote
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cnn.pth", "map.json"]


def test_save_net_and_weight_params_of_both_sides_as_troubleshooter_names_them(tmp_path):
    torch_model = torch_net(0, TorchCNN)
    twin = ms_cnn()
    torch_files = ts.migrator.save_net_and_weight_params(torch_model, tmp_path)
    ms_files = ts.migrator.save_net_and_weight_params(twin, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "mindspore_net_architecture.txt",
        "mindspore_troubleshooter_create.ckpt",
        "torch_net_architecture.txt",
        "torch_net_map.json",
        "torch_troubleshooter_create.pth",
    ]
    assert "weight_map" not in ms_files and "weight_map" in torch_files
    fresh = ms_cnn()
    result = ts.widget.load_ms_weight2net(fresh, ms_files["weights"])
    assert result.complete
    for name, value in _ms_params(twin).items():
        assert np.array_equal(_ms_params(fresh)[name], value), name
    # the torch side's files convert into the twin through the map it wrote
    loaded = ts.migrator.convert_weight_and_load(torch_files["weight_map"], torch_files["weights"], fresh)
    assert loaded.complete
    assert np.array_equal(
        _ms_params(fresh)["classifier.weight"], torch_model.classifier.weight.detach().numpy()
    )


def test_compare_ms_ckpt_shows_the_torch_names_through_the_weight_map(tmp_path, capsys):
    torch_model = torch_net(0, TorchCNN)
    torch.save(torch_model.state_dict(), tmp_path / "cnn.pth")
    ts.migrator.get_weight_map(torch_model, weight_map_save_path=tmp_path / "map.json")
    ts.migrator.convert_weight(
        tmp_path / "map.json", tmp_path / "cnn.pth", tmp_path / "cnn.ckpt", print_level=0
    )
    twin = ms_cnn()
    ms.save_checkpoint(twin, str(tmp_path / "twin.ckpt"))
    diff = ts.migrator.compare_ms_ckpt(
        orig_file_path=tmp_path / "cnn.ckpt",
        target_file_path=tmp_path / "twin.ckpt",
        weight_map_path=tmp_path / "map.json",
    )
    pairs = {(row.orig_name, row.target_name) for row in diff.shape_rows}
    assert ("features.1.weight", "features.1.gamma") in pairs and (
        "classifier.bias",
        "classifier.bias",
    ) in pairs
    assert "features.1.running_mean" in capsys.readouterr().out
    plain = ts.migrator.compare_ms_ckpt(tmp_path / "cnn.ckpt", tmp_path / "twin.ckpt", print_level=0)
    assert ("features.1.gamma", "features.1.gamma") in {
        (r.orig_name, r.target_name) for r in plain.shape_rows
    }
