"""NetDifferenceFinder on real torch networks and their MindSpore twins, correct and with planted mistakes."""

from __future__ import annotations

import re
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
import torch
from mindspore import mint, ops
from mindspore import nn as mnn
from torch import nn as tnn

import tscore as ts
from tests.cross.netdiff_nets import (
    MISTAKE_LAYERS,
    TorchCNN,
    TorchEncoder,
    ms_cnn,
    ms_encoder,
    torch_net,
)
from tscore.cli import main
from tscore.netdiff.report import LayerStatus

CNN_INPUT = (((2, 3, 16, 16), np.float32),)
ENCODER_INPUT = (((2, 6), np.int64, (0, 32)), ((1,), np.float32, (1.0, 1.0)))
# Embeddings scaled down: LayerNorm's epsilon then matters (FRAMEWORKS.md: 0.27 on small-variance input).
QUIET_ENCODER_INPUT = (((2, 6), np.int64, (0, 32)), ((1,), np.float32, (1e-3, 1e-3)))
LINE = re.compile(r"^first divergence: (\S+) \((\w+) / (\w+)\): own error [\d.e+-]+, inherited [\d.e+-]+")


def find(pt_net: object, ms_net: object, auto_inputs: object, **kwargs: object) -> ts.migrator.NetDiffReport:
    locate = kwargs.pop("locate", None)
    finder = ts.migrator.NetDifferenceFinder(pt_net, ms_net, print_level=0, **kwargs)
    return finder.compare(auto_inputs=auto_inputs, locate=locate)


def test_the_correct_cnn_twin_passes_every_stage() -> None:
    report = find(torch_net(0, TorchCNN), ms_cnn(), CNN_INPUT)
    assert report.passed
    assert report.weights is not None and report.weights.passed
    assert report.weights.conversion is not None and report.weights.comparison is not None
    assert [row.orig_name for row in report.outputs] == ["step_0_out"]
    assert report.first_divergence is None and report.layers == []  # nothing to locate
    assert report.settings_differ == []
    assert report.verdict() == "outputs agree: no divergence"


def test_the_correct_encoder_twin_agrees_layer_by_layer() -> None:
    report = find(torch_net(0, TorchEncoder), ms_encoder(), ENCODER_INPUT, locate=True)
    assert report.passed, report.render()
    assert {row.orig_name for row in report.outputs} == {"step_0_logits", "step_0_state"}
    assert report.first_divergence is None
    by_path = {row.orig_path: row for row in report.layers}
    for path in ("embed", "attn", "norm", "drop", "lstm", "head", ""):
        assert by_path[path].status is LayerStatus.OK, by_path[path]
    assert by_path["head"].target_type == "Dense" and by_path["head"].paired_by == "weights"


@pytest.mark.parametrize("mistake", ["pool_padding", "conv_padding", "missing_bias"])
def test_a_cnn_mistake_is_named_at_its_layer(mistake: str) -> None:
    report = find(torch_net(0, TorchCNN), ms_cnn(mistake), CNN_INPUT)
    assert not report.passed
    first = report.first_divergence
    assert first is not None, report.render()
    assert first.orig_path == first.target_path == MISTAKE_LAYERS[mistake]
    assert first.own_error is not None and first.own_error > 1e-2
    assert first.inherited_error is not None and first.inherited_error < 1e-5
    match = LINE.match(report.verdict())
    assert match and match.group(1) == MISTAKE_LAYERS[mistake]
    statuses = {row.orig_path: row.status for row in report.layers}
    assert statuses[MISTAKE_LAYERS[mistake]] is LayerStatus.DIVERGES
    assert statuses["classifier"] is LayerStatus.INHERITS  # downstream: its own computation is right
    assert statuses["features.0"] is LayerStatus.OK


