"""ResNet blocks in PyTorch: the ImageNet bottleneck (v1.5) and the CIFAR basic block."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (carries the stride, v1.5) -> 1x1 x expansion; projection shortcut
    (1x1 conv + BN) when the shape changes. Names match the canonical parameters."""

    def __init__(self, cin: int, width: int, stride: int, expansion: int, projected: bool):
        super().__init__()
        cout = width * expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if projected:
            self.downsample = nn.Sequential()
            self.downsample.add_module("conv", nn.Conv2d(cin, cout, 1, stride, bias=False))
            self.downsample.add_module("bn", nn.BatchNorm2d(cout))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN + shortcut, ReLU. A shape-changing shortcut is
    "option A": every second pixel, new channels zero-padded evenly on both sides."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.stride = stride
        extra = cout - cin
        self.pad = (extra // 2, extra - extra // 2)
        self.relu = nn.ReLU(inplace=True)  # a module, so the float64 reference can hook it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        if self.stride != 1 or self.pad != (0, 0):
            identity = x[:, :, :: self.stride, :: self.stride]
            identity = F.pad(identity, (0, 0, 0, 0) + self.pad)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)
