"""The MSAdapter backend on real mindnlp 0.5.1 (its mindtorch) and MindSpore 2.10, with no real torch.

``nox -s msadapter`` builds the environment. mindtorch cannot share a process
with real torch, so these tests never import torch before
:func:`ts_msadapter.enable` has made ``import torch`` give mindtorch.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tscore as ts
from tscore.plugins import hook


def test_real_torch_is_not_installed_here() -> None:
    """No real torch: ``import torch`` finds nothing, or mindtorch (once ``ts_msadapter.enable()`` ran)."""
    spec = importlib.util.find_spec("torch")
    assert spec is None or "mindtorch" in f"{spec.origin} {type(spec.loader).__module__}", spec


def test_mindspore_2_10_needs_the_generator_shim_to_import_mindnlp() -> None:
    """Without the shim ``import mindnlp`` fails on MindSpore 2.10's Generator; with it torch is mindtorch."""
    bare = subprocess.run(
        [sys.executable, "-c", "import mindnlp"], capture_output=True, text=True, timeout=300
    )
    assert bare.returncode != 0
    assert "Generator.__init__() missing 2 required positional arguments" in bare.stderr
    shimmed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import ts_msadapter; ts_msadapter.enable(); import torch; print(torch.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shimmed.returncode == 0, shimmed.stderr[-2000:]
    assert "mindtorch" in shimmed.stdout


@pytest.fixture(scope="module")
def torch():
    import ts_msadapter

    ts_msadapter.enable()
    import torch as mindtorch_as_torch

    return mindtorch_as_torch


def test_the_shim_is_applied_once_and_only_where_needed(torch) -> None:
    import ts_msadapter

    assert not ts_msadapter.generator_needs_shim()  # applied: the primitive takes no arguments now
    # torch.nn's initialisers draw from mindtorch's generator (its step goes through the shim);
    # mindtorch 0.5.1's CPU randn does not (it calls MindSpore's standard_normal with seeds 0, 0)
    torch.manual_seed(3)
    first = torch.nn.Linear(4, 4).weight.numpy()
    torch.manual_seed(3)
    assert np.array_equal(first, torch.nn.Linear(4, 4).weight.numpy())
    torch.manual_seed(4)
    assert not np.array_equal(first, torch.nn.Linear(4, 4).weight.numpy())


def test_tensors_convert_bit_for_bit_with_bfloat16_kept(torch) -> None:
    t = torch.tensor([1.5, 2.25, -3.0], dtype=torch.bfloat16)
    meta = ts.tensor_meta(t)
    assert (meta.framework, meta.dtype, meta.shape) == ("msadapter", "bfloat16", (3,))
    array = ts.to_numpy(t)
    assert array.dtype == ml_dtypes.bfloat16 and array.astype(np.float32).tolist() == [1.5, 2.25, -3.0]
    back = ts.from_numpy(array, "msadapter")
    assert isinstance(back, torch.Tensor) and back.dtype == torch.bfloat16
    assert ts.to_numpy(back).tobytes() == array.tobytes()


def small_net(torch):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 2)
    )


def test_a_network_s_state_keeps_torch_s_names_and_loads_back(torch) -> None:
    torch.manual_seed(0)
    net, other = small_net(torch), small_net(torch)
    info = hook().ts_model_info(model=net)
    assert info is not None and info.framework == "msadapter"
    state = hook().ts_model_state(model=net)
    assert list(state) == list(net.state_dict())
    assert "1.running_mean" in state and state["0.weight"].shape == (4, 3, 3, 3)
    assert hook().ts_load_model_state(model=other, params=state)
    x = torch.tensor(np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32))
    net.eval()
    other.eval()
    assert np.array_equal(net(x).numpy(), other(x).numpy())


def test_ts_save_names_files_as_on_real_torch(torch, tmp_path: Path) -> None:
    ts.save(str(tmp_path / "grad"), torch.tensor([1.0, 2.0]))
    ts.save(str(tmp_path / "pair"), [torch.tensor([1.0]), torch.tensor([2.0])])
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".npy")
    assert names == ["0_grad.npy", "1_pair_0.npy", "1_pair_1.npy"]


def test_layers_have_torch_s_kinds_settings_and_entries(torch) -> None:
    layers = {layer.path: layer for layer in hook().ts_named_layers(model=small_net(torch))}
    assert layers[""].kind == "sequential"
    assert layers["0"].kind == "conv2d" and layers["0"].params == ("0.weight", "0.bias")
    assert layers["0"].config["kernel_size"] == [3, 3] and layers["0"].config["padding"] == [[0, 0], [0, 0]]
    assert layers["1"].kind == "batchnorm2d" and layers["1"].config == {"eps": 1e-5, "momentum": 0.1}
    assert "1.running_mean" in layers["1"].params
    params = hook().ts_layer_params(model=small_net(torch))
    assert [(path, kind) for path, kind, _ in params] == [
        ("0", "conv2d"),
        ("1", "batchnorm2d"),
        ("3", "linear"),
    ]


