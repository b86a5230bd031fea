"""The difference finder and weight maps with any installed backend on either side, the same one included."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import tscore as ts
import tscore.plugins
from tests.cross.netdiff_nets import TorchCNN, ms_cnn, torch_net
from tscore.checkpoint.weight_map import WeightMapError

CNN_INPUT = (((2, 3, 16, 16), np.float32),)


def find(a: object, b: object, **kwargs: object) -> ts.migrator.NetDiffReport:
    return ts.migrator.NetDifferenceFinder(a, b, print_level=0, **kwargs).compare(auto_inputs=CNN_INPUT)


def text_of(report: ts.migrator.NetDiffReport) -> str:
    return (report.render() + report.to_json()).lower()


def test_two_torch_networks_with_different_initial_weights_agree_once_loaded_by_name() -> None:
    report = find(torch_net(0, TorchCNN), torch_net(1, TorchCNN))
    assert report.passed, report.render()
    weights = report.weights
    assert (
        weights is not None
        and weights.passed
        and weights.mode == "converted (same framework, loaded by name)"
    )
    assert weights.conversion is not None and {row.status.value for row in weights.conversion.rows} == {
        "consistent"
    }
    assert (report.orig_label, report.target_label) == ("orig torch (cpu)", "target torch (cpu)")
    assert "mindspore" not in text_of(report)


def test_two_torch_networks_one_batchnorm_epsilon_changed_name_that_layer() -> None:
    changed = torch_net(1, TorchCNN)
    changed.features[1].eps = 0.1
    report = find(torch_net(0, TorchCNN), changed)
    first = report.first_divergence
    assert first is not None and (first.orig_path, first.target_path) == ("features.1", "features.1")
    assert first.own_error is not None and first.own_error > 1e-2
    assert first.inherited_error is not None and first.inherited_error < 1e-6
    assert [(s.name, s.orig, s.target) for s in first.settings] == [("eps", 1e-5, 0.1)]
    assert "mindspore" not in text_of(report)


def test_two_mindspore_networks_name_the_planted_pooling_and_no_torch() -> None:
    report = find(ms_cnn(), ms_cnn("pool_padding"))
    assert report.weights is not None and report.weights.passed
    first = report.first_divergence
    assert first is not None and first.orig_path == "features.3" and first.orig_type == "MaxPool2d"
    assert (report.orig_label, report.target_label) == ("orig mindspore (CPU)", "target mindspore (CPU)")
    assert "torch" not in text_of(report)


def test_mindspore_first_and_torch_second_converts_the_weights_back_through_the_neutral_form() -> None:
    report = find(ms_cnn(), torch_net(0, TorchCNN))
    assert report.passed, report.render()
    conversion = report.weights.conversion if report.weights else None
    assert conversion is not None and (conversion.source, conversion.target) == ("mindspore", "torch")
    renamed = {row.source_name: row.target_name for row in conversion.rows}
    assert renamed["features.1.gamma"] == "features.1.weight"
    assert renamed["features.1.moving_variance"] == "features.1.running_var"
    # torch's batch counter has no MindSpore counterpart: it keeps its own value, and is no failure
    assert report.weights is not None and report.weights.passed
    mistaken = find(ms_cnn("pool_padding"), torch_net(0, TorchCNN))
    assert mistaken.first_divergence is not None and mistaken.first_divergence.orig_path == "features.3"


def test_a_mindspore_conv1d_weight_goes_back_to_torch_squeezed() -> None:
    from mindspore import nn as mnn

    weight_map = ts.migrator.get_weight_map(mnn.SequentialCell(mnn.Conv1d(2, 3, 3)), target="torch")
    assert weight_map.value_map == {"0.weight": "squeeze(2)"}
    assert (weight_map.source, weight_map.target) == ("mindspore", "torch")


def test_a_weight_map_for_another_pair_of_frameworks_is_refused(tmp_path) -> None:
    path = tmp_path / "map.json"
    ts.migrator.get_weight_map(torch_net(0, TorchCNN), str(path))  # torch -> mindspore
    assert json.loads(path.read_text())["target"] == "mindspore"
    with pytest.raises(
        WeightMapError, match="converts torch names to mindspore names, but pt_net and ms_net"
    ):
        ts.migrator.NetDifferenceFinder(torch_net(0, TorchCNN), torch_net(1, TorchCNN), weight_map=str(path))


def test_a_network_no_plugin_claims_names_the_installed_plugins() -> None:
    class NotANetwork:
        pass

    with pytest.raises(ts.UnsupportedObjectError, match=r"ms_net is a .*NotANetwork.*plugins for: .*torch"):
        ts.migrator.NetDifferenceFinder(torch_net(0, TorchCNN), NotANetwork())


def test_two_networks_with_nothing_in_common_say_so_in_the_weight_stage() -> None:
    other = torch.nn.Sequential(torch.nn.Linear(3, 2))
    report = ts.migrator.NetDifferenceFinder(torch_net(0, TorchCNN), other, print_level=0).compare(
        auto_inputs=CNN_INPUT
    )
    assert report.weights is not None and not report.weights.passed
    assert "weights DIFFER" in report.weights.verdict()
    assert report.cases[0].failure is not None  # the Linear cannot take the image


def test_a_mindspore_batchnorm3d_maps_to_torch_with_its_settings() -> None:
    from mindspore import nn as mnn

    net = mnn.SequentialCell(mnn.BatchNorm3d(4, eps=1e-3))
    weight_map = ts.migrator.get_weight_map(net, target="torch")
    assert weight_map.name_map["0.bn2d.gamma"] == "0.weight"
    assert weight_map.name_map["0.bn2d.moving_variance"] == "0.running_var"
    assert weight_map.target_only == ("0.num_batches_tracked",)
    layers = {layer.path: layer for layer in tscore.plugins.hook().ts_named_layers(model=net)}
    assert layers["0"].config["eps"] == pytest.approx(1e-3)


def test_mindspore_to_torch_files_and_back_again(tmp_path) -> None:
    import mindspore as ms

    net = ms_cnn()
    ms.save_checkpoint(net, str(tmp_path / "net.ckpt"))
    weight_map = ts.migrator.get_weight_map(net, str(tmp_path / "map.json"), ms_net=torch_net(0, TorchCNN))
    ts.migrator.convert_weight(
        str(tmp_path / "map.json"), str(tmp_path / "net.ckpt"), str(tmp_path / "net.pth")
    )
    state = torch.load(tmp_path / "net.pth", weights_only=True)
    assert "features.1.running_var" in state and "features.1.num_batches_tracked" not in state
    torch_net(0, TorchCNN).load_state_dict(state, strict=False)
    ts.migrator.convert_weight_to_pt(
        str(tmp_path / "map.json"), str(tmp_path / "net.pth"), str(tmp_path / "back.ckpt")
    )
    assert weight_map.inverse().target == "mindspore"
    diff = ts.migrator.compare_ms_ckpt(str(tmp_path / "net.ckpt"), str(tmp_path / "back.ckpt"), print_level=0)
    assert diff.passed and len(diff.value_rows) == len(state)
