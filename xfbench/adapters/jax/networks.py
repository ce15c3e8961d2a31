"""The nine networks as pure JAX functions of a flat parameter dict, built from the spec.

Parameters are a plain dict keyed by the canonical names (models/layers.py), in
JAX's layouts: conv kernels HWIO, dense kernels (in, out). BatchNorm running
statistics are a second dict ("<bn>.running_mean", "<bn>.running_var"). Images
are NHWC, the layout XLA's convolutions prefer on CPU and GPU; the batch is
transposed once, when it is made resident.

Mixed precision: the input is cast once to the compute dtype and the layers
(layers.py) cast each weight to the dtype of the activation it meets, so the
parameters themselves stay float32; logits come back as float32. In float64 (the fp64
precision, under jax.enable_x64) parameters, activations and logits are all float64.

Layer functions are in layers.py, ResNet blocks in resnet.py and the LSTM
language model in lstm.py.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from xfbench.adapters.jax import lstm, resnet, transformer
from xfbench.adapters.jax.layers import (
    avg_pool,
    batch_norm,
    bn_init,
    conv,
    conv_init,
    dense,
    max_pool,
    uniform,
    wide,
)
from xfbench.models import Spec
from xfbench.models import layers as L


def apply_layer(layer: L.Layer, params, stats, x, train: bool, new_stats: dict):
    if isinstance(layer, L.Dense):
        return dense(x, params[f"{layer.name}.weight"], params.get(f"{layer.name}.bias"))
    if isinstance(layer, L.Conv):
        return conv(
            x=x,
            w=params[f"{layer.name}.weight"],
            stride=layer.stride,
            pad=layer.pad,
            b=params.get(f"{layer.name}.bias"),
        )
    if isinstance(layer, L.BatchNorm):
        return batch_norm(
            x=x,
            params=params,
            stats=stats,
            name=layer.name,
            layer=layer,
            train=train,
            new_stats=new_stats,
        )
    if isinstance(layer, L.ReLU):
        return jax.nn.relu(x)
    if isinstance(layer, L.Sigmoid):
        return jax.nn.sigmoid(x)
    if isinstance(layer, L.MaxPool):
        return max_pool(x, layer.kernel, layer.stride, layer.pad)
    if isinstance(layer, L.AvgPool):
        return avg_pool(x, layer.kernel, layer.stride)
    if isinstance(layer, L.GlobalAvgPool):
        return jnp.mean(x, axis=(1, 2))
    if isinstance(layer, L.Flatten):
        # H, W, C order; the next dense kernel's rows are permuted to match on load
        # (weights.py), so the function is the spec's channels-first flatten.
        return x.reshape(x.shape[0], -1)
    if isinstance(layer, L.BasicBlock):
        return resnet.basic_block(
            layer=layer, params=params, stats=stats, x=x, train=train, new_stats=new_stats
        )
    if isinstance(layer, L.Bottleneck):
        return resnet.bottleneck(
            layer=layer, params=params, stats=stats, x=x, train=train, new_stats=new_stats
        )
    raise TypeError(f"no JAX function for {type(layer).__name__}")


# -- initial parameters (shapes from the layers' hyperparameters) ------------------------
def init_layer(layer: L.Layer, x: tuple[int, ...], key) -> tuple[dict, dict]:
    """(params, running stats) of one layer whose per-sample input shape (channels-first) is x."""
    if isinstance(layer, L.Dense):
        kw, kb = jax.random.split(key)
        fan_in = x[-1]
        params = {f"{layer.name}.weight": uniform(kw, (fan_in, layer.units), fan_in)}
        if layer.bias:
            params[f"{layer.name}.bias"] = uniform(kb, (layer.units,), fan_in)
        return params, {}
    if isinstance(layer, L.Conv):
        return conv_init(
            key=key, cin=x[0], cout=layer.filters, k=layer.kernel, bias=layer.bias, name=layer.name
        ), {}
    if isinstance(layer, L.BatchNorm):
        return bn_init(x[0], layer.name)
    if isinstance(layer, L.BasicBlock):
        return resnet.basic_block_init(layer, x, key)
    if isinstance(layer, L.Bottleneck):
        return resnet.bottleneck_init(layer, x, key)
    return {}, {}


# -- the network --------------------------------------------------------------------
def init(spec: Spec, key) -> tuple[dict, dict]:
    """Initial (params, running stats). Under jax.eval_shape it allocates nothing."""
    if spec.transformer:
        return transformer.init(spec), {}
    if spec.time_major:
        return lstm.init(spec, key), {}
    params, stats = {}, {}
    for i, (layer, x) in enumerate(spec.shapes):
        p, s = init_layer(layer, x, jax.random.fold_in(key, i))
        params.update(p)
        stats.update(s)
    return params, stats


def apply(
    spec: Spec, params: dict, stats: dict, x, train: bool, dtype, attention: str | None = "xla"
) -> tuple:
    """Logits (float32, float64 for float64) and the running statistics after this batch.

    x is NHWC images, (N, features) vectors, (T, N) token ids (time-major: the LSTM) or
    (N, T) token ids (the transformers, whose attention is computed by `attention`:
    jax.nn.dot_product_attention's implementation)."""
    if spec.transformer:
        return transformer.apply(spec, params, x, dtype=dtype, implementation=attention), {}
    if spec.time_major:
        return lstm.apply(spec, params, x, dtype).astype(wide(dtype)), {}
    x = x.astype(dtype)
    new_stats: dict = {}
    for layer, _ in spec.shapes:
        x = apply_layer(
            layer=layer, params=params, stats=stats, x=x, train=train, new_stats=new_stats
        )
    return x.astype(wide(dtype)), new_stats


def count_parameters(spec: Spec) -> int:
    """Full-size parameter count from shapes only (jax.eval_shape allocates nothing)."""
    params, _ = jax.eval_shape(lambda: init(spec, jax.random.key(0)))
    return sum(math.prod(p.shape) for p in params.values())


def image_layout(spec: Spec) -> bool:
    """Whether the network takes images (NHWC inside, NCHW in the spec)."""
    return len(spec.input_shape) == 3