def test_every_layer_call_is_recorded_and_the_modes_come_back(torch) -> None:
    from tscore.netdiff.recording import record_run, run_network

    net = small_net(torch)
    net.train()
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    out, recorder = record_run(net, (x,), "msadapter (cpu)")
    assert [call.path for call in recorder.calls] == ["", "0", "1", "2", "3"]
    assert recorder.calls[-1].output.shape == (2, 2)
    assert net.training and all(module.training for module in net.modules())
    assert np.allclose(ts.to_numpy(run_network(net, (x,), "msadapter (cpu)")), ts.to_numpy(out))


RECORDING = Path(__file__).resolve().parents[1] / "data" / "recorded_torch_smallnet"
INPUTS = (((2, 3, 8, 8), np.float32),)


def mindtorch_net(torch, variant: str | None = None, batchnorm: bool = False):
    from tests.msadapter.torch_source_nets import source_net

    net = source_net(seed=1, variant=variant, batchnorm=batchnorm)  # the recorded weights load by name
    assert type(net).__mro__[-2] is torch.nn.Module and "mindtorch" in type(net.head).__module__
    return net


def test_real_torch_s_recording_against_the_same_source_on_mindtorch_agrees_layer_by_layer(torch) -> None:
    """The recording (tests/msadapter/make_torch_recording.py) was made on real torch, in another process."""
    side = ts.migrator.load_recorded_network(RECORDING)
    assert side.framework == "torch"
    finder = ts.migrator.NetDifferenceFinder(side, mindtorch_net(torch), print_level=0, auto_conv_ckpt=2)
    report = finder.compare(auto_inputs=INPUTS, locate=True)
    assert report.labels == ("torch (cpu)", "msadapter (cpu)")
    assert report.weights is not None and report.weights.passed
    assert report.passed, report.verdict()
    assert report.unpaired == {"orig": [], "target": []}
    assert {row.status.value for row in report.layers} == {"ok"}
    assert len(report.layers) == 14 and all(row.orig_path == row.target_path for row in report.layers)


@pytest.mark.parametrize("variant", ["eps", "act"])
def test_a_difference_planted_on_the_mindtorch_side_is_named_at_its_layer(torch, variant: str) -> None:
    from tests.msadapter.torch_source_nets import PLANTED

    side = ts.migrator.load_recorded_network(RECORDING)
    finder = ts.migrator.NetDifferenceFinder(
        side, mindtorch_net(torch, variant), print_level=0, auto_conv_ckpt=2
    )
    report = finder.compare(auto_inputs=INPUTS, locate=True)
    first = report.first_divergence
    assert first is not None and first.orig_path == PLANTED[variant], report.verdict()


def test_mindtorch_s_batchnorm_on_mindspore_2_10_is_named_as_the_first_divergence(torch) -> None:
    """A real defect the finder finds: mindtorch 0.5.1's BatchNorm returns ones on MindSpore 2.10's CPU.

    When mindtorch computes BatchNorm right, this test fails and the BatchNorm network joins the
    agreeing one above.
    """
    side = ts.migrator.load_recorded_network(RECORDING.with_name("recorded_torch_smallnet_bn"))
    net = mindtorch_net(torch, batchnorm=True)
    report = ts.migrator.NetDifferenceFinder(side, net, print_level=0, auto_conv_ckpt=2).compare(
        auto_inputs=INPUTS, locate=True
    )
    first = report.first_divergence
    assert first is not None and (first.orig_path, first.orig_type) == ("features.1", "BatchNorm2d")
    assert first.inherited_error is not None and first.inherited_error < 1e-5
    assert report.weights is not None and report.weights.passed  # the same weights: the kernel differs


TORCH_DUMP = Path(__file__).resolve().parents[1] / "data" / "torch_smallnet_dump"


def _mindtorch_dump(torch, folder: Path, variant: str | None = None) -> Path:
    """Dump one forward call of the source network on mindtorch, with real torch's recorded weights."""
    from tests.msadapter.make_torch_recording import dump_forward

    net = mindtorch_net(torch, variant)
    hook().ts_load_model_state(model=net, params=ts.migrator.load_recorded_network(RECORDING).state)
    dump_forward(net, folder)  # as the torch dump was made; ``import torch`` there is mindtorch here
    return folder