def test_a_missing_bias_is_also_an_unmapped_weight_and_a_setting() -> None:
    report = find(torch_net(0, TorchCNN), ms_cnn("missing_bias"), CNN_INPUT)
    weights = report.weights
    assert weights is not None and not weights.passed
    assert weights.comparison is not None
    one_sided = [row.orig_name for row in weights.comparison.shape_rows if row.target_name is None]
    assert one_sided == ["features.4.bias"]
    assert "1 torch (cpu) entries have no mindspore (CPU) counterpart" in weights.verdict()
    first = report.first_divergence
    assert first is not None
    assert [(s.name, s.orig, s.target) for s in first.settings] == [("bias", True, False)]


def test_batchnorm_momentum_is_named_although_inference_agrees() -> None:
    report = find(torch_net(0, TorchCNN), ms_cnn("bn_momentum"), CNN_INPUT)
    assert report.passed  # eval mode uses the moving statistics: momentum does not show
    assert [row.orig_path for row in report.settings_differ] == [MISTAKE_LAYERS["bn_momentum"]]
    setting = report.settings_differ[0].settings[0]
    assert (setting.name, setting.orig, setting.target) == ("momentum", 0.1, 0.9)
    assert "momentum torch (cpu) 0.1, mindspore (CPU) 0.9" in report.verdict()


def test_layernorm_epsilon_is_named_by_its_setting_and_by_its_values() -> None:
    loud = find(torch_net(0, TorchEncoder), ms_encoder("layernorm_eps"), ENCODER_INPUT)
    assert loud.passed and [row.orig_path for row in loud.settings_differ] == ["norm"]
    quiet = find(torch_net(0, TorchEncoder), ms_encoder("layernorm_eps"), QUIET_ENCODER_INPUT)
    assert not quiet.passed
    assert quiet.first_divergence is not None and quiet.first_divergence.orig_path == "norm"
    assert quiet.first_divergence.settings[0].name == "eps"


def test_a_dropout_left_on_is_named() -> None:
    report = find(torch_net(0, TorchEncoder), ms_encoder("dropout_on"), ENCODER_INPUT)
    first = report.first_divergence
    assert first is not None
    assert (first.orig_path, first.orig_type, first.target_type) == ("drop", "Dropout", "AlwaysDropout")
    assert first.inherited_error is not None and first.inherited_error < 1e-5


class TorchResidual(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = tnn.Linear(8, 8)
        self.fc2 = tnn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)) + x)


