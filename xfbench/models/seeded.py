"""Weights made where a network runs, the same in every framework: the decoders of
models.DECODERS, whose full size (6.66 B parameters, 26.6 GB in float32) must never pass
through the host on its way to a GPU.

Each value is a function of the seed, the parameter's index and the element's flat index
in the canonical (ONNX) layout: a 32-bit integer hash (Wellons' lowbias32) that numpy,
PyTorch and JAX compute alike with integer operations where the tensor lives. Its top 24
bits give an integer m in [-2^23, 2^23), exact in float32, times the parameter's amplitude
over 2^23 as one float32 constant: one IEEE-rounded product, the same bits everywhere. A
uniform value of amplitude a has standard deviation a / sqrt(3), so a parameter whose
canonical init is normal with std s is drawn uniform of amplitude s sqrt(3).

The weights stand at a trained network's activation ranges (harness/equivalence's
trained_range: GELU's inputs of std TRAINED_GELU_STD, attention scores of std
TRAINED_SCORE_STD), set through the amplitudes, computed rather than measured, so that no
framework's reduction enters a weight.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from xfbench.models import layers as L
from xfbench.models.spec import TRAINED_GELU_STD, TRAINED_SCORE_STD, Spec

MASK = 0xFFFFFFFF
# a row block of at most this many values at a time (PyTorch's int64 temporaries)
CHUNK = 1 << 24


@dataclass(frozen=True)
class Made:
    """The weights a generator is given where it makes them itself, on its device
    (Adapter.makes_weights): the seed they are drawn from."""

    seed: int = 0


@dataclass(frozen=True)
class Draw:
    """How one parameter is made: a constant, or hashed values times each row block's
    amplitude ((first row, amplitude), ... in row order)."""

    name: str
    shape: tuple[int, ...]
    index: int
    constant: float | None = None
    blocks: tuple[tuple[int, float], ...] = ()

    def row_amplitudes(self) -> np.ndarray:
        """Each row's amplitude over 2^23, float32 (a vector's one row: its only value)."""
        rows = self.shape[0] if len(self.shape) > 1 else 1
        out = np.empty(rows, np.float32)
        starts = [b[0] for b in self.blocks] + [rows]
        for (first, amplitude), end in zip(self.blocks, starts[1:]):
            out[first:end] = np.float32(amplitude * 2.0**-23)
        return out


def _key(seed: int, index: int) -> int:
    return (seed * 0x9E3779B9 + index * 0x85EBCA6B + 1) & MASK


def _mul(x, c: int, u=int):
    """x * c mod 2^32 in pieces whose products stay below 2^49 (int64 never overflows;
    uint32 wraps alike); u makes a constant of x's kind (JAX takes no Python int above
    2^31 beside a uint32 array)."""
    low, high = x & u(0xFFFF), x >> u(16)
    return (low * u(c) + ((high * u(c & 0xFFFF)) << u(16))) & u(MASK)


def hashed(x, u=int):
    """lowbias32 of x (integers below 2^32, as int64 or uint32 arrays or tensors)."""
    x = x ^ (x >> u(16))
    x = _mul(x, 0x7FEB352D, u)
    x = x ^ (x >> u(15))
    x = _mul(x, 0x846CA68B, u)
    return x ^ (x >> u(16))


def plan(spec: Spec) -> list[Draw]:
    """Every parameter of spec, in its canonical order, as a Draw."""
    d = spec.layer(L.TokenEmbedding)[0].dim if spec.layer(L.TokenEmbedding) else 0
    out = []
    for i, p in enumerate(spec.params):
        if p.init in ("ones", "zeros"):
            out.append(Draw(p.name, p.shape, i, constant=1.0 if p.init == "ones" else 0.0))
            continue
        normal = p.init == "normal"
        amplitude = p.std * math.sqrt(3) if normal else 1 / math.sqrt(p.fan_in)
        blocks: tuple[tuple[int, float], ...] = ((0, amplitude),)
        # a trained network's ranges: a matrix of std s over d inputs gives outputs of
        # s sqrt(d) from LayerNorm's unit-variance features
        if p.name.endswith(".mlp.fc.weight"):
            blocks = ((0, TRAINED_GELU_STD / math.sqrt(d) * math.sqrt(3)),)
        elif p.name.endswith(".attn.qkv.weight"):  # rows q, k, v: q.k / sqrt(dh) at std 3
            qk = math.sqrt(TRAINED_SCORE_STD) / math.sqrt(d) * math.sqrt(3)
            blocks = ((0, qk), (2 * d, amplitude))
        out.append(Draw(p.name, p.shape, i, blocks=blocks))
    return out


def _m(h):
    """The top 24 bits of a hash as a signed integer in [-2^23, 2^23)."""
    return (h >> 8) - (1 << 23)


def numpy_weights(spec: Spec, seed: int = 0) -> dict[str, np.ndarray]:
    """The weights on the host, float32 (the float64 check's, and the frameworks' that
    take host arrays)."""
    return {draw.name: numpy_value(draw, seed) for draw in plan(spec)}


def numpy_value(draw: Draw, seed: int = 0) -> np.ndarray:
    if draw.constant is not None:
        return np.full(draw.shape, draw.constant, np.float32)
    n = math.prod(draw.shape)
    counter = np.arange(n, dtype=np.int64)
    m = _m(hashed((counter + _key(seed, draw.index)) & MASK)).astype(np.float32)
    rows = draw.row_amplitudes()
    m = m.reshape(rows.shape[0], -1) * rows[:, None]
    return m.reshape(draw.shape)


def torch_value(draw: Draw, device, dtype, seed: int = 0):
    """The parameter made on device by PyTorch (float32 arithmetic, then dtype)."""
    import torch

    if draw.constant is not None:
        return torch.full(draw.shape, draw.constant, dtype=dtype, device=device)
    rows_amp = torch.from_numpy(draw.row_amplitudes()).to(device)
    rows = rows_amp.shape[0]
    per_row = math.prod(draw.shape) // rows
    out = torch.empty((rows, per_row), dtype=dtype, device=device)
    step = max(1, CHUNK // per_row)
    key = _key(seed, draw.index)
    for first in range(0, rows, step):
        last = min(rows, first + step)
        counter = torch.arange(first * per_row, last * per_row, dtype=torch.int64, device=device)
        m = _m(hashed((counter + key) & MASK)).to(torch.float32).view(last - first, per_row)
        out[first:last] = (m * rows_amp[first:last, None]).to(dtype)
    return out.view(draw.shape)


def jax_value(draw: Draw, device, dtype, seed: int = 0, *, transposed: bool = False):
    """The parameter made on device by JAX (uint32 arithmetic, which wraps as the hash
    means; float32, then dtype), one compiled program a shape: a full-size decoder's 388
    parameters take six compilations. transposed: a matrix made in the (in, out) layout
    (the transpose inside the same program: no second copy of it)."""
    import jax
    import jax.numpy as jnp

    if draw.constant is not None:
        return jax.device_put(jnp.full(draw.shape, draw.constant, dtype), device)
    amplitudes = jax.device_put(draw.row_amplitudes(), device)
    key = jax.device_put(np.uint32(_key(seed, draw.index)), device)
    made = _jax_made()
    return made(
        amplitudes, key, shape=draw.shape, dtype=jnp.dtype(dtype).name, transposed=transposed
    )


@functools.cache
def _jax_made():
    import jax
    import jax.numpy as jnp

    def make(amplitudes, key, *, shape: tuple[int, ...], dtype: str, transposed: bool):
        counter = jnp.arange(math.prod(shape), dtype=jnp.uint32)
        h = hashed(counter + key, jnp.uint32)
        m = (h >> jnp.uint32(8)).astype(jnp.int32) - (1 << 23)
        values = m.astype(jnp.float32).reshape(amplitudes.shape[0], -1) * amplitudes[:, None]
        values = values.astype(dtype).reshape(shape)
        return values.T if transposed else values

    return jax.jit(make, static_argnames=("shape", "dtype", "transposed"))
