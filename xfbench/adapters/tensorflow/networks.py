"""The nine networks as tf.Modules, built layer by layer from the spec.

Each spec layer becomes one module, so the network is exactly the one docs/models.md
describes; ResNet blocks are in resnet.py, the LSTM language model in lstm.py
and the primitives in layers.py. Images are NHWC ("channels_last") or NCHW
("channels_first"), chosen per device by the workload.
"""

from __future__ import annotations

from math import prod

import numpy as np
import tensorflow as tf

from xfbench.adapters.tensorflow import layers as T
from xfbench.adapters.tensorflow.lstm import LSTMLanguageModel
from xfbench.adapters.tensorflow.resnet import BasicBlock, Bottleneck
from xfbench.adapters.tensorflow.transformer import Transformer
from xfbench.adapters.tensorflow.weights import DENSE, Converter
from xfbench.models import Spec
from xfbench.models import layers as L

FORMATS = {"channels_last": "NHWC", "channels_first": "NCHW", "n/a": "NHWC"}


def _module(layer: L.Layer, x, fmt: str, variables: T.Variables, flattened) -> tf.Module:
    if isinstance(layer, L.Dense):
        # After a channels-last flatten the rows come in (H, W, C) order.
        conv = Converter("flat_dense", flattened) if flattened else DENSE
        return T.Dense(layer, x, variables, conv)
    if isinstance(layer, L.Conv):
        return T.Conv(layer, x, fmt, variables)
    if isinstance(layer, L.BatchNorm):
        return T.BatchNorm(layer, x, fmt, variables)
    if isinstance(layer, L.ReLU):
        return T.Activation(tf.nn.relu)
    if isinstance(layer, L.Sigmoid):
        return T.Activation(tf.sigmoid)
    if isinstance(layer, L.MaxPool):
        return T.MaxPool(layer, fmt)
    if isinstance(layer, L.AvgPool):
        return T.AvgPool(layer, fmt)
    if isinstance(layer, L.GlobalAvgPool):
        return T.GlobalAvgPool(fmt)
    if isinstance(layer, L.Flatten):
        return T.Flatten()
    if isinstance(layer, L.Bottleneck):
        return Bottleneck(layer, x, fmt, variables)
    if isinstance(layer, L.BasicBlock):
        return BasicBlock(layer, x, fmt, variables)
    raise TypeError(f"no TensorFlow module for {type(layer).__name__}")


class SpecNet(tf.Module):
    """A feed-forward network: one module per spec layer, applied in order."""

    def __init__(self, spec: Spec, layout: str, variables: T.Variables, compute_dtype=tf.float32):
        super().__init__()
        fmt = FORMATS[layout]
        self.compute_dtype = compute_dtype
        self.layers = []
        flattened = None
        for layer, x in spec.shapes:
            self.layers.append(
                _module(layer=layer, x=x, fmt=fmt, variables=variables, flattened=flattened)
            )
            flattened = (
                x if isinstance(layer, L.Flatten) and len(x) == 3 and fmt == "NHWC" else None
            )

    def __call__(self, x, training=False):
        x = tf.cast(x, self.compute_dtype)
        for layer in self.layers:
            x = layer(x, training)
        return x


class Network:
    """A built network: the module, its trainable variables (in a fixed order) and
    the canonical names they hold."""

    def __init__(
        self, spec: Spec, layout: str, weights, use_cudnn: bool = False, compute_dtype=tf.float32
    ):
        self.spec, self.layout = spec, layout
        # Master weights are float32, except in float64, where everything is.
        self.dtype = np.float64 if compute_dtype == tf.float64 else np.float32
        self.variables = T.Variables(weights, self.dtype)
        if spec.transformer:
            self.module = Transformer(spec, self.variables, compute_dtype)
            extra = []
        elif spec.time_major:
            self.module = LSTMLanguageModel(spec, self.variables, use_cudnn, compute_dtype)
            extra = self.module.keras_variables()
        else:
            self.module = SpecNet(spec, layout, self.variables, compute_dtype)
            extra = []
        self.trainable = [e.variable for e in self.variables.entries] + [v for v, _ in extra]
        # How many canonical tensors each variable stands for: 2 for a Keras LSTM bias
        # (the sum of the input and recurrent biases), 1 otherwise.
        self.copies = [1] * len(self.variables.entries) + [n for _, n in extra]

    def __call__(self, x, training=False):
        return self.module(x, training)

    def weights(self):
        """Canonical weights from the current variables (float32, or float64 for fp64; host)."""
        out = {
            e.name: e.converter.from_tf(e.variable.numpy(), self.dtype)
            for e in self.variables.entries
        }
        if self.spec.time_major:
            out.update(self.module.export())
        return {p.name: out[p.name] for p in self.spec.params}

    def native_param_count(self) -> int:
        return sum(prod(v.shape) for v in self.trainable)


def count_parameters(spec: Spec, layout: str = "channels_last") -> int:
    """TensorFlow's own parameter count of a full-size network, from variable shapes
    (no weights allocated, except the LSTM layers' own, which Keras allocates)."""
    return Network(spec, layout, None).native_param_count()
