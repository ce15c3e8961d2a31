"""The building blocks of the TensorFlow networks: tf.Modules over tf.nn ops.

Why not keras.layers for these: Keras 3's BatchNormalization is computed from
tf.nn.moments (not the fused kernel) and updates its moving variance with the
biased batch variance, where PyTorch (and TensorFlow's own fused kernel) use
the unbiased one. So batch norm is FusedBatchNormV3 (cuDNN on GPUs, oneDNN on
CPUs, batch-norm HLOs under XLA) with exponential_avg_factor = PyTorch's
momentum, and the rest are the tf.nn ops Keras would call. Padding is always
the spec's symmetric padding: "SAME" only where it is the same thing (it pads
asymmetrically at stride 2, which gives AlexNet a 7x7 last map).

Every layer takes (x, training). Variables are fp32 (the master weights), or fp64
for the fp64 precision; a layer computes in its input's dtype, so mixed precision
is one cast of the input at the network's entry. FusedBatchNormV3 has no float64
kernel, so in float64 batch norm is written out from tf.nn.moments (the same formula).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import tensorflow as tf

from xfbench.adapters.tensorflow.weights import CONV, DENSE, SAME, Converter
from xfbench.models import layers as L


class ShapeOnly:
    """Stands in for a variable when only shapes are wanted (parameter counts of
    full-size networks without allocating them)."""

    def __init__(self, shape):
        self.shape = tuple(shape)


@dataclass
class Entry:
    """One canonical parameter held by one TensorFlow variable."""

    name: str
    variable: Any
    converter: Converter


class Variables:
    """Makes a network's variables from canonical weights (converted to TF layouts),
    or shape-only stand-ins when weights is None. Keeps the canonical mapping, which
    is what Workload.weights() exports."""

    def __init__(self, weights: dict[str, np.ndarray] | None, dtype=np.float32):
        self.weights = weights
        self.dtype = np.dtype(dtype)  # of the variables: float32, or float64 for fp64
        self.entries: list[Entry] = []

    @property
    def shape_only(self) -> bool:
        return self.weights is None

    def param(self, p: L.Param, converter: Converter = SAME):
        shape = converter.tf_shape(p.shape)
        if self.shape_only:
            v = ShapeOnly(shape)
        else:
            if p.name not in self.weights:
                raise ValueError(f"no canonical weight for {p.name}")
            value = converter.to_tf(self.weights[p.name], self.dtype)
            if value.shape != shape:
                raise ValueError(
                    f"{p.name}: canonical {self.weights[p.name].shape} gives "
                    f"{value.shape}, expected {shape}"
                )
            v = tf.Variable(value, name=p.name)
        self.entries.append(Entry(p.name, v, converter))
        return v

    def buffer(self, name: str, fill: float, shape):
        """A non-trainable state variable (batch-norm running statistics)."""
        if self.shape_only:
            return ShapeOnly(shape)
        return tf.Variable(
            tf.fill(shape, tf.constant(fill, self.dtype)), trainable=False, name=name
        )


def _spatial(fmt: str, values) -> list:
    """A 4-vector with values on H and W, for strides, windows and paddings."""
    a, b = values
    return [1, a, b, 1] if fmt == "NHWC" else [1, 1, a, b]


def same_is_symmetric(size: int, kernel: int, stride: int, pad: int) -> bool:
    """Whether TensorFlow's "SAME" padding places every window where symmetric padding
    by pad does (it pads (total // 2) before, the rest after, and keeps ceil(size / stride))."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2 == pad and out == (size + 2 * pad - kernel) // stride + 1


class Conv(tf.Module):
    """2-D convolution with the spec's symmetric padding, done the fastest exact way:
    "SAME" where it pads the same (stride-1 convolutions), otherwise tf.pad then
    "VALID". (tf.nn.conv2d's explicit-padding argument is exact too, but oneDNN does
    not take it: on the CPU it runs 2-3x slower.)"""

    def __init__(self, layer: L.Conv, x, fmt: str, variables: Variables):
        super().__init__()
        ps = layer.params(x)
        self.kernel = variables.param(ps[0], CONV)
        self.bias = variables.param(ps[1]) if layer.bias else None
        self.fmt = fmt
        self.strides = _spatial(fmt, (layer.stride, layer.stride))
        p = layer.pad
        self.pad = None
        if p == 0:
            self.padding = "VALID"
        elif all(same_is_symmetric(n, layer.kernel, layer.stride, p) for n in x[1:]):
            self.padding = "SAME"
        else:
            self.padding = "VALID"
            self.pad = (
                [[0, 0], [p, p], [p, p], [0, 0]]
                if fmt == "NHWC"
                else [[0, 0], [0, 0], [p, p], [p, p]]
            )

    def __call__(self, x, training=False):
        if self.pad is not None:
            x = tf.pad(x, self.pad)
        y = tf.nn.conv2d(
            x, tf.cast(self.kernel, x.dtype), self.strides, self.padding, data_format=self.fmt
        )
        if self.bias is not None:
            y = tf.nn.bias_add(y, tf.cast(self.bias, x.dtype), data_format=self.fmt)
        return y


class BatchNorm(tf.Module):
    """Fused batch norm: batch statistics in training (running statistics updated
    with the unbiased batch variance, as PyTorch does), running ones in evaluation."""

    def __init__(self, layer: L.BatchNorm, x, fmt: str, variables: Variables):
        super().__init__()
        gamma, beta = layer.params(x)
        self.gamma = variables.param(gamma)
        self.beta = variables.param(beta)
        self.mean = variables.buffer(f"{layer.name}.running_mean", 0.0, (x[0],))
        self.var = variables.buffer(f"{layer.name}.running_var", 1.0, (x[0],))
        self.eps, self.factor, self.fmt = layer.eps, layer.momentum, fmt

    def __call__(self, x, training=False):
        if x.dtype == tf.float64:
            return self._float64(x, training)
        y, mean, var = tf.compat.v1.nn.fused_batch_norm(
            x,
            self.gamma,
            self.beta,
            mean=self.mean,
            variance=self.var,
            epsilon=self.eps,
            data_format=self.fmt,
            is_training=training,
            exponential_avg_factor=self.factor if training else 1.0,
        )
        if training:
            self.mean.assign(mean)
            self.var.assign(var)
        return y

    def _float64(self, x, training):
        """The fused kernel's function, op by op: normalised with the biased batch
        variance, the running variance updated with the unbiased one."""
        axes = [0, 1, 2] if self.fmt == "NHWC" else [0, 2, 3]
        if training:
            mean, var = tf.nn.moments(x, axes)
            n = tf.cast(tf.size(x) // tf.size(mean), x.dtype)
            m = self.factor
            self.mean.assign((1 - m) * self.mean + m * tf.stop_gradient(mean))
            unbiased = tf.stop_gradient(var) * n / tf.maximum(n - 1, 1)
            self.var.assign((1 - m) * self.var + m * unbiased)
        else:
            mean, var = self.mean, self.var
        shape = [1, 1, 1, -1] if self.fmt == "NHWC" else [1, -1, 1, 1]
        scale = tf.reshape(self.gamma * tf.math.rsqrt(var + self.eps), shape)
        return (x - tf.reshape(mean, shape)) * scale + tf.reshape(self.beta, shape)


class Dense(tf.Module):
    """x @ kernel + bias on the last axis (every time step of a sequence)."""

    def __init__(self, layer: L.Dense, x, variables: Variables, converter: Converter = DENSE):
        super().__init__()
        ps = layer.params(x)
        self.kernel = variables.param(ps[0], converter)
        self.bias = variables.param(ps[1]) if layer.bias else None

    def __call__(self, x, training=False):
        k = tf.cast(self.kernel, x.dtype)
        if x.shape.rank == 2:
            y = tf.matmul(x, k)
        else:
            y = tf.reshape(
                tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), k),
                tf.concat([tf.shape(x)[:-1], [k.shape[-1]]], 0),
            )
        if self.bias is not None:
            y = tf.nn.bias_add(y, tf.cast(self.bias, x.dtype))
        return y


class Embedding(tf.Module):
    def __init__(self, layer: L.Embedding, x, variables: Variables):
        super().__init__()
        self.table = variables.param(layer.params(x)[0])

    def __call__(self, ids, training=False):
        return tf.gather(self.table, ids)


class MaxPool(tf.Module):
    def __init__(self, layer: L.MaxPool, fmt: str):
        super().__init__()
        self.fmt = fmt
        self.window = _spatial(fmt, (layer.kernel, layer.kernel))
        self.strides = _spatial(fmt, (layer.stride, layer.stride))
        p = layer.pad
        self.pad = (
            None
            if p == 0
            else [[0, 0], [p, p], [p, p], [0, 0]]
            if fmt == "NHWC"
            else [[0, 0], [0, 0], [p, p], [p, p]]
        )

    def __call__(self, x, training=False):
        if self.pad is not None:
            # Padding never wins a max, as in PyTorch: pad with the lowest value.
            x = tf.pad(x, self.pad, constant_values=x.dtype.min)
        return tf.nn.max_pool2d(x, self.window, self.strides, "VALID", data_format=self.fmt)


class AvgPool(tf.Module):
    def __init__(self, layer: L.AvgPool, fmt: str):
        super().__init__()
        self.fmt = fmt
        self.window = _spatial(fmt, (layer.kernel, layer.kernel))
        self.strides = _spatial(fmt, (layer.stride, layer.stride))

    def __call__(self, x, training=False):
        return tf.nn.avg_pool2d(x, self.window, self.strides, "VALID", data_format=self.fmt)


class Activation(tf.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __call__(self, x, training=False):
        return self.fn(x)


class GlobalAvgPool(tf.Module):
    def __init__(self, fmt: str):
        super().__init__()
        self.axes = [1, 2] if fmt == "NHWC" else [2, 3]

    def __call__(self, x, training=False):
        return tf.reduce_mean(x, axis=self.axes)


class Flatten(tf.Module):
    """Flattens in memory order: (H, W, C) for NHWC. The next dense layer's rows
    are permuted on import to match the spec's (C, H, W) order (weights.py)."""

    def __call__(self, x, training=False):
        return tf.reshape(x, [tf.shape(x)[0], prod(x.shape[1:])])
