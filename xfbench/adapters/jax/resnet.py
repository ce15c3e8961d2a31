"""ResNet blocks in JAX (NHWC): the ImageNet bottleneck (v1.5) and the CIFAR basic block.

Parameter names are the canonical ones ("<block>.conv1.weight", "<block>.bn1.weight", ...).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xfbench.adapters.jax.layers import batch_norm, bn_init, conv, conv_init
from xfbench.models import layers as L


def basic_block(layer: L.BasicBlock, params, stats, x, train: bool, new_stats: dict):
    """conv3x3-BN-ReLU-conv3x3-BN + shortcut, ReLU. A shape-changing shortcut is
    "option A": every second pixel, new channels zero-padded evenly on both sides
    (the extra one after, when the count is odd), no weights."""
    n = layer.name
    out = conv(x, params[f"{n}.conv1.weight"], layer.stride, 1)
    out = jax.nn.relu(
        batch_norm(
            x=out,
            params=params,
            stats=stats,
            name=f"{n}.bn1",
            layer=L.BatchNorm(f"{n}.bn1"),
            train=train,
            new_stats=new_stats,
        )
    )
    out = conv(out, params[f"{n}.conv2.weight"], 1, 1)
    out = batch_norm(
        x=out,
        params=params,
        stats=stats,
        name=f"{n}.bn2",
        layer=L.BatchNorm(f"{n}.bn2"),
        train=train,
        new_stats=new_stats,
    )
    identity = x
    extra = layer.filters - x.shape[-1]
    if layer.stride != 1 or extra:
        identity = x[:, :: layer.stride, :: layer.stride, :]
        identity = jnp.pad(identity, ((0, 0), (0, 0), (0, 0), (extra // 2, extra - extra // 2)))
    return jax.nn.relu(out + identity)


def bottleneck(layer: L.Bottleneck, params, stats, x, train: bool, new_stats: dict):
    """1x1 -> 3x3 (carries the stride, v1.5) -> 1x1 x expansion, BN after each;
    projection shortcut (1x1 conv with the stride + BN) when the shape changes."""
    n = layer.name

    def bn(y, name):
        return batch_norm(
            x=y,
            params=params,
            stats=stats,
            name=name,
            layer=L.BatchNorm(name),
            train=train,
            new_stats=new_stats,
        )

    out = jax.nn.relu(bn(conv(x, params[f"{n}.conv1.weight"], 1, 0), f"{n}.bn1"))
    out = jax.nn.relu(bn(conv(out, params[f"{n}.conv2.weight"], layer.stride, 1), f"{n}.bn2"))
    out = bn(conv(out, params[f"{n}.conv3.weight"], 1, 0), f"{n}.bn3")
    identity = x
    if f"{n}.downsample.conv.weight" in params:
        identity = bn(
            conv(x, params[f"{n}.downsample.conv.weight"], layer.stride, 0), f"{n}.downsample.bn"
        )
    return jax.nn.relu(out + identity)


def basic_block_init(layer: L.BasicBlock, x: tuple[int, ...], key) -> tuple[dict, dict]:
    n, f = layer.name, layer.filters
    k1, k2 = jax.random.split(key)
    params, stats = {}, {}
    params.update(conv_init(key=k1, cin=x[0], cout=f, k=3, bias=False, name=f"{n}.conv1"))
    params.update(conv_init(key=k2, cin=f, cout=f, k=3, bias=False, name=f"{n}.conv2"))
    for bn in ("bn1", "bn2"):
        p, s = bn_init(f, f"{n}.{bn}")
        params.update(p)
        stats.update(s)
    return params, stats


def bottleneck_init(layer: L.Bottleneck, x: tuple[int, ...], key) -> tuple[dict, dict]:
    n, w = layer.name, layer.width
    cout = w * layer.expansion
    k1, k2, k3, k4 = jax.random.split(key, 4)
    params = {
        **conv_init(key=k1, cin=x[0], cout=w, k=1, bias=False, name=f"{n}.conv1"),
        **conv_init(key=k2, cin=w, cout=w, k=3, bias=False, name=f"{n}.conv2"),
        **conv_init(key=k3, cin=w, cout=cout, k=1, bias=False, name=f"{n}.conv3"),
    }
    norms = [(f"{n}.bn1", w), (f"{n}.bn2", w), (f"{n}.bn3", cout)]
    if layer.projected(x):
        params.update(
            conv_init(key=k4, cin=x[0], cout=cout, k=1, bias=False, name=f"{n}.downsample.conv")
        )
        norms.append((f"{n}.downsample.bn", cout))
    stats = {}
    for name, c in norms:
        p, s = bn_init(c, name)
        params.update(p)
        stats.update(s)
    return params, stats
