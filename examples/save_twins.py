"""A torch network and its MindSpore twin save tensors and gradients into two folders.

Run it with ``nox -s example`` (or ``python examples/save_twins.py OUT`` where
tscore, ts_torch and ts_mindspore are installed). The MindSpore twin gets the
torch weights as a migration does (``get_weight_map``, ``convert_weight``,
``load_param_into_net``, files in ``OUT/weights``), and both get the same
input; each saves its input, its hidden activation, the
gradient flowing back into that activation and its named parameter gradients,
under the same file names, so the two folders pair file by file. Then
``ts.migrator.compare_npy_dir`` compares the folders and prints the table;
the exit status is 0 when every pair agrees.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mindspore as ms
import numpy as np
import torch

import tscore as ts


class TorchNet(torch.nn.Module):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(8, 3)
        self.path = path

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ts.save(self.path + "input", x)
        h = self.act(self.fc1(x))
        ts.save(self.path + "hidden", h)
        h = ts.save_grad(self.path + "hidden", h)
        return self.fc2(h)


class MsNet(ms.nn.Cell):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.fc1 = ms.nn.Dense(4, 8)
        self.act = ms.nn.ReLU()
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

    ts.reset_save_id()
    ms_net = MsNet(str(root / "mindspore") + "/")
    migrate_weights(pt_net, ms_net, root / "weights")

    def forward(data: ms.Tensor, label: ms.Tensor) -> ms.Tensor:
        return ms.ops.mse_loss(ms_net(data), label)

    grad_fn = ms.value_and_grad(forward, None, ms_net.trainable_params())
    _, grads = grad_fn(ms.Tensor(x), ms.Tensor(target))
    ts.save(str(root / "mindspore" / "grads"), ts.widget.get_ms_grads(ms_net, grads))

    report = ts.migrator.compare_npy_dir(root / "torch", root / "mindspore", 1e-5, 1e-6, compare_shape=True)
    worst = max(pair.max_abs_diff or 0.0 for pair in report.pairs)
    print(f"largest difference between the twins: {worst:.3g}")
    return report.passed


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1] if len(sys.argv) > 1 else "example_output") else 1)
