"""Small torchvision-like networks and their MindSpore ports, written the way a model zoo writes them.

Each port renames modules (``layers`` for ``features``, ``down_sample`` for
``downsample``, ``classifier`` for ``fc``, ``max_pool`` for ``maxpool``),
nests its ``SequentialCell``\\s differently, says ``pad_mode`` and keeps
BatchNorm momentum in MindSpore's convention. ``PORTS`` lists, per network,
the one real difference a port may carry and the torch layer the finder
must name for it.
"""

from __future__ import annotations

import mindspore as ms
import torch
from mindspore import nn as mnn
from mindspore import ops
from torch import nn as tnn

# ---------------------------------------------------------------- ResNet with downsample


class TorchBasicBlock(tnn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(cout)
        self.relu = tnn.ReLU(inplace=True)
        self.conv2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = tnn.Sequential(
                tnn.Conv2d(cin, cout, 1, stride, bias=False), tnn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class TorchResNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = tnn.Conv2d(3, 8, 7, 2, 3, bias=False)
        self.bn1 = tnn.BatchNorm2d(8)
        self.relu = tnn.ReLU(inplace=True)
        self.maxpool = tnn.MaxPool2d(3, 2, 1)
        self.layer1 = tnn.Sequential(TorchBasicBlock(8, 8, 1), TorchBasicBlock(8, 8, 1))
        self.layer2 = tnn.Sequential(TorchBasicBlock(8, 16, 2), TorchBasicBlock(16, 16, 1))
        self.avgpool = tnn.AdaptiveAvgPool2d(1)
        self.fc = tnn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _ms_bn(channels: int, eps: float) -> mnn.BatchNorm2d:
    return mnn.BatchNorm2d(channels, eps=eps, momentum=0.9)


class MsBasicBlock(mnn.Cell):
    def __init__(self, cin: int, cout: int, stride: int, eps: float) -> None:
        super().__init__()
        self.conv1 = mnn.Conv2d(cin, cout, 3, stride, pad_mode="pad", padding=1)
        self.bn1 = _ms_bn(cout, eps)
        self.conv2 = mnn.Conv2d(cout, cout, 3, 1, pad_mode="pad", padding=1)
        self.bn2 = _ms_bn(cout, eps)
        self.relu = mnn.ReLU()
        self.down_sample = None
        if stride != 1 or cin != cout:
            self.down_sample = mnn.SequentialCell(
                [mnn.Conv2d(cin, cout, 1, stride, pad_mode="valid"), _ms_bn(cout, eps)]
            )

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        identity = x if self.down_sample is None else self.down_sample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class MsResNet(mnn.Cell):
    """mindcv's spelling: ``max_pool``, ``pool``, ``classifier``, ``down_sample``; BatchNorm eps given."""

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.conv1 = mnn.Conv2d(3, 8, 7, 2, pad_mode="pad", padding=3)
        self.bn1 = _ms_bn(8, eps)
        self.relu = mnn.ReLU()
        self.max_pool = mnn.MaxPool2d(3, 2, pad_mode="pad", padding=1)
        self.layer1 = mnn.SequentialCell([MsBasicBlock(8, 8, 1, eps), MsBasicBlock(8, 8, 1, eps)])
        self.layer2 = mnn.SequentialCell([MsBasicBlock(8, 16, 2, eps), MsBasicBlock(16, 16, 1, eps)])
        self.classifier = mnn.Dense(16, 10)

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        x = self.max_pool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.classifier(x.mean((2, 3)))


# ---------------------------------------------------------------- MobileNet-style inverted residual


class TorchConvBNReLU(tnn.Sequential):
    def __init__(self, cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1) -> None:
        super().__init__(
            tnn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
            tnn.BatchNorm2d(cout),
            tnn.ReLU6(inplace=True),
        )


class TorchInvertedResidual(tnn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.conv = tnn.Sequential(
            TorchConvBNReLU(cin, hidden, 1),
            TorchConvBNReLU(hidden, hidden, 3, stride, groups=hidden),
            tnn.Conv2d(hidden, cout, 1, bias=False),
            tnn.BatchNorm2d(cout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


class TorchMobileNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = tnn.Sequential(
            TorchConvBNReLU(3, 8, 3, 2),
            TorchInvertedResidual(8, 8, 1, 2),
            TorchInvertedResidual(8, 12, 2, 2),
        )
        self.classifier = tnn.Sequential(tnn.Dropout(0.2), tnn.Linear(12, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean((2, 3)))


def _ms_conv_bn_act(
    cin: int, cout: int, kernel: int, stride: int, groups: int, act: type[mnn.Cell]
) -> list[mnn.Cell]:
    return [
        mnn.Conv2d(cin, cout, kernel, stride, pad_mode="pad", padding=kernel // 2, group=groups),
        mnn.BatchNorm2d(cout, momentum=0.9),
        act(),
    ]


class MsInvertedResidual(mnn.Cell):
    """One flat ``SequentialCell`` where torch nests ``ConvBNReLU`` blocks."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, act: type[mnn.Cell]) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.layers = mnn.SequentialCell(
            [
                *_ms_conv_bn_act(cin, hidden, 1, 1, 1, mnn.ReLU6),
                *_ms_conv_bn_act(hidden, hidden, 3, stride, hidden, act),
                mnn.Conv2d(hidden, cout, 1, pad_mode="valid"),
                mnn.BatchNorm2d(cout, momentum=0.9),
            ]
        )

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return x + self.layers(x) if self.use_res else self.layers(x)


class MsMobileNet(mnn.Cell):
    """``act`` is the activation after the depthwise convolution of the second block (torch: ReLU6)."""

    def __init__(self, act: type[mnn.Cell] = mnn.ReLU6) -> None:
        super().__init__()
        self.features = mnn.SequentialCell(
            [
                mnn.SequentialCell(_ms_conv_bn_act(3, 8, 3, 2, 1, mnn.ReLU6)),
                MsInvertedResidual(8, 8, 1, 2, mnn.ReLU6),
                MsInvertedResidual(8, 12, 2, 2, act),
            ]
        )
        self.head = mnn.SequentialCell([mnn.Dropout(p=0.2), mnn.Dense(12, 10)])

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.head(self.features(x).mean((2, 3)))


# ---------------------------------------------------------------- MNASNet-style stack, inplace ReLUs


class TorchMnasBlock(tnn.Module):
    def __init__(self, cin: int, cout: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.layers = tnn.Sequential(
            tnn.Conv2d(cin, hidden, 1, bias=False),
            tnn.BatchNorm2d(hidden),
            tnn.ReLU(inplace=True),
            tnn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
            tnn.BatchNorm2d(hidden),
            tnn.ReLU(inplace=True),
            tnn.Conv2d(hidden, cout, 1, bias=False),
            tnn.BatchNorm2d(cout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class TorchMnasNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = tnn.Sequential(
            tnn.Conv2d(3, 8, 3, 2, 1, bias=False),
            tnn.BatchNorm2d(8),
            tnn.ReLU(inplace=True),
            tnn.Sequential(TorchMnasBlock(8, 8, 3), TorchMnasBlock(8, 8, 3)),
            tnn.Conv2d(8, 16, 1, bias=False),
            tnn.BatchNorm2d(16),
            tnn.ReLU(inplace=True),
        )
        self.classifier = tnn.Sequential(tnn.Dropout(0.2), tnn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.layers(x).mean((2, 3)))


class MsMnasBlock(mnn.Cell):
    def __init__(self, cin: int, cout: int, expand: int, swapped: bool) -> None:
        super().__init__()
        hidden = cin * expand
        first = [mnn.BatchNorm2d(hidden, momentum=0.9), mnn.ReLU()]
        self.block = mnn.SequentialCell(
            [
                mnn.Conv2d(cin, hidden, 1, pad_mode="valid"),
                *(first[::-1] if swapped else first),
                mnn.Conv2d(hidden, hidden, 3, pad_mode="pad", padding=1, group=hidden),
                mnn.BatchNorm2d(hidden, momentum=0.9),
                mnn.ReLU(),
                mnn.Conv2d(hidden, cout, 1, pad_mode="valid"),
                mnn.BatchNorm2d(cout, momentum=0.9),
            ]
        )

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.block(x)


class MsMnasNet(mnn.Cell):
    """The stack flat in ``features``, no inner ``Sequential``; ``swapped``: ReLU before BN in block 2."""

    def __init__(self, swapped: bool = False) -> None:
        super().__init__()
        self.features = mnn.SequentialCell(
            [
                mnn.Conv2d(3, 8, 3, 2, pad_mode="pad", padding=1),
                mnn.BatchNorm2d(8, momentum=0.9),
                mnn.ReLU(),
                MsMnasBlock(8, 8, 3, False),
                MsMnasBlock(8, 8, 3, swapped),
                mnn.Conv2d(8, 16, 1, pad_mode="valid"),
                mnn.BatchNorm2d(16, momentum=0.9),
                mnn.ReLU(),
            ]
        )
        self.dropout = mnn.Dropout(p=0.2)
        self.dense = mnn.Dense(16, 10)

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.dense(self.dropout(self.features(x).mean((2, 3))))


# ---------------------------------------------------------------- SqueezeNet-style fire module, ceil_mode


class TorchFire(tnn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int) -> None:
        super().__init__()
        self.squeeze = tnn.Conv2d(cin, squeeze, 1)
        self.squeeze_activation = tnn.ReLU(inplace=True)
        self.expand1x1 = tnn.Conv2d(squeeze, expand, 1)
        self.expand1x1_activation = tnn.ReLU(inplace=True)
        self.expand3x3 = tnn.Conv2d(squeeze, expand, 3, padding=1)
        self.expand3x3_activation = tnn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat(
            [self.expand1x1_activation(self.expand1x1(x)), self.expand3x3_activation(self.expand3x3(x))], 1
        )


class TorchSqueezeNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = tnn.Sequential(
            tnn.Conv2d(3, 16, 3, stride=2),
            tnn.ReLU(inplace=True),
            tnn.MaxPool2d(3, 2, ceil_mode=True),
            TorchFire(16, 4, 8),
            TorchFire(16, 4, 8),
            tnn.MaxPool2d(3, 2, ceil_mode=True),
            TorchFire(16, 6, 12),
        )
        self.classifier = tnn.Sequential(
            tnn.Dropout(0.5), tnn.Conv2d(24, 10, 1), tnn.ReLU(inplace=True), tnn.AdaptiveAvgPool2d(1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


class MsFire(mnn.Cell):
    def __init__(self, cin: int, squeeze: int, expand: int) -> None:
        super().__init__()
        self.squeeze = mnn.Conv2d(cin, squeeze, 1, has_bias=True, pad_mode="valid")
        self.expand_1x1 = mnn.Conv2d(squeeze, expand, 1, has_bias=True, pad_mode="valid")
        self.expand_3x3 = mnn.Conv2d(squeeze, expand, 3, has_bias=True, pad_mode="pad", padding=1)
        self.relu = mnn.ReLU()

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        x = self.relu(self.squeeze(x))
        return ops.cat([self.relu(self.expand_1x1(x)), self.relu(self.expand_3x3(x))], 1)


class MsSqueezeNet(mnn.Cell):
    """``ceil_mode``: whether the port's poolings round up as torch's do."""

    def __init__(self, ceil_mode: bool = True) -> None:
        super().__init__()

        def pool() -> mnn.Cell:
            if ceil_mode:
                return mnn.MaxPool2d(3, 2, pad_mode="pad", padding=0, ceil_mode=True)
            return mnn.MaxPool2d(3, 2, pad_mode="valid")

        self.features = mnn.SequentialCell(
            [
                mnn.Conv2d(3, 16, 3, 2, has_bias=True, pad_mode="valid"),
                mnn.ReLU(),
                pool(),
                MsFire(16, 4, 8),
                MsFire(16, 4, 8),
                pool(),
                MsFire(16, 6, 12),
            ]
        )
        self.final_conv = mnn.Conv2d(24, 10, 1, has_bias=True, pad_mode="valid")
        self.dropout = mnn.Dropout(p=0.5)
        self.relu = mnn.ReLU()

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        x = self.relu(self.final_conv(self.dropout(self.features(x))))
        return x.mean((2, 3))


# ---------------------------------------------------------------- ResNeXt: grouped bottlenecks


class TorchBottleneck(tnn.Module):
    def __init__(self, cin: int, width: int, cout: int, stride: int, groups: int) -> None:
        super().__init__()
        self.conv1 = tnn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(width)
        self.conv2 = tnn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = tnn.BatchNorm2d(width)
        self.conv3 = tnn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = tnn.BatchNorm2d(cout)
        self.relu = tnn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = tnn.Sequential(
                tnn.Conv2d(cin, cout, 1, stride, bias=False), tnn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class TorchResNeXt(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = tnn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(16)
        self.relu = tnn.ReLU(inplace=True)
        self.layer1 = tnn.Sequential(TorchBottleneck(16, 16, 32, 1, 4), TorchBottleneck(32, 16, 32, 1, 4))
        self.layer2 = tnn.Sequential(TorchBottleneck(32, 32, 64, 2, 4))
        self.fc = tnn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.relu(self.bn1(self.conv1(x)))))
        return self.fc(x.mean((2, 3)))


class MsBottleneck(mnn.Cell):
    """Defines ``down_sample`` first: its 1x1 convolution has the shape of ``conv3``."""

    def __init__(self, cin: int, width: int, cout: int, stride: int, groups: int, same_pad: bool) -> None:
        super().__init__()
        self.down_sample = None
        if stride != 1 or cin != cout:
            self.down_sample = mnn.SequentialCell(
                [mnn.Conv2d(cin, cout, 1, stride, pad_mode="valid"), mnn.BatchNorm2d(cout, momentum=0.9)]
            )
        self.conv1 = mnn.Conv2d(cin, width, 1, pad_mode="valid")
        self.bn1 = mnn.BatchNorm2d(width, momentum=0.9)
        pad = {"pad_mode": "same"} if same_pad else {"pad_mode": "pad", "padding": 1}
        self.conv2 = mnn.Conv2d(width, width, 3, stride, group=groups, **pad)
        self.bn2 = mnn.BatchNorm2d(width, momentum=0.9)
        self.conv3 = mnn.Conv2d(width, cout, 1, pad_mode="valid")
        self.bn3 = mnn.BatchNorm2d(cout, momentum=0.9)
        self.relu = mnn.ReLU()

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        identity = x if self.down_sample is None else self.down_sample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class MsResNeXt(mnn.Cell):
    """Stages nested in one ``stages`` list; ``same_pad``: the strided grouped convolution pads "same"."""

    def __init__(self, same_pad: bool = False) -> None:
        super().__init__()
        self.stem = mnn.SequentialCell(
            [
                mnn.Conv2d(3, 16, 3, 1, pad_mode="pad", padding=1),
                mnn.BatchNorm2d(16, momentum=0.9),
                mnn.ReLU(),
            ]
        )
        self.stages = mnn.SequentialCell(
            [
                mnn.SequentialCell(
                    [MsBottleneck(16, 16, 32, 1, 4, False), MsBottleneck(32, 16, 32, 1, 4, False)]
                ),
                mnn.SequentialCell([MsBottleneck(32, 32, 64, 2, 4, same_pad)]),
            ]
        )
        self.classifier = mnn.Dense(64, 10)

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.classifier(self.stages(self.stem(x)).mean((2, 3)))


def randomise_batchnorms(net: tnn.Module, seed: int = 0) -> tnn.Module:
    """Give every BatchNorm of a torch network running statistics and an affine transform far from 0 and 1.

    Fresh statistics (mean 0, variance 1) make BatchNorm nearly the identity, so that a port
    applying it before its ReLU instead of after computes the same; real trained weights do not.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, tnn.BatchNorm2d):
                n = module.num_features
                module.running_mean.copy_(torch.randn(n, generator=generator))
                module.running_var.copy_(torch.rand(n, generator=generator) * 2 + 0.5)
                module.weight.copy_(torch.rand(n, generator=generator) * 3 + 0.5)
                module.bias.copy_(torch.randn(n, generator=generator))
    return net.eval()


# network -> (torch class, correct port, port with its difference, torch layer to name, input shape)
PORTS = {
    "resnext": (TorchResNeXt, MsResNeXt, lambda: MsResNeXt(same_pad=True), "layer2.0.conv2", (2, 3, 16, 16)),
    "resnet": (TorchResNet, MsResNet, lambda: MsResNet(eps=1e-3), "bn1", (2, 3, 32, 32)),
    "mobilenet": (
        TorchMobileNet,
        MsMobileNet,
        lambda: MsMobileNet(mnn.ReLU),
        "features.2.conv.1.2",
        (2, 3, 16, 16),
    ),
    "mnasnet": (
        TorchMnasNet,
        MsMnasNet,
        lambda: MsMnasNet(swapped=True),
        "layers.3.1.layers",
        (2, 3, 16, 16),
    ),
    "squeezenet": (
        TorchSqueezeNet,
        MsSqueezeNet,
        lambda: MsSqueezeNet(ceil_mode=False),
        "features.2",
        (2, 3, 34, 34),
    ),
}


def torch_resnet_for_cli() -> tnn.Module:
    """``tscore diff`` calls a function: the torch ResNet, seeded, BatchNorms randomised."""
    torch.manual_seed(0)
    return randomise_batchnorms(TorchResNet())


def ms_resnet_port_eps() -> mnn.Cell:
    """The port of :func:`torch_resnet_for_cli` whose BatchNorms use epsilon 1e-3."""
    return MsResNet(eps=1e-3)