class MsResidualWrongAdd(mnn.Cell):
    """The mistake is in the network's own code between two layers, not in a layer."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = mnn.Dense(8, 8)
        self.fc2 = mnn.Dense(8, 8)

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.fc2(mint.nn.functional.relu(self.fc1(x)) - x)


def test_a_mistake_between_layers_is_placed_between_them() -> None:
    torch.manual_seed(0)
    report = find(TorchResidual(), MsResidualWrongAdd(), (((4, 8), np.float32),))
    first = report.first_divergence
    assert first is not None and first.orig_path == ""
    assert first.where == "before fc2, after fc1"
    assert "in its own code, before fc2, after fc1" in report.verdict()


def _hooks(pt_net: tnn.Module, ms_net: mnn.Cell) -> int:
    torch_hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in pt_net.modules())
    ms_hooks = sum(len(c._forward_hook) + len(c._forward_pre_hook) for _, c in ms_net.cells_and_names())
    return torch_hooks + ms_hooks


def test_hooks_are_removed_and_modes_restored_after_success_and_failure() -> None:
    pt_net, ms_net = torch_net(0, TorchCNN).train(), ms_cnn("pool_padding")
    ms_net.set_train(True)
    report = find(pt_net, ms_net, CNN_INPUT, locate=True)
    assert report.layers and _hooks(pt_net, ms_net) == 0
    assert all(m.training for m in pt_net.modules())
    assert all(c.training for _, c in ms_net.cells_and_names()) and ms_net.phase == "train"
    failed = find(pt_net, ms_net, (((2, 4, 16, 16), np.float32),), locate=True)
    assert failed.cases[0].failure is not None
    assert _hooks(pt_net, ms_net) == 0
    assert all(m.training for m in pt_net.modules())
    assert all(c.training for _, c in ms_net.cells_and_names())


def test_a_wrong_input_names_the_framework_and_layer_and_the_other_cases_go_on() -> None:
    finder = ts.migrator.NetDifferenceFinder(torch_net(0, TorchCNN), ms_cnn(), print_level=0)
    rng = np.random.default_rng(0)
    bad, good = (
        rng.standard_normal((2, 4, 16, 16), np.float32),
        rng.standard_normal((2, 3, 16, 16), np.float32),
    )
    report = finder.compare(inputs=[(bad,), (good,)])
    failure = report.cases[0].failure
    assert failure is not None
    assert (failure.network, failure.layer_path, failure.layer_type) == (
        "torch (cpu)",
        "features.0",
        "Conv2d",
    )
    assert failure.exception.startswith("RuntimeError")
    assert report.cases[1].failure is None
    assert [row.orig_name for row in report.outputs] == ["step_1_out"] and report.outputs[0].passed
    assert not report.passed
    assert report.verdict().startswith(
        "1 case(s) failed to run; the first: torch (cpu) forward failed in layer 'features.0'"
    )


class RaisingHead(mnn.Cell):
    def construct(self, x: ms.Tensor) -> ms.Tensor:
        raise ValueError("this head is not written yet")


def test_a_mindspore_layer_that_raises_is_named() -> None:
    ms_net = ms_cnn()
    ms_net.classifier = RaisingHead()
    report = find(torch_net(0, TorchCNN), ms_net, CNN_INPUT, compare_params=False)
    failure = report.cases[0].failure
    assert failure is not None
    assert (failure.network, failure.layer_path, failure.layer_type) == (
        "mindspore (CPU)",
        "classifier",
        "RaisingHead",
    )
    assert "this head is not written yet" in failure.exception


class MsRenamedCNN(mnn.Cell):
    """A twin whose attribute names differ (``body`` for ``features``, ``fc`` for ``classifier``)."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.body = ms_cnn().features
        self.pool = mnn.AvgPool2d(2, 2)
        self.fc = mnn.Dense(64, classes)

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        x = self.pool(self.body(x))
        return self.fc(x.reshape(x.shape[0], -1))


def test_a_twin_whose_names_differ_is_aligned_by_structure_and_passes() -> None:
    report = find(torch_net(0, TorchCNN), MsRenamedCNN(), CNN_INPUT, locate=True)
    pairs = {m["source"]: (m["target"], m["how"]) for m in report.alignment}
    assert pairs == {
        "features.0": ("body.0", "structure"),
        "features.1": ("body.1", "structure"),
        "features.4": ("body.4", "structure"),
        "classifier": ("fc", "structure"),
    }
    assert report.weights is not None and report.weights.passed
    assert report.passed and report.verdict() == "outputs agree: no divergence"
    rows = {row.orig_path: (row.target_path, row.paired_by) for row in report.layers}
    assert rows["features"] == ("body", "contents") and rows["features.3"] == ("body.3", "order")
    assert "Pairing the layers whose names differ" in report.render()


def test_networks_whose_weights_do_not_map_get_a_table_and_a_verdict() -> None:
    report = find(torch_net(0, TorchCNN), MsRenamedCNN(classes=12), CNN_INPUT, locate=True)
    assert {"source": "classifier", "target": None, "kind": "linear", "how": "unmatched"} in report.alignment
    assert {"source": None, "target": "fc", "kind": "linear", "how": "unmatched"} in report.alignment
    weights = report.weights
    assert weights is not None and not weights.passed
    assert weights.comparison is not None
    torch_only = {row.orig_name for row in weights.comparison.shape_rows if row.target_name is None}
    ms_only = {row.target_name for row in weights.comparison.shape_rows if row.orig_name is None}
    assert torch_only == {"classifier.weight", "classifier.bias"} and ms_only == {"fc.weight", "fc.bias"}
    assert weights.verdict().startswith("weights DIFFER")
    assert not report.passed
    assert report.unpaired == {"orig": ["classifier"], "target": ["fc"]}
    assert "layers with no twin: 1 of torch (cpu), 1 of mindspore (CPU)" in report.verdict()
    table = report.layer_table()
    assert "classifier / -" in table and "- / fc" in table and "no twin" in table
    assert "weights DIFFER" in report.render()


