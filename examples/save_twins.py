"""A torch network and its MindSpore twin save tensors and gradients into two folders.

Run it with ``nox -s example`` (or ``python examples/save_twins.py OUT`` where
tscore, ts_torch and ts_mindspore are installed). The MindSpore twin gets the
torch weights as a migration does (``get_weight_map``, ``convert_weight``,
``load_param_into_net``, files in ``OUT/weights``), and both get the same
input; each saves its input, its hidden activation, the
gradient flowing back into that activation and its named parameter gradients,
under the same file names, so the two folders pair file by file. Then
``ts.migrator.compare_npy_dir`` compares the folders and prints the table.

Then the migration mistake this example plants: a second MindSpore twin
written with ``nn.LeakyReLU()`` as the torch net is, but MindSpore's default
slope is 0.2 where torch's is 0.01. Its folder ``OUT/mindspore_slope`` is
compared with the torch one; the hidden activation is named as the first
divergence, and the comparison is written as one HTML page,
``OUT/report.html``, whose path is the last line printed. The exit status
is 0 when the correct twin agrees everywhere and the mistake is found where
it was planted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mindspore as ms
import numpy as np
import torch

import tscore as ts
from tscore.terminal import fit_lines, terminal_width


class TorchNet(torch.nn.Module):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.act = torch.nn.LeakyReLU()  # negative_slope=0.01
        self.fc2 = torch.nn.Linear(8, 3)
        self.path = path

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ts.save(self.path + "input", x)
        h = self.act(self.fc1(x))
        ts.save(self.path + "hidden", h)
        h = ts.save_grad(self.path + "hidden", h)
        return self.fc2(h)


class MsNet(ms.nn.Cell):
    def __init__(self, path: str, slope: float | None = 0.01) -> None:
        super().__init__()
        self.fc1 = ms.nn.Dense(4, 8)
        # torch's default slope, said out loud; slope=None keeps MindSpore's default (0.2): the mistake
        self.act = ms.nn.LeakyReLU() if slope is None else ms.nn.LeakyReLU(slope)
        self.fc2 = ms.nn.Dense(8, 3)
        self.path = path

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        ts.save(self.path + "input", x)
        h = self.act(self.fc1(x))
        ts.save(self.path + "hidden", h)
        h = ts.save_grad(self.path + "hidden", h)
        return self.fc2(h)


def migrate_weights(source: TorchNet, target: MsNet, folder: Path) -> None:
    """Move the torch weights into the MindSpore twin: map, convert to a .ckpt, load."""
    folder.mkdir(parents=True, exist_ok=True)
    pth, weight_map, ckpt = folder / "torch_net.pth", folder / "torch_net_map.json", folder / "ms_net.ckpt"
    torch.save(source.state_dict(), pth)
    ts.migrator.get_weight_map(pt_net=source, weight_map_save_path=weight_map)
    ts.migrator.convert_weight(weight_map, pth, ckpt, print_conv_info=False)
    not_loaded, _ = ms.load_param_into_net(target, ms.load_checkpoint(str(ckpt)))
    if not_loaded:
        raise RuntimeError(f"parameters left unloaded: {not_loaded}")


def run_ms_twin(
    pt_net: TorchNet, folder: Path, weights: Path, x: np.ndarray, target: np.ndarray, **kw: object
) -> None:
    """Give a MindSpore twin the torch weights, run one step and save what the torch net saved."""
    ts.reset_save_id()
    ms_net = MsNet(str(folder) + "/", **kw)  # type: ignore[arg-type]
    migrate_weights(pt_net, ms_net, weights)

    def forward(data: ms.Tensor, label: ms.Tensor) -> ms.Tensor:
        return ms.ops.mse_loss(ms_net(data), label)

    grad_fn = ms.value_and_grad(forward, None, ms_net.trainable_params())
    _, grads = grad_fn(ms.Tensor(x), ms.Tensor(target))
    ts.save(str(folder / "grads"), ts.widget.get_ms_grads(ms_net, grads))


def main(out: str) -> bool:
    ts.seed_all(1234)
    root = Path(out)
    x = np.random.randn(2, 4).astype(np.float32)
    target = np.random.randn(2, 3).astype(np.float32)

    ts.reset_save_id()
    pt_net = TorchNet(str(root / "torch") + "/")
    loss = torch.nn.functional.mse_loss(pt_net(torch.tensor(x)), torch.tensor(target))
    loss.backward()
    ts.save(str(root / "torch" / "grads"), ts.widget.get_pt_grads(pt_net))

    run_ms_twin(pt_net, root / "mindspore", root / "weights", x, target)
    report = ts.migrator.compare_npy_dir(root / "torch", root / "mindspore", 1e-5, 1e-6, compare_shape=True)
    worst = max(pair.max_abs_diff or 0.0 for pair in report.pairs)
    print(f"largest difference between the twins: {worst:.3g}")

    # The planted mistake: MindSpore's LeakyReLU() slopes 0.2, torch's 0.01.
    run_ms_twin(pt_net, root / "mindspore_slope", root / "weights", x, target, slope=None)
    mistake = ts.migrator.compare_npy_dir(root / "torch", root / "mindspore_slope", 1e-5, 1e-6, print_level=0)
    first = mistake.first_divergence
    found = first is not None and first.orig_name == "1_hidden.npy"
    print("planted mistake: MindSpore's LeakyReLU() slopes 0.2, torch's 0.01")
    print(fit_lines(mistake.headline(), terminal_width()))
    print(f"HTML report: {mistake.to_html(root / 'report.html')}")
    return report.passed and found


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1] if len(sys.argv) > 1 else "example_output") else 1)
