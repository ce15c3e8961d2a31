"""Layer functions in JAX (NHWC images, HWIO conv kernels, (in, out) dense kernels).

Mixed precision: each weight is cast to the dtype of the activation it meets, so
parameters stay float32 while the arithmetic runs in the compute dtype.
BatchNorm statistics, the LSTM cell state and the loss are reduced in float32, or
in float64 when the compute dtype is float64 (the fp64 precision).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from xfbench.models import layers as L

NHWC = ("NHWC", "HWIO", "NHWC")


def wide(dtype):
    """The dtype statistics and losses are kept in: float32, never narrower, and
    float64 when the network computes in float64."""
    return jnp.float64 if jnp.dtype(dtype) == jnp.float64 else jnp.float32


def conv(x, w, stride: int, pad: int, b=None):
    y = lax.conv_general_dilated(
        x, w.astype(x.dtype), (stride, stride), ((pad, pad), (pad, pad)), dimension_numbers=NHWC
    )
    return y if b is None else y + b.astype(y.dtype)


def dense(x, w, b=None):
    y = jnp.matmul(x, w.astype(x.dtype))
    return y if b is None else y + b.astype(y.dtype)


def batch_norm(x, params, stats, name: str, layer: L.BatchNorm, train: bool, new_stats: dict):
    """Normalise over N, H, W. Training uses the batch's statistics and updates the
    running ones (PyTorch's convention: momentum weights the batch, and the running
    variance is the unbiased one); evaluation uses the running statistics."""
    gamma, beta = params[f"{name}.weight"], params[f"{name}.bias"]
    mean_key, var_key = f"{name}.running_mean", f"{name}.running_var"
    if train:
        x32 = x.astype(wide(x.dtype))
        mean = jnp.mean(x32, axis=(0, 1, 2))
        var = jnp.mean(jnp.square(x32 - mean), axis=(0, 1, 2))  # biased, as the normalisation uses
        n = x.shape[0] * x.shape[1] * x.shape[2]
        m = layer.momentum
        # The running statistics are buffers, not parameters: no gradient flows into them.
        new_stats[mean_key] = (1 - m) * stats[mean_key] + m * lax.stop_gradient(mean)
        unbiased = lax.stop_gradient(var) * (n / max(n - 1, 1))
        new_stats[var_key] = (1 - m) * stats[var_key] + m * unbiased
    else:
        mean, var = stats[mean_key], stats[var_key]
        new_stats[mean_key], new_stats[var_key] = mean, var
    scale = gamma * lax.rsqrt(var + layer.eps)
    # Centre first: folding the mean into one shift (x * scale + shift) makes the
    # backward pass subtract large sums (sum(g * x) - mean * sum(g)) and loses
    # digits in float32 wherever a channel's mean is large next to its spread.
    return (x - mean.astype(x.dtype)) * scale.astype(x.dtype) + beta.astype(x.dtype)


def max_pool(x, k: int, s: int, p: int = 0):
    pad = ((0, 0), (p, p), (p, p), (0, 0))
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, k, k, 1), (1, s, s, 1), pad)


def avg_pool(x, k: int, s: int):
    summed = lax.reduce_window(x, 0.0, lax.add, (1, k, k, 1), (1, s, s, 1), "VALID")
    return summed / (k * k)


# -- initial values ----------------------------------------------------------------
def uniform(key, shape, fan_in: int):
    bound = 1.0 / math.sqrt(fan_in)
    return jax.random.uniform(key, shape, jnp.float32, -bound, bound)


def conv_init(key, cin: int, cout: int, k: int, bias: bool, name: str) -> dict:
    kw, kb = jax.random.split(key)
    out = {f"{name}.weight": uniform(kw, (k, k, cin, cout), cin * k * k)}
    if bias:
        out[f"{name}.bias"] = uniform(kb, (cout,), cin * k * k)
    return out


def bn_init(channels: int, name: str) -> tuple[dict, dict]:
    params = {f"{name}.weight": jnp.ones((channels,)), f"{name}.bias": jnp.zeros((channels,))}
    stats = {
        f"{name}.running_mean": jnp.zeros((channels,)),
        f"{name}.running_var": jnp.ones((channels,)),
    }
    return params, stats


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy over every sample (and every time step), in float32
    (float64 for float64 logits)."""
    logp = jax.nn.log_softmax(logits.astype(wide(logits.dtype)), axis=-1)
    picked = jnp.take_along_axis(logp, labels[..., None], axis=-1)
    return -jnp.mean(picked)
