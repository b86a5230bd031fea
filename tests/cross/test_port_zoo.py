"""The difference finder on model-zoo ports whose names differ: no map passed, the right layer named.

Each port of :mod:`tests.cross.port_zoo` renames modules and nests them
otherwise; the correct port must pass every stage with its weight-owning
layers aligned by structure, and the port with one real difference must be
blamed at that difference, never at a container's own code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import tscore as ts
from tests.cross.port_zoo import PORTS, MsResNet, TorchResNet, randomise_batchnorms
from tscore.plugins import hook


def run(name: str, port: object, **kwargs: object) -> ts.migrator.NetDiffReport:
    torch_class, _, _, _, shape = PORTS[name]
    torch.manual_seed(0)
    net = randomise_batchnorms(torch_class())
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 4
    finder = ts.migrator.NetDifferenceFinder(net, port, print_level=0, **kwargs)
    report = finder.compare(inputs=(x,), locate=True)
    assert kinds_differ_unsaid(report, net, port) == []
    return report


def kinds_differ_unsaid(report: ts.migrator.NetDiffReport, net: object, port: object) -> list[str]:
    """Rows that pair layers of two known neutral kinds that differ, without the row saying so."""
    orig = {layer.path: layer.kind for layer in hook().ts_named_layers(model=net)}
    target = {layer.path: layer.kind for layer in hook().ts_named_layers(model=port)}
    return [
        row.label()
        for row in report.layers
        if orig[row.orig_path]
        and target[row.target_path]
        and orig[row.orig_path] != target[row.target_path]
        and "paired with a layer of another kind" not in row.note
    ]


@pytest.mark.parametrize("name", sorted(PORTS))
def test_the_correct_port_passes_with_every_weight_layer_aligned(name: str) -> None:
    report = run(name, PORTS[name][1]())
    assert report.passed, report.verdict()
    assert report.weights is not None and report.weights.passed
    hows = {m["how"] for m in report.alignment}
    assert hows <= {"names", "structure"} and "structure" in hows
    assert report.verdict() == "outputs agree: no divergence"


@pytest.mark.parametrize("name", sorted(PORTS))
def test_the_port_with_one_difference_is_named_at_that_layer(name: str) -> None:
    _, _, broken, layer, _ = PORTS[name]
    report = run(name, broken())
    first = report.first_divergence
    assert first is not None, report.verdict()
    assert first.orig_path == layer, report.verdict()
    assert "not localised further" not in report.verdict()


def test_a_batchnorm_epsilon_is_named_with_its_setting() -> None:
    report = run("resnet", MsResNet(eps=1e-3))
    assert report.verdict().startswith("first divergence: bn1 (BatchNorm2d / BatchNorm2d)")
    assert "settings differ: eps torch (cpu) 1e-05, mindspore (CPU) 0.001" in report.verdict()


def test_an_activation_variant_is_paired_and_the_row_says_the_kinds_differ() -> None:
    _, _, broken, layer, _ = PORTS["mobilenet"]
    report = run("mobilenet", broken())
    row = next(r for r in report.layers if r.orig_path == layer)
    assert (row.orig_type, row.target_type) == ("ReLU6", "ReLU")
    assert row.note.startswith("paired with a layer of another kind (relu6 / relu), by order")


def test_a_lost_ceil_mode_is_named_by_its_setting_and_its_output_shapes() -> None:
    report = run("squeezenet", PORTS["squeezenet"][2]())
    shapes = "output shapes differ, (2, 16, 8, 8) vs (2, 16, 7, 7)"
    assert report.verdict().startswith(f"first divergence: features.2 (MaxPool2d / MaxPool2d): {shapes}")
    assert "settings differ: ceil_mode torch (cpu) True, mindspore (CPU) False" in report.verdict()


def test_a_layer_order_swap_is_placed_in_its_block_between_the_two_layers() -> None:
    broken = PORTS["mnasnet"][2]
    first = run("mnasnet", broken()).first_divergence
    assert first is not None and first.target_path == "features.4.block"
    assert first.where == "before layers.3.1.layers.1, after layers.3.1.layers.0"


def test_the_issue_s_call_with_two_checkpoint_files_pairs_through_the_structure(tmp_path: Path) -> None:
    """The manual's call with both checkpoints, the MindSpore one converted with custom_name_func."""
    torch.manual_seed(0)
    net = randomise_batchnorms(TorchResNet())
    port = MsResNet(eps=1e-3)
    renames = {"maxpool": "max_pool", "downsample": "down_sample", "fc": "classifier"}

    def rename(names: dict[str, str]) -> dict[str, str]:
        return {k: ".".join(renames.get(part, part) for part in v.split(".")) for k, v in names.items()}

    pth, ckpt = tmp_path / "resnet.pth", tmp_path / "resnet.ckpt"
    torch.save(net.state_dict(), pth)
    weight_map = ts.migrator.get_weight_map(pt_net=net, custom_name_func=rename)
    ts.migrator.convert_weight(
        weight_map=weight_map,
        pt_file_path=str(pth),
        ms_file_save_path=str(ckpt),
        print_conv_info=False,
        print_save_path=False,
    )
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    report = ts.migrator.NetDifferenceFinder(
        net, port, print_level=0, pt_params_path=str(pth), ms_params_path=str(ckpt)
    ).compare(inputs=(x,))
    owners = {m["source"] for m in report.alignment}
    assert len(owners) == 21 and owners <= {row.orig_path for row in report.layers}  # not 6 rows
    assert report.first_divergence is not None and report.first_divergence.orig_path == "bn1"
    assert "in its own code" not in report.verdict()
    assert kinds_differ_unsaid(report, net, port) == []