def test_inputs_of_every_kind_give_the_same_result(tmp_path: Path) -> None:
    array = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", array)
    finder = ts.migrator.NetDifferenceFinder(torch_net(0, TorchCNN), ms_cnn(), print_level=0)
    given = [(array,), (torch.tensor(array),), (ms.Tensor(array),), (str(tmp_path / "x.npy"),)]
    report = finder.compare(inputs=given)
    assert report.passed
    assert [row.orig_name for row in report.outputs] == [f"step_{i}_out" for i in range(4)]
    maxima = {row.max_abs_diff for row in report.outputs}
    assert len(maxima) == 1  # the same numbers went in each time


def test_print_level_one_shows_the_three_stages(capsys: pytest.CaptureFixture[str]) -> None:
    ts.migrator.NetDifferenceFinder(torch_net(0, TorchCNN), ms_cnn("pool_padding")).compare(
        auto_inputs=CNN_INPUT
    )
    out = capsys.readouterr().out
    for title in (
        "Start Converting torch (cpu) Weights to mindspore (CPU)",
        "Start comparing torch (cpu) and mindspore (CPU) parameters",
        "Start Performing Network Inference",
        "The comparison results of Net",
        "The comparison results of layers",
    ):
        assert title in out
    assert out.rstrip().splitlines()[-1].startswith("first divergence: features.3 (MaxPool2d / MaxPool2d)")
    ts.migrator.NetDifferenceFinder(torch_net(0, TorchCNN), ms_cnn(), print_level=0).compare(
        auto_inputs=CNN_INPUT
    )
    assert capsys.readouterr().out == ""


def test_weights_from_files_are_loaded_without_conversion(tmp_path: Path) -> None:
    pt_source, ms_net = torch_net(1, TorchCNN), ms_cnn()
    torch.save(pt_source.state_dict(), tmp_path / "pt.pth")
    ts.migrator.get_weight_map(pt_net=pt_source, weight_map_save_path=str(tmp_path / "map.json"))
    ts.migrator.convert_weight(
        str(tmp_path / "map.json"), str(tmp_path / "pt.pth"), str(tmp_path / "ms.ckpt"), print_conv_info=False
    )
    finder = ts.migrator.NetDifferenceFinder(
        torch_net(2, TorchCNN),
        ms_net,
        print_level=0,
        pt_params_path=tmp_path / "pt.pth",
        ms_params_path=tmp_path / "ms.ckpt",
    )
    report = finder.compare(auto_inputs=CNN_INPUT)
    assert report.passed
    assert (
        report.weights is not None and report.weights.conversion is None and report.weights.comparison is None
    )
    assert [load.network for load in report.weights.loads] == ["torch (cpu)", "mindspore (CPU)"]
    assert report.weights.loads[0].missing == [] and report.weights.loads[1].missing == []


def test_without_conversion_different_initial_weights_show_in_the_weight_comparison() -> None:
    report = find(torch_net(0, TorchCNN), ms_cnn(), CNN_INPUT, auto_conv_ckpt=0)
    assert report.weights is not None and report.weights.conversion is None
    assert report.weights.comparison is not None and not report.weights.comparison.passed
    assert not report.passed


