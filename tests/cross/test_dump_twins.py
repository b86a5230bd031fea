"""A torch network and its MindSpore twin dumped with one config, then compared: the planted layer named."""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
import torch

import tscore as ts
from tests.cross.dumping import dump_step
from tests.cross.netdiff_nets import TorchCNN, ms_cnn, torch_net
from tscore.dump_format.reading import read_lines


def twins(in_tmp: Path, planted: str | None) -> tuple[torch.nn.Module, ms.nn.Cell]:
    """The torch CNN and its MindSpore twin holding the same weights (one layer's scaled when planted)."""
    pt_net = torch_net(0, TorchCNN).eval()
    torch.save(pt_net.state_dict(), "torch.pth")
    ts.migrator.get_weight_map(pt_net=pt_net, weight_map_save_path="map.json")
    ts.migrator.convert_weight("map.json", "torch.pth", "twin.ckpt", print_conv_info=False)
    ms_net = ms_cnn()
    ms_net.set_train(False)
    ms.load_param_into_net(ms_net, ms.load_checkpoint("twin.ckpt"))
    if planted is not None:
        weight = dict(ms_net.parameters_and_names())[f"{planted}.weight"]
        weight.set_data(weight * 1.05)
    return pt_net, ms_net


def compare_twins(in_tmp: Path, planted: str, level: str) -> ts.dump_compare.DumpCompareReport:
    """Dump both twins at ``level`` on one input and compare the MindSpore run against the torch one."""
    pt_net, ms_net = twins(in_tmp, planted)
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    pt_dump = dump_step(pt_net, lambda: pt_net(torch.from_numpy(x)), in_tmp / "pt", level, "tensor")
    ms_dump = dump_step(ms_net, lambda: ms_net(ms.Tensor(x)), in_tmp / "ms", level, "tensor")
    (in_tmp / "out").mkdir()
    return ts.dump.compare_dumps(str(ms_dump), str(pt_dump), str(in_tmp / "out"))


@pytest.fixture
def pynative():
    ms.set_context(mode=ms.PYNATIVE_MODE)


def test_twins_dumped_at_cell_level_give_records_at_every_paired_layer(in_tmp, pynative) -> None:
    pt_net, ms_net = twins(in_tmp, None)
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    pt_dump = dump_step(pt_net, lambda: pt_net(torch.from_numpy(x)), in_tmp / "pt", "L0", "tensor")
    ms_dump = dump_step(ms_net, lambda: ms_net(ms.Tensor(x)), in_tmp / "ms", "L0", "tensor")

    def paths(folder: Path) -> list[str]:
        return [r["module"] for r in read_lines(str(folder / "dump.jsonl")) if r["direction"] == "forward"]

    assert paths(pt_dump) == paths(ms_dump)  # every torch layer has its twin's record, in the same order
    assert {"features.0", "features.4", "classifier"} <= set(paths(pt_dump))
    (in_tmp / "out").mkdir()
    report = ts.dump.compare_dumps(str(ms_dump), str(pt_dump), str(in_tmp / "out"))
    assert report.first_error is None and report.passed, report.summary()
    assert all(v.how != "unpaired" and v.status == "ok" for v in report.calls)
    assert (
        report.target_label == "tscore dump, mindspore on CPU"
        and report.orig_label == "tscore dump, torch on cpu"
    )


def test_the_layer_planted_in_the_mindspore_twin_is_named(in_tmp, pynative) -> None:
    report = compare_twins(in_tmp, "features.4", "L0")
    first = report.first_error
    assert first is not None and first.module == "features.4" and first.status == "own", report.summary()
    classifier = next(v for v in report.calls if v.module == "classifier")
    assert classifier.how != "unpaired" and classifier.status == "inherited"  # Linear against Dense


def test_api_records_of_the_twins_pair_through_their_plugins_api_names(in_tmp, pynative) -> None:
    """L1: MindSpore's Conv2D + BiasAdd against torch's one conv2d, MatMul + BiasAdd against linear."""
    report = compare_twins(in_tmp, "features.4", "L1")
    paired = {v.target_call: v for v in report.calls if v.how != "unpaired"}
    assert paired["Primitive_Conv2D_0_forward"].orig_call == "Functional_conv2d_0_forward"
    assert paired["Primitive_Conv2D_0_forward"].status == "ok"  # its bias, from BiasAdd, compared too
    assert paired["Primitive_BatchNorm_0_forward"].orig_call == "Functional_batch_norm_0_forward"
    assert paired["Primitive_BatchNorm_0_forward"].status == "ok"  # gamma against weight, not running_mean
    assert paired["Primitive_MatMul_0_forward"].orig_call == "Functional_linear_0_forward"
    first = report.first_error
    assert first is not None and first.target_call == "Primitive_Conv2D_1_forward", report.summary()
    assert first.status == "weights" and first.module == "features.4"
    assert [v.status for v in report.calls if v.how != "unpaired"][first_index(report) + 1 :] == [
        "inherited"
    ] * 4  # relu, avg_pool2d, reshape/flatten (options not compared), linear
    conv_rows = [report.rows[i] for i in paired["Primitive_Conv2D_0_forward"].rows]
    assert sorted(r.path for r in conv_rows if r.role == "input") == ["bias", "input", "weight"]


def first_index(report) -> int:
    paired = [v for v in report.calls if v.how != "unpaired"]
    return next(i for i, v in enumerate(paired) if v is report.first_error)
