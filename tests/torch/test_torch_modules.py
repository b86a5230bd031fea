"""The torch plugin's hooks for the difference finder: layers, module hooks, a forward, the state."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from torch import nn

from tscore.netdiff.recording import CallRecorder, NetRunError, record_run, run_network
from tscore.plugins import hook


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, stride=2, padding=1),
        nn.BatchNorm2d(4, eps=1e-3),
        nn.ReLU(inplace=True),
        nn.Flatten(),
    )


def test_layers_come_with_kind_own_entries_and_settings() -> None:
    layers = {layer.path: layer for layer in hook().ts_named_layers(model=net())}
    assert layers[""].kind == "sequential"
    assert layers["0"].params == ("0.weight", "0.bias")
    assert layers["0"].config == {
        "kernel_size": [3, 3],
        "stride": [2, 2],
        "dilation": [1, 1],
        "groups": 1,
        "bias": True,
        "padding": [[1, 1], [1, 1]],
    }
    assert layers["1"].params == (
        "1.weight",
        "1.bias",
        "1.running_mean",
        "1.running_var",
        "1.num_batches_tracked",
    )
    assert layers["1"].config == {"eps": 1e-3, "momentum": 0.1}
    assert layers["2"].kind == "relu" and layers["3"].kind == "flatten"


def test_pooling_settings_are_neutral() -> None:
    (layer,) = hook().ts_named_layers(model=nn.MaxPool2d(3, 2, 1, ceil_mode=True))
    assert layer.config == {
        "kernel_size": [3, 3],
        "stride": [2, 2],
        "padding": [[1, 1], [1, 1]],
        "ceil_mode": True,
    }
    (layer,) = hook().ts_named_layers(model=nn.AvgPool1d(2))
    assert layer.config == {"kernel_size": [2], "stride": [2], "padding": [[0, 0]], "ceil_mode": False}


def test_recorded_inputs_survive_an_in_place_relu() -> None:
    model = net().eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    _, recorder = record_run(model, (x,), "PyTorch")
    relu = next(call for call in recorder.calls if call.path == "2")
    assert (relu.args[0] < 0).any()  # copied before ReLU(inplace=True) overwrote it
    assert (relu.output >= 0).all()
    assert [call.path for call in recorder.calls] == ["", "0", "1", "2", "3"]
    assert recorder.calls[0].children == [1, 2, 3, 4]


def test_a_failing_forward_names_the_module_and_leaves_no_hook_and_the_mode_as_it_was() -> None:
    model = net().train()
    with pytest.raises(NetRunError, match=r"PyTorch forward failed in layer '0' \(Conv2d\): RuntimeError"):
        run_network(model, (np.zeros((2, 5, 8, 8), np.float32),), "PyTorch")
    assert all(m.training for m in model.modules())
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_run_forward_converts_nested_arrays_and_restores_each_mode() -> None:
    model = net()
    model[1].eval()  # a user's own mix of modes comes back as it was
    out = hook().ts_run_forward(
        model=model, args=(np.ones((1, 3, 4, 4), np.float32),), kwargs={}, train=False
    )
    assert isinstance(out, torch.Tensor) and not out.requires_grad
    assert [m.training for m in model] == [True, False, True, True]


def test_state_round_trips_through_the_hooks() -> None:
    source, target = net(), net()
    with torch.no_grad():
        target[0].weight.zero_()
    state = hook().ts_model_state(model=source)
    assert hook().ts_load_model_state(model=target, params=state)
    assert torch.equal(target[0].weight, source[0].weight)
    assert int(target[1].num_batches_tracked) == int(source[1].num_batches_tracked)


def test_the_tracking_recorder_keeps_no_values() -> None:
    recorder = CallRecorder(keep_values=False)
    handles = hook().ts_install_module_hooks(model=net(), recorder=recorder)
    assert len(handles) == 10 and not handles.defer_copies
    handles.remove()
    assert len(handles) == 0


def test_module_hooks_report_each_path_of_a_layer_listed_twice_and_all_come_off() -> None:
    """A layer a framework lists under two paths is reported under each; removal takes every hook off."""
    from tscore.contract.layers import HookHandles
    from tscore.module_hooks import hook_layers

    class Paths:
        def __init__(self) -> None:
            self.entered: list[str] = []

        def enter(self, path: str, layer: object, args: tuple, kwargs: dict) -> None:
            self.entered.append(path)

        def leave(self, path: str, layer: object, output: object) -> None:
            pass

    shared = nn.ReLU()
    recorder = Paths()
    handles = hook_layers([("a", shared), ("b", shared), ("c", nn.Tanh())], recorder, HookHandles())
    assert len(handles) == 6
    shared(torch.ones(2))
    assert recorder.entered == ["a", "b"]
    handles.remove()
    shared(torch.ones(2))
    assert recorder.entered == ["a", "b"] and not shared._forward_pre_hooks and not shared._forward_hooks


def test_a_network_copied_while_it_is_dumped_runs_and_reports_under_the_same_paths(tmp_path) -> None:
    """An EMA copy (``copy.deepcopy``) or a DataParallel replica made inside a dumped step carries the
    hooks: the copy runs, reports its layers under their paths, and the recorder is not copied."""
    import copy

    import tscore as ts

    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    debugger = ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="mix")
    debugger.start(model)
    twin = copy.deepcopy(model)
    replica = model._replicate_for_data_parallel()
    twin(torch.ones(1, 2))
    replica(torch.ones(1, 2))
    recorder = debugger.recorder
    debugger.stop()
    assert recorder._module_calls == {"": 2, "0": 2, "1": 2}
    assert not twin._forward_hooks or all(h.recorder is recorder for h in twin._forward_hooks.values())


def test_a_stand_in_torch_from_mindtorch_leaves_its_objects_to_the_msadapter_backend(monkeypatch) -> None:
    """Where mindnlp redirects ``import torch`` to mindtorch, ts_torch claims nothing (stand-in module)."""
    import types

    stand_in = types.ModuleType("torch")
    stand_in.__file__ = "/site-packages/mindtorch/__init__.py"
    stand_in.nn = torch.nn  # type: ignore[attr-defined]
    stand_in.Tensor = torch.Tensor  # type: ignore[attr-defined]
    model = net()
    assert hook().ts_model_info(model=model) is not None
    monkeypatch.setitem(sys.modules, "torch", stand_in)
    assert hook().ts_model_info(model=model) is None
    assert hook().ts_is_tensor(obj=torch.zeros(2)) is None