def test_auto_conv_ckpt_2_keeps_torch_names_for_a_mint_twin() -> None:
    torch.manual_seed(0)
    pt_net = tnn.Sequential(tnn.Linear(6, 5), tnn.ReLU(), tnn.Linear(5, 2))
    ms_net = mnn.SequentialCell(mint.nn.Linear(6, 5), mint.nn.ReLU(), mint.nn.Linear(5, 2))
    report = find(pt_net, ms_net, (((3, 6), np.float32),), auto_conv_ckpt=2, locate=True)
    assert report.passed
    assert report.weights is not None and report.weights.conversion is not None
    assert {row.status.value for row in report.weights.conversion.rows} == {"consistent"}
    assert {row.orig_path: row.target_type for row in report.layers}["0"] == "Linear"


def test_auto_conv_ckpt_2_with_a_network_that_renames_torch_s_weights_says_what_to_pass() -> None:
    report = find(torch_net(0, TorchCNN), ms_cnn(), CNN_INPUT, auto_conv_ckpt=2)
    assert report.weights is not None and not report.weights.passed
    verdict = report.weights.verdict()
    assert verdict.startswith(
        "weights DIFFER: auto_conv_ckpt=2 loads every weight under its torch (cpu) name"
    )
    assert "features.1.weight" in verdict and "pass auto_conv_ckpt=1" in verdict


def test_bad_arguments_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="auto_conv_ckpt must be 0"):
        ts.migrator.NetDifferenceFinder(TorchCNN(), ms_cnn(), auto_conv_ckpt=3)
    with pytest.raises(TypeError, match=r"ms_net is a builtins\.dict"):
        ts.migrator.NetDifferenceFinder(TorchCNN(), {})
    finder = ts.migrator.NetDifferenceFinder(TorchCNN(), ms_cnn(), print_level=0)
    with pytest.raises(ValueError, match=r"pass inputs \(tensors, arrays or .npy paths\) or auto_inputs"):
        finder.compare()
    with pytest.raises(TypeError, match=r"inputs\[0\] is a int"):
        finder.compare(inputs=(3,))


def test_the_json_report_round_trips() -> None:
    report = find(torch_net(0, TorchCNN), ms_cnn("pool_padding"), CNN_INPUT)
    again = ts.migrator.NetDiffReport.model_validate_json(report.to_json())
    assert again.first_divergence == report.first_divergence
    assert again.passed is False


def test_tscore_diff_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    twin = tmp_path / "twin.py"
    twin.write_text(
        "from tests.cross.netdiff_nets import ms_cnn, torch_net, TorchCNN\n"
        "def good(): return ms_cnn()\n"
        "def bad(): return ms_cnn('pool_padding')\n"
        "def reference(): return torch_net(0, TorchCNN)\n"
    )
    args = ["--input", "2,3,16,16", "-q"]
    assert main(["diff", f"{twin}:reference", f"{twin}:good", *args]) == 0
    assert capsys.readouterr().out.strip() == "outputs agree: no divergence"
    assert main(["diff", f"{twin}:reference", f"{twin}:bad", *args]) == 1
    assert capsys.readouterr().out.startswith("first divergence: features.3 (MaxPool2d / MaxPool2d)")
    assert main(["diff", f"{twin}:reference", f"{twin}:good", "--input", "2,5,16,16", "-q"]) == 2
    assert main(["diff", f"{twin}:reference", "no_such_module:Net", *args]) == 2
    assert "cannot import 'no_such_module'" in capsys.readouterr().err
    assert main(["diff", f"{twin}:reference", f"{twin}:bad", "--input", "2,3,16,16", "--json", "-"]) == 1
    assert '"first_divergence"' in capsys.readouterr().out


