"""Torch networks and their MindSpore twins, correct or with one planted migration mistake each.

``ms_cnn(mistake)`` and ``ms_encoder(mistake)`` build the twin of
:class:`TorchCNN` and :class:`TorchEncoder`; ``mistake`` plants one error of
the kinds FRAMEWORKS.md lists, at a known layer (``MISTAKE_LAYERS``).
"""

from __future__ import annotations

import mindspore as ms
import torch
from mindspore import nn as mnn
from mindspore import ops
from torch import nn as tnn

# mistake -> the torch path of the layer where it is planted
MISTAKE_LAYERS = {
    "pool_padding": "features.3",
    "conv_padding": "features.4",
    "bn_momentum": "features.1",
    "missing_bias": "features.4",
    "layernorm_eps": "norm",
    "dropout_on": "drop",
}


class TorchCNN(tnn.Module):
    """Convolutions, BatchNorm, both poolings and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.features = tnn.Sequential(
            tnn.Conv2d(3, 8, 3, padding=1),
            tnn.BatchNorm2d(8),
            tnn.ReLU(),
            tnn.MaxPool2d(3, 2, padding=1),
            tnn.Conv2d(8, 16, 3, stride=2, padding=1),
            tnn.ReLU(),
        )
        self.pool = tnn.AvgPool2d(2)
        self.classifier = tnn.Linear(16 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.classifier(x.flatten(1))


def ms_cnn(mistake: str | None = None) -> mnn.Cell:
    """The MindSpore twin of :class:`TorchCNN`, with ``mistake`` planted."""

    class MsCNN(mnn.Cell):
        def __init__(self) -> None:
            super().__init__()
            pool = (
                mnn.MaxPool2d(3, 2, pad_mode="same")
                if mistake == "pool_padding"
                else mnn.MaxPool2d(3, 2, pad_mode="pad", padding=1)
            )
            conv2 = (
                mnn.Conv2d(8, 16, 3, stride=2, has_bias=True)  # MindSpore's default pad_mode="same"
                if mistake == "conv_padding"
                else mnn.Conv2d(
                    8, 16, 3, stride=2, pad_mode="pad", padding=1, has_bias=mistake != "missing_bias"
                )
            )
            momentum = 0.1 if mistake == "bn_momentum" else 0.9  # torch's 0.1 copied as it is
            self.features = mnn.SequentialCell(
                mnn.Conv2d(3, 8, 3, pad_mode="pad", padding=1, has_bias=True),
                mnn.BatchNorm2d(8, momentum=momentum),
                mnn.ReLU(),
                pool,
                conv2,
                mnn.ReLU(),
            )
            self.pool = mnn.AvgPool2d(2, 2)
            self.classifier = mnn.Dense(16 * 2 * 2, 10)

        def construct(self, x: ms.Tensor) -> ms.Tensor:
            x = self.pool(self.features(x))
            return self.classifier(x.reshape(x.shape[0], -1))

    return MsCNN()


class TorchEncoder(tnn.Module):
    """Embedding, self-attention, LayerNorm, Dropout, an LSTM and a head; returns a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = tnn.Embedding(32, 16)
        self.attn = tnn.MultiheadAttention(16, 2, batch_first=True)
        self.norm = tnn.LayerNorm(16)
        self.drop = tnn.Dropout(0.2)
        self.lstm = tnn.LSTM(16, 16, batch_first=True)
        self.head = tnn.Linear(16, 4)

    def forward(self, ids: torch.Tensor, scale: torch.Tensor) -> dict[str, torch.Tensor]:
        x = self.embed(ids) * scale
        attended = self.attn(x, x, x, need_weights=False)[0]
        x = self.drop(self.norm(x + attended))
        x, (h, _) = self.lstm(x)
        return {"logits": self.head(x[:, -1]), "state": h}


class AlwaysDropout(mnn.Cell):
    """``F.dropout(x, p, self.training)`` migrated as ``ops.dropout(x, p)``: on in inference too."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return ops.dropout(x, p=self.p)


def ms_encoder(mistake: str | None = None) -> mnn.Cell:
    """The MindSpore twin of :class:`TorchEncoder`, with ``mistake`` planted."""

    class MsEncoder(mnn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.embed = mnn.Embedding(32, 16)
            self.attn = mnn.MultiheadAttention(16, 2, batch_first=True)
            eps = 1e-7 if mistake == "layernorm_eps" else 1e-5  # MindSpore's default against torch's
            self.norm = mnn.LayerNorm((16,), epsilon=eps)
            self.drop = AlwaysDropout(0.2) if mistake == "dropout_on" else mnn.Dropout(p=0.2)
            self.lstm = mnn.LSTM(16, 16, batch_first=True)
            self.head = mnn.Dense(16, 4)

        def construct(self, ids: ms.Tensor, scale: ms.Tensor) -> dict[str, ms.Tensor]:
            x = self.embed(ids) * scale
            attended = self.attn(x, x, x, need_weights=False)[0]  # a 1-tuple in MindSpore
            x = self.drop(self.norm(x + attended))
            x, (h, _) = self.lstm(x)
            return {"logits": self.head(x[:, -1]), "state": h}

    return MsEncoder()


def torch_net(seed: int, cls: type[tnn.Module]) -> tnn.Module:
    """A torch network with seeded weights and BatchNorm statistics away from their defaults."""
    torch.manual_seed(seed)
    net = cls()
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, tnn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
    return net
