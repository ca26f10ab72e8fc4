"""The residual models of the PyTorch example trainer, for 1x28x28 Fashion-MNIST images.

- resnet18: ResNet-18 (He et al., "Deep Residual Learning for Image Recognition",
  CVPR 2016, arXiv:1512.03385) with its stem adapted to small grey images: a 3x3 stride-1
  convolution on one input channel instead of 7x7 stride 2 on three, the 3x3 stride-2 max pool
  kept (`ResNet18(small_input=False)` is the ImageNet-shaped original, with torchvision's module
  names), so the four stages see 14x14, 7x7, 4x4 and 2x2 maps. The width multiplier scales every
  stage's channels (64, 128, 256, 512 at width 1).
- resnet20: the CIFAR-style ResNet-20 of the same paper (§4.2): a 3x3 stem and three stages of
  three basic blocks with 16, 32, 64 channels times the width multiplier. Where a block changes
  shape, its shortcut is a 1x1 stride-2 convolution with batch norm (the paper's option B), so
  that every shortcut is a GEMM the precision assignment sees.

- mlp: a multilayer perceptron (784 -> 256 -> 256 -> 256 -> 10, ReLU; the width multiplier
  scales the hidden layers), small enough for many-seed studies of training recipes on two cores.

All are plain nn.Modules that torch.fx traces (no data-dependent control flow).
"""

from __future__ import annotations

import torch
from torch import nn


def _channels(base: int, width: float) -> int:
    if not width > 0:
        raise ValueError(f"width must be positive, not {width}")
    return max(1, round(base * width))


class ResNet18Block(nn.Module):
    """ResNet-18's basic block, with torchvision's module names (conv1, bn1, relu, conv2, bn2,
    downsample) so that sites and groups read as they do on torchvision's model. One ReLU module
    is applied twice, as there."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)  # after the main path, as torchvision orders it
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18 (the paper's Table 1): a stem, four stages of two basic blocks, global average
    pooling and a linear classifier, with torchvision's attribute names and initialisation
    (Kaiming-normal fan-out convolutions, unit batch-norm scales), so no torchvision is needed.
    `small_input` swaps the 7x7 stride-2 stem for the 3x3 stride-1 one used on 28x28 images."""

    def __init__(self, num_classes: int = 10, in_channels: int = 3, width: float = 1.0, small_input: bool = False):
        super().__init__()
        widths = [_channels(c, width) for c in (64, 128, 256, 512)]
        if small_input:
            self.conv1 = nn.Conv2d(in_channels, widths[0], kernel_size=3, stride=1, padding=1, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        stages, channels = [], widths[0]
        for i, c in enumerate(widths):
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(ResNet18Block(channels, c, stride), ResNet18Block(c, c, 1)))
            channels = c
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(num_classes: int = 10, width: float = 1.0) -> nn.Module:
    """ResNet-18 for 1x28x28 inputs (stem adapted as the module comment says)."""
    return ResNet18(num_classes, in_channels=1, width=width, small_input=True)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a shortcut, added before the last ReLU."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(out_channels))
        self.relu2 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + self.shortcut(x))


class ResNet20(nn.Module):
    def __init__(self, num_classes: int = 10, width: float = 1.0):
        super().__init__()
        c1, c2, c3 = _channels(16, width), _channels(32, width), _channels(64, width)
        self.conv = nn.Conv2d(1, c1, 3, stride=1, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c1)
        self.relu = nn.ReLU()
        self.stage1 = nn.Sequential(*[BasicBlock(c1, c1, 1) for _ in range(3)])
        self.stage2 = nn.Sequential(BasicBlock(c1, c2, 2), BasicBlock(c2, c2, 1), BasicBlock(c2, c2, 1))
        self.stage3 = nn.Sequential(BasicBlock(c2, c3, 2), BasicBlock(c3, c3, 1), BasicBlock(c3, c3, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(c3, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn(self.conv(x)))
        x = self.stage3(self.stage2(self.stage1(x)))
        return self.fc(self.flatten(self.pool(x)))


def resnet20(num_classes: int = 10, width: float = 1.0) -> nn.Module:
    return ResNet20(num_classes, width)


def mlp(num_classes: int = 10, width: float = 1.0) -> nn.Module:
    hidden = _channels(256, width)
    return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


MODELS = {"resnet18": resnet18, "resnet20": resnet20, "mlp": mlp}


def build(name: str, width: float = 1.0, num_classes: int = 10) -> nn.Module:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    return MODELS[name](num_classes=num_classes, width=width)
