"""The MindSpore plugin's hooks for the difference finder: cells, cell hooks, a forward, the state."""

from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

from tscore.netdiff.recording import NetRunError, record_run, run_network
from tscore.plugins import hook


def net() -> nn.Cell:
    return nn.SequentialCell(
        nn.Conv2d(3, 4, 3, stride=2, pad_mode="pad", padding=1, has_bias=True),
        nn.BatchNorm2d(4, momentum=0.9),
        nn.ReLU(),
        nn.Dropout(keep_prob=0.8),
        nn.Flatten(),
    )


def test_cells_come_with_kind_own_parameters_and_neutral_settings() -> None:
    layers = {layer.path: layer for layer in hook().ts_named_layers(model=net())}
    assert layers[""].kind == "sequential"
    assert layers["0"].params == ("0.weight", "0.bias")
    assert layers["0"].config["padding"] == [[1, 1], [1, 1]] and layers["0"].config["bias"] is True
    assert layers["1"].params == ("1.moving_mean", "1.moving_variance", "1.gamma", "1.beta")
    assert layers["1"].config == {"eps": 1e-5, "momentum": 0.1}  # torch's meaning of 0.9
    assert layers["3"].config == {"p": 0.2}  # built with keep_prob


def test_same_padding_is_named_as_such() -> None:
    layers = hook().ts_named_layers(model=nn.Conv1d(2, 2, 3))
    assert layers[0].config["padding"] == "same" and layers[0].config["kernel_size"] == [3]


@pytest.mark.parametrize(
    ("cell", "config"),
    [
        (
            nn.MaxPool2d(3, 2, pad_mode="pad", padding=1, ceil_mode=True),
            {"kernel_size": [3, 3], "stride": [2, 2], "padding": [[1, 1], [1, 1]], "ceil_mode": True},
        ),
        (nn.MaxPool2d(3, 2, pad_mode="same"), {"kernel_size": [3, 3], "stride": [2, 2], "padding": "same"}),
        (nn.MaxPool1d(3, 2), {"kernel_size": [3], "stride": [2], "padding": [[0, 0]], "ceil_mode": False}),
        (
            nn.AvgPool2d(3, 2, pad_mode="pad", padding=1, ceil_mode=True),
            {"kernel_size": [3, 3], "stride": [2, 2], "padding": [[1, 1], [1, 1]], "ceil_mode": True},
        ),
    ],
)
def test_pooling_settings_are_read_from_the_cell_and_its_primitive(cell: nn.Cell, config: dict) -> None:
    found = hook().ts_named_layers(model=cell)[0].config
    assert {k: found[k] for k in config} == config


def test_recording_works_in_graph_mode_and_puts_the_mode_back(in_tmp: object) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        _, recorder = record_run(net(), (np.ones((1, 3, 8, 8), np.float32),), "MindSpore")
        assert ms.get_context("mode") == ms.GRAPH_MODE
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert [call.path for call in recorder.calls] == ["", "0", "1", "2", "3", "4"]
    assert recorder.calls[-1].output.shape == (1, 64)


def test_a_failing_forward_names_the_cell_and_leaves_no_hook_and_the_mode_as_it_was() -> None:
    model = net()
    model.set_train(True)
    with pytest.raises(NetRunError, match=r"MindSpore forward failed in layer '0' \(Conv2d\)"):
        run_network(model, (np.zeros((1, 5, 8, 8), np.float32),), "MindSpore")
    assert all(cell.training for _, cell in model.cells_and_names()) and model.phase == "train"
    assert all(not c._forward_hook and not c._forward_pre_hook for _, c in model.cells_and_names())


def test_state_round_trips_through_the_hooks() -> None:
    source, target = net(), net()
    state = hook().ts_model_state(model=source)
    state["0.weight"] = np.full_like(state["0.weight"], 0.5)
    assert hook().ts_load_model_state(model=target, params=state)
    assert np.array_equal(target[0].weight.asnumpy(), state["0.weight"])
