"""The PTB word model in JAX: embedding -> stacked LSTM as a lax.scan over time -> dense
at every step.

Time-major, (T, N): the scan runs over the leading axis with no transposes, and the
token ids are transposed once, when the batch is made resident. Each layer's input
projection for all time steps is one large matmul outside the scan; only the
recurrent matmul h @ R stays inside it.

Weights keep the canonical gate order i, o, f, c (ONNX's) and both bias vectors,
W as (in, 4H), R as (H, 4H), B as the canonical (8H,) = [input bias, recurrent bias];
both biases are added, so each gets its own gradient and update as in PyTorch and cuDNN.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from xfbench.adapters.jax.layers import wide
from xfbench.models import Spec
from xfbench.models import layers as L


def _layers(spec: Spec) -> tuple[L.Embedding, L.LSTM, L.Dense]:
    embed, rnn, fc = spec.layers
    assert isinstance(embed, L.Embedding) and isinstance(rnn, L.LSTM) and isinstance(fc, L.Dense)
    return embed, rnn, fc


def init(spec: Spec, key) -> dict:
    embed, rnn, fc = _layers(spec)
    h = rnn.hidden
    keys = iter(jax.random.split(key, 3 + 3 * rnn.layers))
    bound = 1.0 / math.sqrt(h)

    def uniform(shape, fan_bound):
        return jax.random.uniform(next(keys), shape, jnp.float32, -fan_bound, fan_bound)

    params = {f"{embed.name}.weight": jax.random.normal(next(keys), (embed.vocab, embed.dim))}
    fin = embed.dim
    for i in range(rnn.layers):
        n = f"{rnn.name}.l{i}"
        params[f"{n}.W"] = uniform((fin, 4 * h), bound)
        params[f"{n}.R"] = uniform((h, 4 * h), bound)
        params[f"{n}.B"] = uniform((8 * h,), bound)
        fin = h
    params[f"{fc.name}.weight"] = uniform((h, fc.units), 1.0 / math.sqrt(h))
    params[f"{fc.name}.bias"] = uniform((fc.units,), 1.0 / math.sqrt(h))
    return params


def lstm_layer(x, W, R, B, dtype):
    """One LSTM layer over (T, N, in) -> (T, N, H), zero initial state."""
    h_size = R.shape[0]
    bias = (B[: 4 * h_size] + B[4 * h_size :]).astype(dtype)
    xw = jnp.matmul(x, W.astype(dtype)) + bias  # every time step at once
    R = R.astype(dtype)
    state = wide(dtype)

    def cell(carry, xw_t):
        h, c = carry
        gates = (xw_t + jnp.matmul(h, R)).astype(state)
        i, o, f, g = jnp.split(gates, 4, axis=-1)  # ONNX gate order: i, o, f, c
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = (jax.nn.sigmoid(o) * jnp.tanh(c)).astype(dtype)
        return (h, c), h

    n = x.shape[1]
    # The cell state stays float32 under mixed precision (float64 in float64); h is fed
    # back in the compute dtype.
    # Zeros made like xw: per device under jax.shard_map (the data-parallel worker) they then
    # vary over devices as the scan's new state does, which lax.scan requires of its carry.
    carry = (
        lax.full_like(xw, 0, dtype, (n, h_size)),
        lax.full_like(xw, 0, state, (n, h_size)),
    )
    _, hs = lax.scan(cell, carry, xw)
    return hs


def apply(spec: Spec, params: dict, tokens, dtype):
    """(T, N) token ids -> (T, N, vocab) logits in the compute dtype."""
    embed, rnn, fc = _layers(spec)
    x = jnp.take(params[f"{embed.name}.weight"], tokens, axis=0).astype(dtype)
    for i in range(rnn.layers):
        n = f"{rnn.name}.l{i}"
        x = lstm_layer(x=x, W=params[f"{n}.W"], R=params[f"{n}.R"], B=params[f"{n}.B"], dtype=dtype)
    return jnp.matmul(x, params[f"{fc.name}.weight"].astype(dtype)) + params[
        f"{fc.name}.bias"
    ].astype(dtype)
