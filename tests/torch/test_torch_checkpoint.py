"""Reading and writing torch checkpoints, and the layer kinds the torch plugin reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch
from torch import nn

import tscore as ts
from tscore.checkpoint.files import load_checkpoint, save_checkpoint
from tscore.contract.checkpoints import CheckpointReadError
from tscore.plugins import hook


class MyNorm(nn.BatchNorm2d):
    """A subclass, as models define them: it must get BatchNorm2d's kind."""


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3)
        self.body = nn.Sequential(nn.Linear(4, 4), MyNorm(4), nn.ReLU())
        self.ln = nn.LayerNorm(4)
        self.emb = nn.Embedding(5, 4)
        self.scale = nn.Parameter(torch.ones(1))  # owned by the root


def test_layer_kinds_cover_every_state_dict_entry_in_order() -> None:
    net = Net()
    layers = hook().ts_layer_params(model=net)
    flat = [f"{path}.{name}" if path else name for path, _, names in layers for name in names]
    assert flat == list(net.state_dict())
    kinds = {path: kind for path, kind, _ in layers}
    assert kinds == {
        "": "",
        "conv": "conv1d",
        "body.0": "linear",
        "body.1": "batchnorm2d",
        "ln": "layernorm",
        "emb": "embedding",
    }


def test_state_dict_and_wrapped_dict_load_with_non_tensors_noted(tmp_path: Path) -> None:
    net = Net()
    torch.save(net.state_dict(), tmp_path / "plain.pth")
    torch.save(
        {"state_dict": net.state_dict(), "epoch": 3, "optimizer": {"lr": 0.1}}, tmp_path / "wrapped.pt"
    )
    plain = load_checkpoint(tmp_path / "plain.pth")
    wrapped = load_checkpoint(tmp_path / "wrapped.pt")
    assert list(plain.params) == list(wrapped.params) == list(net.state_dict())
    np.testing.assert_array_equal(wrapped.params["conv.weight"], net.conv.weight.detach().numpy())
    assert wrapped.skipped["epoch"] == "outside 'state_dict': int 3, not a tensor"
    assert "optimizer" in wrapped.skipped["optimizer"] or "dict" in wrapped.skipped["optimizer"]


def test_a_pickled_module_needs_trust(tmp_path: Path) -> None:
    torch.save(nn.Linear(2, 3), tmp_path / "whole.pth")
    with pytest.raises(CheckpointReadError, match="trust_pickle=True"):
        load_checkpoint(tmp_path / "whole.pth")
    trusted = load_checkpoint(tmp_path / "whole.pth", trust_pickle=True)
    assert list(trusted.params) == ["weight", "bias"]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"hello 101\n", "it starts with b'hello 101\\n'"),
        (b"", "the file is empty"),
        (b"x", "it starts with b'x'"),
        (b"\x80", "it starts with b'\\x80'"),
        (b"\x80\x04\x95\x0a\x00", "a pickle without torch's header"),
    ],
)
@pytest.mark.parametrize("trust", [False, True])
def test_a_file_that_is_no_torch_checkpoint_is_called_so_with_no_advice_to_trust_it(
    tmp_path: Path, content: bytes, why: str, trust: bool
) -> None:
    path = tmp_path / "model.pth"
    path.write_bytes(content)
    with pytest.raises(CheckpointReadError) as caught:
        load_checkpoint(path, trust_pickle=trust)
    message = str(caught.value)
    assert message.startswith(f"{path}: not a torch checkpoint: ") and why in message
    assert "trust" not in message and "torch.load failed" not in message


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_torchs_pickle_format_reads_whatever_pickle_protocol_wrote_it(tmp_path: Path, protocol: int) -> None:
    path = tmp_path / f"legacy{protocol}.pth"
    torch.save({"w": torch.arange(3.0)}, path, _use_new_zipfile_serialization=False, pickle_protocol=protocol)
    if (
        protocol >= 4
    ):  # torch's weights-only reader has no FRAME opcode: a real torch file, so trust is advised
        with pytest.raises(CheckpointReadError, match="trust_pickle=True"):
            load_checkpoint(path)
    loaded = load_checkpoint(path, trust_pickle=protocol >= 4)
    np.testing.assert_array_equal(loaded.params["w"], [0.0, 1.0, 2.0])