def test_get_weight_map_with_the_port_aligns_and_converts_every_weight(tmp_path: Path) -> None:
    torch.manual_seed(0)
    net = randomise_batchnorms(TorchResNet())
    port = MsResNet()
    weight_map = ts.migrator.get_weight_map(
        pt_net=net, ms_net=port, weight_map_save_path=str(tmp_path / "m.json")
    )
    assert weight_map.name_map["layer2.0.downsample.0.weight"] == "layer2.0.down_sample.0.weight"
    assert weight_map.name_map["fc.weight"] == "classifier.weight"
    assert weight_map.name_map["bn1.running_var"] == "bn1.moving_variance"
    saved = ts.migrator.load_weight_map(tmp_path / "m.json")
    assert {m.how for m in saved.alignment} == {"names", "structure"}
    assert "classifier" in weight_map.alignment_table()


def test_a_port_with_a_block_missing_reports_what_aligned_and_what_did_not() -> None:
    """Bad input: one side has a layer the other lacks; the alike neighbours are ambiguous, never certain."""
    from mindspore import nn as mnn

    from tests.cross.port_zoo import MsBasicBlock

    port = MsResNet()
    port.layer1 = mnn.SequentialCell([MsBasicBlock(8, 8, 1, 1e-5)])  # one block where torch has two
    torch.manual_seed(0)
    net = randomise_batchnorms(TorchResNet())
    weight_map = ts.migrator.get_weight_map(pt_net=net, ms_net=port)
    hows = {m.source: m.how for m in weight_map.alignment if m.source}
    assert hows["layer1.0.conv1"] == "names" and hows["layer1.1.conv1"] == "unmatched"
    report = run("resnet", port)
    assert not report.passed
    assert "layer1.1" in report.unpaired["orig"]
    assert "layers with no twin" in report.verdict()
    assert report.weights is not None and "layer1.1.conv1.weight" in report.weights.verdict()


def test_tscore_diff_names_the_layer_of_a_renamed_port_with_no_map(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tscore.cli import main

    zoo = Path(__file__).with_name("port_zoo.py")
    args = ["diff", f"{zoo}:torch_resnet_for_cli", f"{zoo}:ms_resnet_port_eps", "--input", "2,3,32,32"]
    assert main([*args, "-q"]) == 1
    assert capsys.readouterr().out.startswith("first divergence: bn1 (BatchNorm2d / BatchNorm2d)")
    assert main(args) == 1
    assert "Pairing the layers whose names differ" in capsys.readouterr().out