def test_an_api_dump_on_mindtorch_pairs_value_by_value_with_real_torch_s(torch, tmp_path) -> None:
    """Real torch's dump (make_torch_recording.py) and mindtorch's: the same calls, names, values."""
    report = ts.dump.compare_dumps(str(TORCH_DUMP), str(_mindtorch_dump(torch, tmp_path / "msa")))
    assert report.passed and report.first_error is None, report.summary()
    assert [v.target_call for v in report.calls] == [v.orig_call for v in report.calls]
    assert [v.target_call for v in report.calls][:4] == [
        "Functional_conv2d_0_forward",
        "Functional_relu_0_forward",
        "Functional_max_pool2d_0_forward",
        "Tensor_flatten_0_forward",
    ]
    assert len(report.calls) == 13 and {v.status for v in report.calls} == {"ok"}
    assert all(r.target_name is not None and r.orig_name is not None for r in report.rows)
    # torch hands layer_norm's weight, bias and eps over by keyword: mindtorch's call is recorded so
    names = {r.orig_name for r in report.rows if r.orig_name.startswith("Functional_layer_norm_0")}
    assert "Functional_layer_norm_0_forward_input.weight" in names
    assert "Functional_layer_norm_0_forward_input.eps" in names
    worst = max(r.error for r in report.rows if r.basis == "statistics")
    assert worst < 1e-5


def test_a_layer_norm_changed_on_mindtorch_is_the_first_call_with_its_own_error(torch, tmp_path) -> None:
    report = ts.dump.compare_dumps(str(TORCH_DUMP), str(_mindtorch_dump(torch, tmp_path / "eps", "eps")))
    first = report.first_error
    assert first is not None, report.summary()
    assert first.target_call == "Functional_layer_norm_0_forward" and first.status == "own"
    assert "an argument differs: eps: 1e-05 vs 0.001" in first.reason


def test_the_api_capture_puts_every_original_back(torch, tmp_path) -> None:
    import mindtorch
    import mindtorch.nn.functional as functional
    from ts_msadapter.api_capture import ApiCapture

    class Recorder:
        busy = 0

        def begin(self, *args, **kwargs):
            return None

    capture = ApiCapture(Recorder())
    targets = capture.targets()
    assert {p for p, *_ in targets} == {"Torch", "Functional", "Tensor"} and len(targets) > 300
    before = {(id(owner), attribute): original for _, _, owner, attribute, original in targets}
    handles = capture.install()
    assert functional.linear is not before[(id(functional), "linear")]
    assert mindtorch.Tensor.__add__ is not before[(id(mindtorch.Tensor), "__add__")]
    handles.remove()
    for _, _, owner, attribute, original in targets:
        assert getattr(owner, attribute) is original, attribute
    assert torch.relu is before[(id(mindtorch), "relu")]


def test_auto_conv_2_with_a_network_that_is_not_mindtorch_or_a_state_of_other_names_says_so(torch) -> None:
    """A MindSpore network (ts_mindspore installed beside) does not keep torch's names: the report says
    to convert through the weight map; a state whose names the network lacks is an error naming them."""
    import mindspore as ms

    side = ts.migrator.load_recorded_network(RECORDING)
    cell = ms.nn.SequentialCell([ms.nn.Flatten(), ms.nn.Dense(192, 4)])
    report = ts.migrator.NetDifferenceFinder(side, cell, print_level=0, auto_conv_ckpt=2).compare(
        auto_inputs=INPUTS
    )
    assert report.labels[1] == "mindspore (CPU)" or report.labels[1].startswith("mindspore")
    notes = " ".join(report.weights.notes) if report.weights is not None else ""
    assert "does not keep torch's names as an MSAdapter network does; pass auto_conv_ckpt=1" in notes
    with pytest.raises(KeyError, match=r"no entries named \['features.9.weight'\]"):
        hook().ts_load_model_state(
            model=mindtorch_net(torch), params={"features.9.weight": np.zeros(3, np.float32)}
        )


def test_beside_ts_mindspore_mindtorch_s_tensors_and_dump_are_the_msadapter_backend_s(
    torch, tmp_path
) -> None:
    """Both plugins claim MindSpore tensors; the one that builds on MindSpore answers, and a dump
    records mindtorch's calls only (MindSpore's capture, which would record their insides, stays out)."""
    from tscore.plugins import get_plugin_manager

    manager = get_plugin_manager()
    frameworks = {b.framework for b in manager.backends()}
    assert {"mindspore", "msadapter"} <= frameworks  # nox -s msadapter installs ts_mindspore too
    assert [b.framework for b in manager.covered_backends()] == ["mindspore"]
    assert hook().ts_tensor_meta(obj=torch.ones(2)).framework == "msadapter"
    folder = _mindtorch_dump(torch, tmp_path / "msa")
    lines = (folder / "step0" / "rank0" / "dump.jsonl").read_text(encoding="utf-8").splitlines()
    names = [json.loads(line)["name"] for line in lines]
    assert len(names) == 13 and not any(n.startswith(("Primitive", "Mint")) for n in names)


def test_mindtorch_on_mindspore_2_10_tracks_no_gradients_so_the_dump_records_forward_calls_only(
    torch,
) -> None:
    """Why the MSAdapter dump has no backward records: mindtorch 0.5.1 here builds no autograd graph.

    When mindtorch tracks gradients, this test fails and capturing backward calls comes next.
    """
    layer = torch.nn.Linear(3, 2)
    loss = layer(torch.ones(4, 3)).sum()
    assert not loss.requires_grad and getattr(loss, "grad_fn", None) is None
    loss.backward()
    assert layer.weight.grad is None