def test_tscore_diff_takes_a_network_instance_of_any_framework_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A MindSpore cell has no ``.parameters`` and is callable: it is still a network, not a factory."""
    twin = tmp_path / "instances.py"
    twin.write_text(
        "from tests.cross.netdiff_nets import ms_cnn, torch_net, TorchCNN\n"
        "reference = torch_net(0, TorchCNN)\n"
        "port = ms_cnn()\n"
        "def not_a_network(): return {'weights': 1}\n"
        "number = 3\n"
    )
    args = ["--input", "2,3,16,16", "-q"]
    assert main(["diff", f"{twin}:reference", f"{twin}:port", *args]) == 0
    assert capsys.readouterr().out.strip() == "outputs agree: no divergence"
    assert main(["diff", f"{twin}:reference", f"{twin}:not_a_network", *args]) == 2
    assert "returned a builtins.dict, which no loaded plugin takes for a network" in capsys.readouterr().err
    assert main(["diff", f"{twin}:reference", f"{twin}:number", *args]) == 2
    assert "is a int, which no loaded plugin takes for a network" in capsys.readouterr().err


def test_tscore_diff_imports_a_file_s_neighbours_and_a_network_that_cannot_be_built_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "common_parts.py").write_text(
        "from tests.cross.netdiff_nets import ms_cnn, torch_net, TorchCNN\n"
    )
    nets = tmp_path / "nets.py"
    nets.write_text(
        "from common_parts import ms_cnn, torch_net, TorchCNN\n"
        "def reference(): return torch_net(0, TorchCNN)\n"
        "def port(): return ms_cnn()\n"
        "def broken(): raise RuntimeError('no weights file here')\n"
        "def needs_size(size): return ms_cnn()\n"
    )
    args = ["--input", "2,3,16,16", "-q"]
    assert main(["diff", f"{nets}:reference", f"{nets}:port", *args]) == 0
    capsys.readouterr()
    assert main(["diff", f"{nets}:reference", f"{nets}:broken", *args]) == 2
    assert "building the network" in capsys.readouterr().err
    assert main(["diff", f"{nets}:reference", f"{nets}:needs_size", *args]) == 2
    assert "callable with no arguments" in capsys.readouterr().err


class OwnDense(mnn.Cell):
    """A hand-written dense layer: no plugin knows its kind, so nothing can show it is ``fc1``'s twin."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor(np.eye(8, dtype=np.float32)))
        self.bias = ms.Parameter(ms.Tensor(np.zeros(8, np.float32)))

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return ops.matmul(x, self.weight.T) + self.bias


class MsResidualRenamed(mnn.Cell):
    """A port whose first layer is its own dense layer under another name (``first`` for ``fc1``): no twin."""

    def __init__(self) -> None:
        super().__init__()
        self.first = OwnDense()
        self.fc2 = mnn.Dense(8, 8)

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.fc2(mint.nn.functional.relu(self.first(x)) + x)


def test_a_container_holding_a_layer_with_no_twin_is_never_blamed_for_its_own_code() -> None:
    torch.manual_seed(0)
    report = find(TorchResidual(), MsResidualRenamed(), (((4, 8), np.float32),), locate=True)
    first = report.first_divergence
    assert first is not None and first.orig_path == "" and first.where == ""
    assert "fc1" in report.unpaired["orig"] and "first" in report.unpaired["target"]
    verdict = report.verdict()
    assert "in its own code" not in verdict
    assert "not localised further: 1 layer(s) inside it found no twin (fc1)" in verdict
    assert "pass weight_map=" in verdict


class TorchActivated(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = tnn.Linear(8, 8)
        self.act = tnn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class MsActivatedOtherwise(mnn.Cell):
    """A port whose activation is another one under another name: paired by order, and said so."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = mnn.Dense(8, 8)
        self.activation = mnn.GELU()

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.activation(self.fc(x))


def test_a_layer_paired_with_one_of_another_kind_says_so() -> None:
    torch.manual_seed(0)
    report = find(TorchActivated(), MsActivatedOtherwise(), (((4, 8), np.float32),), locate=True)
    row = next(r for r in report.layers if r.orig_path == "act")
    assert row.target_path == "activation" and row.paired_by == "order"
    assert row.note.startswith("paired with a layer of another kind (relu / gelu), by order")
    assert report.first_divergence is not None and report.first_divergence.orig_path == "act"
