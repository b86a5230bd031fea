"""A small ResNet in torch and its MindSpore twin, for ``tscore diff`` and the localisation benchmark.

``torch_resnet()`` and ``ms_resnet()`` build the pair; ``ms_resnet("stem_padding")``
plants a migration mistake in the first convolution (MindSpore's default
``pad_mode="same"`` where torch pads by 1 with stride 2), so that every later
layer disagrees::

    tscore diff examples/resnet_twins.py:torch_resnet examples/resnet_twins.py:ms_resnet_mistaken \\
        --input 8,3,32,32
"""

from __future__ import annotations

from typing import Any


def torch_resnet(
    widths: tuple[int, ...] = (16, 32, 64), seed: int = 0, blocks: tuple[int, ...] | None = None
) -> Any:
    """A ResNet of basic blocks (``blocks[i]`` in stage ``i``, one each by default), seeded, in eval mode."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else None
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(y + (self.down(x) if self.down is not None else x))

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, widths[0], 3, 2, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()
            )
            stages, cin = [], widths[0]
            for index, width in enumerate(widths):
                for repeat in range(blocks[index] if blocks else 1):
                    stages.append(Block(cin, width, 1 if index == 0 or repeat else 2))
                    cin = width
            self.stages = nn.Sequential(*stages)
            self.fc = nn.Linear(widths[-1], 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.stages(self.stem(x)).mean(dim=(2, 3)))

    torch.manual_seed(seed)
    net = ResNet()
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
    return net.eval()


def ms_resnet(
    mistake: str | None = None, widths: tuple[int, ...] = (16, 32, 64), blocks: tuple[int, ...] | None = None
) -> Any:
    """The MindSpore twin of :func:`torch_resnet`; ``mistake="stem_padding"`` plants one error."""
    import mindspore as ms
    from mindspore import nn

    def conv(cin: int, cout: int, k: int, stride: int, pad: int) -> Any:
        return nn.Conv2d(cin, cout, k, stride, pad_mode="pad", padding=pad, has_bias=False)

    class Block(nn.Cell):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = conv(cin, cout, 3, stride, 1)
            self.bn1 = nn.BatchNorm2d(cout, momentum=0.9)
            self.relu = nn.ReLU()
            self.conv2 = conv(cout, cout, 3, 1, 1)
            self.bn2 = nn.BatchNorm2d(cout, momentum=0.9)
            self.down = (
                nn.SequentialCell(conv(cin, cout, 1, stride, 0), nn.BatchNorm2d(cout, momentum=0.9))
                if stride != 1 or cin != cout
                else None
            )

        def construct(self, x: ms.Tensor) -> ms.Tensor:
            y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(y + (self.down(x) if self.down is not None else x))

    class ResNet(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            stem_conv = (
                nn.Conv2d(3, widths[0], 3, 2, has_bias=False)  # pad_mode="same": pads 0 before, 1 after
                if mistake == "stem_padding"
                else conv(3, widths[0], 3, 2, 1)
            )
            self.stem = nn.SequentialCell(stem_conv, nn.BatchNorm2d(widths[0], momentum=0.9), nn.ReLU())
            stages, cin = [], widths[0]
            for index, width in enumerate(widths):
                for repeat in range(blocks[index] if blocks else 1):
                    stages.append(Block(cin, width, 1 if index == 0 or repeat else 2))
                    cin = width
            self.stages = nn.SequentialCell(stages)
            self.fc = nn.Dense(widths[-1], 10)

        def construct(self, x: ms.Tensor) -> ms.Tensor:
            return self.fc(self.stages(self.stem(x)).mean(axis=(2, 3)))

    net = ResNet()
    net.set_train(False)
    return net


def ms_resnet_mistaken() -> Any:
    """The twin with the stem's padding left at MindSpore's default."""
    return ms_resnet("stem_padding")
