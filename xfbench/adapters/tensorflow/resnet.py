"""ResNet blocks in TensorFlow: the ImageNet bottleneck (v1.5) and the CIFAR basic block."""

from __future__ import annotations

import tensorflow as tf

from xfbench.adapters.tensorflow.layers import BatchNorm, Conv, Variables
from xfbench.models import layers as L


def _conv_bn(parts, fmt: str, variables: Variables):
    """[(Conv, BatchNorm), ...] from a block's (layer, input shape) parts, in order."""
    mods = []
    for layer, x in parts:
        if isinstance(layer, L.Conv):
            mods.append(Conv(layer, x, fmt, variables))
        else:
            mods.append(BatchNorm(layer, x, fmt, variables))
    return list(zip(mods[0::2], mods[1::2]))


class Bottleneck(tf.Module):
    """1x1 -> 3x3 (carries the stride, v1.5) -> 1x1 x expansion, BN after each;
    projection shortcut (1x1 conv + BN) when the shape changes."""

    def __init__(self, layer: L.Bottleneck, x, fmt: str, variables: Variables):
        super().__init__()
        pairs = _conv_bn(layer.parts(x), fmt, variables)
        self.main = pairs[:3]
        self.shortcut = pairs[3] if layer.projected(x) else None

    def __call__(self, x, training=False):
        identity = x
        if self.shortcut is not None:
            conv, bn = self.shortcut
            identity = bn(conv(x), training)
        out = x
        for i, (conv, bn) in enumerate(self.main):
            out = bn(conv(out), training)
            if i < 2:
                out = tf.nn.relu(out)
        return tf.nn.relu(out + identity)


class BasicBlock(tf.Module):
    """conv3x3-BN-ReLU-conv3x3-BN + shortcut, ReLU. A shape-changing shortcut is
    "option A": every second pixel, new channels zero-padded evenly on both sides."""

    def __init__(self, layer: L.BasicBlock, x, fmt: str, variables: Variables):
        super().__init__()
        (self.conv1, self.bn1), (self.conv2, self.bn2) = _conv_bn(layer.parts(x), fmt, variables)
        self.stride, self.fmt = layer.stride, fmt
        extra = layer.filters - x[0]
        self.pad = (extra // 2, extra - extra // 2)

    def _shortcut(self, x):
        if self.stride == 1 and self.pad == (0, 0):
            return x
        s, (before, after) = self.stride, self.pad
        if self.fmt == "NHWC":
            x = x[:, ::s, ::s, :]
            return tf.pad(x, [[0, 0], [0, 0], [0, 0], [before, after]])
        x = x[:, :, ::s, ::s]
        return tf.pad(x, [[0, 0], [before, after], [0, 0], [0, 0]])

    def __call__(self, x, training=False):
        out = tf.nn.relu(self.bn1(self.conv1(x), training))
        out = self.bn2(self.conv2(out), training)
        return tf.nn.relu(out + self._shortcut(x))