def test_a_truncated_torch_checkpoint_says_so(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(64)}, tmp_path / "old.pth", _use_new_zipfile_serialization=False)
    (tmp_path / "cut.pth").write_bytes((tmp_path / "old.pth").read_bytes()[:40])
    with pytest.raises(CheckpointReadError, match=r"cut\.pth: a torch checkpoint that torch\.load cannot"):
        load_checkpoint(tmp_path / "cut.pth")
    torch.save({"w": torch.ones(64)}, tmp_path / "new.pth")
    (tmp_path / "cut.pth").write_bytes((tmp_path / "new.pth").read_bytes()[:300])
    with pytest.raises(CheckpointReadError, match=r"cut\.pth: no zip directory at the end of the file"):
        load_checkpoint(tmp_path / "cut.pth")


def test_legacy_format_bfloat16_and_write_back(tmp_path: Path) -> None:
    state = {"w": torch.arange(4, dtype=torch.float32).to(torch.bfloat16)}
    torch.save(state, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    contents = load_checkpoint(tmp_path / "legacy.pt")
    assert contents.params["w"].dtype == ml_dtypes.bfloat16
    save_checkpoint(contents.params, tmp_path / "again.pth")
    again = torch.load(tmp_path / "again.pth", weights_only=True)
    assert again["w"].dtype == torch.bfloat16 and torch.equal(again["w"], state["w"])


def test_truncated_torch_file_names_byte_offset(tmp_path: Path) -> None:
    torch.save(Net().state_dict(), tmp_path / "ok.pth")
    data = (tmp_path / "ok.pth").read_bytes()
    (tmp_path / "cut.pth").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointReadError, match=rf"cut.pth: .*truncated.*at byte {len(data) // 2}"):
        load_checkpoint(tmp_path / "cut.pth")
    damaged = bytearray(data)
    header = data.index(b"PK\x03\x04", data.index(b"PK\x03\x04") + 4)  # a later member's local header
    damaged[header : header + 30] = b"\x00" * 30
    (tmp_path / "bad.pth").write_bytes(bytes(damaged))
    with pytest.raises(
        CheckpointReadError, match=rf"bad.pth: archive member .* is damaged .*at byte {header}"
    ):
        load_checkpoint(tmp_path / "bad.pth")


def test_pth_against_ckpt_compare_runs_without_mindspore(tmp_path: Path) -> None:
    """Only torch and the numpy .ckpt writer/reader: MindSpore is never imported."""
    script = f"""
import sys, numpy as np, torch
import tscore as ts
from tscore.checkpoint.weight_map import WeightMap
from tscore.checkpoint.ckpt_format import write_ckpt
net = torch.nn.Sequential(torch.nn.Conv1d(2, 3, 3), torch.nn.LayerNorm(1))
torch.save(net.state_dict(), r"{tmp_path}/net.pth")
wm = WeightMap({{"0.weight": "0.weight", "0.bias": "0.bias", "1.weight": "1.gamma", "1.bias": "1.beta"}},
               {{"0.weight": "unsqueeze(2)"}})
wm.save(r"{tmp_path}/map.json")
ts.migrator.convert_weight(r"{tmp_path}/map.json", r"{tmp_path}/net.pth", r"{tmp_path}/net.ckpt",
                           print_conv_info=False)
diff = ts.migrator.compare_pth_and_ckpt(r"{tmp_path}/map.json", r"{tmp_path}/net.pth", r"{tmp_path}/net.ckpt",
                                        print_level=0)
assert diff.passed, diff.table()
assert "mindspore" not in sys.modules
print("ok", len(diff.value_rows))
"""
    env = {**os.environ, "TSCORE_PLUGINS": "torch"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "4"]


def test_get_weight_map_without_the_mindspore_plugin_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tscore import plugins

    monkeypatch.setenv("TSCORE_PLUGINS", "torch")
    plugins.reset_plugin_manager()
    try:
        with pytest.raises(ts.TscoreError, match=r"install ts_mindspore"):
            ts.migrator.get_weight_map(pt_net=Net())
    finally:
        monkeypatch.delenv("TSCORE_PLUGINS")
        plugins.reset_plugin_manager()


def test_get_weight_map_bad_arguments() -> None:
    with pytest.raises(TypeError, match="pt_net"):
        ts.migrator.get_weight_map()
    with pytest.raises(
        ts.UnsupportedObjectError, match=r"pt_net is a builtins\.object, which no loaded tscore plugin claims"
    ):
        ts.migrator.get_weight_map(pt_net=object())
