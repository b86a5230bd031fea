"""A network recorded in one process stands in for it in another: the finder's report is the same.

Here the recording is made and read in one process (MindSpore and torch share
it); ``tests/msadapter`` reads one made by real torch beside mindtorch,
which cannot share a process with it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tscore as ts
from tests.cross.netdiff_nets import MISTAKE_LAYERS, TorchCNN, ms_cnn, torch_net
from tscore.netdiff.recorded import RecordingError

CNN_INPUT = (((2, 3, 16, 16), np.float32),)


def compare(orig: object, target: object) -> ts.migrator.NetDiffReport:
    return ts.migrator.NetDifferenceFinder(orig, target, print_level=0).compare(
        auto_inputs=CNN_INPUT, locate=True
    )


@pytest.mark.parametrize("mistake", [None, "pool_padding", "bn_momentum"])
def test_the_recorded_side_gives_the_in_process_report(tmp_path: Path, mistake: str | None) -> None:
    folder = ts.migrator.record_network(
        torch_net(0, TorchCNN), tmp_path / "torch_side", auto_inputs=CNN_INPUT
    )
    recorded = compare(ts.migrator.load_recorded_network(folder), ms_cnn(mistake))
    live = compare(torch_net(0, TorchCNN), ms_cnn(mistake))
    assert recorded.verdict() == live.verdict()
    assert recorded.weights is not None and live.weights is not None
    assert recorded.weights.verdict() == live.weights.verdict()  # 0-d num_batches_tracked kept 0-d
    assert recorded.labels == live.labels == ("torch (cpu)", "mindspore (CPU)")
    assert [(r.orig_path, r.target_path, r.status) for r in recorded.layers] == [
        (r.orig_path, r.target_path, r.status) for r in live.layers
    ]
    if mistake == "pool_padding":
        assert recorded.first_divergence is not None
        assert recorded.first_divergence.orig_path == MISTAKE_LAYERS[mistake]


def test_a_recording_made_by_another_process_is_read(tmp_path: Path) -> None:
    script = (
        "import sys; sys.path.insert(0, sys.argv[2]); import numpy as np; import tscore as ts\n"
        "from tests.cross.netdiff_nets import TorchCNN, torch_net\n"
        "ts.migrator.record_network(torch_net(0, TorchCNN), sys.argv[1], "
        "auto_inputs=(((2, 3, 16, 16), np.float32),))\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "side"), root], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = compare(ts.migrator.load_recorded_network(tmp_path / "side"), ms_cnn("conv_padding"))
    assert report.first_divergence is not None and report.first_divergence.orig_path == "features.4"


def test_other_inputs_and_a_missing_folder_are_refused_clearly(tmp_path: Path) -> None:
    folder = ts.migrator.record_network(torch_net(0, TorchCNN), tmp_path / "side", auto_inputs=CNN_INPUT)
    side = ts.migrator.load_recorded_network(folder)
    finder = ts.migrator.NetDifferenceFinder(side, ms_cnn(), print_level=0, fix_seed=3)  # other random inputs
    report = finder.compare(auto_inputs=CNN_INPUT)
    failure = report.cases[0].failure
    assert failure is not None and "was recorded on other inputs (float32[2, 3, 16, 16])" in failure.exception
    with pytest.raises(RecordingError, match="is not a recorded network"):
        ts.migrator.load_recorded_network(tmp_path / "nothing")
    with pytest.raises(TypeError, match="ms_net is a recorded network: it can only be the first network"):
        ts.migrator.NetDifferenceFinder(ms_cnn(), side, print_level=0)
    import torch

    checkpoint = tmp_path / "torch_cnn.pth"
    torch.save(torch_net(0, TorchCNN).state_dict(), checkpoint)
    finder = ts.migrator.NetDifferenceFinder(side, ms_cnn(), print_level=0, pt_params_path=str(checkpoint))
    with pytest.raises(RecordingError, match="load a checkpoint into the network before recording it"):
        finder.compare(auto_inputs=CNN_INPUT)


def test_a_half_written_recording_is_refused_and_bfloat16_and_named_tuples_survive(tmp_path: Path) -> None:
    import collections

    import torch

    Pair = collections.namedtuple("Pair", ["logits", "hidden"])

    class TwoOutputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> Pair:
            return Pair(self.fc(x), x * 2)

    import ml_dtypes

    net = TwoOutputs().to(torch.bfloat16).eval()
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4).astype(ml_dtypes.bfloat16)
    first = ts.migrator.record_network(net, tmp_path / "a", inputs=(x,))
    side = ts.migrator.load_recorded_network(first)
    assert side.state["fc.weight"].dtype == ml_dtypes.bfloat16
    output = side.case_for((x,)).output
    assert type(output).__name__ == "Pair" and output._fields == ("logits", "hidden")
    assert output.hidden.dtype == ml_dtypes.bfloat16 and np.array_equal(output.hidden, x * 2)
    second = ts.migrator.record_network(net, tmp_path / "b", inputs=(x,))
    (Path(first) / "arrays.npz").write_bytes((Path(second) / "arrays.npz").read_bytes())
    with pytest.raises(RecordingError, match="come from two different recordings"):
        ts.migrator.load_recorded_network(first)


def test_tscore_diff_records_in_one_call_and_compares_in_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tscore.cli import main

    twin = tmp_path / "twin.py"
    twin.write_text(
        "from tests.cross.netdiff_nets import ms_cnn, torch_net, TorchCNN\n"
        "def reference(): return torch_net(0, TorchCNN)\n"
        "def bad(): return ms_cnn('pool_padding')\n"
    )
    side = tmp_path / "side"
    assert main(["diff", f"{twin}:reference", "--record", str(side), "--input", "2,3,16,16"]) == 0
    assert capsys.readouterr().out.strip() == str(side)
    assert main(["diff", str(side), f"{twin}:bad", "--input", "2,3,16,16", "-q"]) == 1
    assert capsys.readouterr().out.startswith("first divergence: features.3 (MaxPool2d / MaxPool2d)")
    assert (
        main(["diff", str(side), f"{twin}:bad", "--input", "4,3,16,16", "-q"]) == 2
    )  # not the recorded inputs
    assert main(["diff", f"{twin}:reference", "--input", "2,3,16,16"]) == 2
    assert "give NET_B" in capsys.readouterr().err
    checkpoint = tmp_path / "good.pth"
    import torch

    torch.save(torch_net(3, TorchCNN).state_dict(), checkpoint)
    args = ["diff", f"{twin}:reference", "--pt-params", str(checkpoint), "--record", str(tmp_path / "side3")]
    assert main([*args, "--input", "2,3,16,16"]) == 0
    recorded = ts.migrator.load_recorded_network(tmp_path / "side3")
    assert np.array_equal(
        recorded.state["features.0.weight"], torch_net(3, TorchCNN).features[0].weight.detach().numpy()
    )
    assert (
        main(["diff", f"{twin}:reference", f"{twin}:bad", "--record", str(side), "--input", "2,3,16,16"]) == 2
    )
