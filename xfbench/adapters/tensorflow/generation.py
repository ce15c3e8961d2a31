"""GPT-2's greedy decoding in TensorFlow with a static key/value cache (xfbench/generation).

transformer.py's network with two more methods: the cache is one tf.Variable (B, heads,
ISL + OSL, dh) per layer for keys and one for values, allocated once and written in
place. Prefill assigns the prompt's keys and values to positions [0, ISL); a decode step
scatters one position (ResourceScatterNdUpdate: a position held in a tensor, which every
mode compiles, XLA included; a strided-slice assignment needs constant bounds under XLA)
and attends to the whole cache under a mask of the positions written so far. Modes:
eager (the methods called directly), function (tf.function with a fixed input signature:
one trace for every step) and xla (the same with jit_compile=True). Greedy's argmax is
inside the step, on the device.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from xfbench.adapters.base import Generator
from xfbench.adapters.tensorflow.layers import Variables
from xfbench.adapters.tensorflow.transformer import Transformer, lookup
from xfbench.adapters.tensorflow.workload import backend, onednn_in_use, tf_device
from xfbench.models import Spec
from xfbench.models import layers as L


def write(cache: tf.Variable, position, new) -> None:
    """new (B, heads, 1, dh) into cache at position (an int32 scalar tensor)."""
    b, h, _, dh = cache.shape
    index = tf.stack(
        tf.meshgrid(tf.range(b), tf.range(h), tf.reshape(position, [1]), indexing="ij"), -1
    )  # (B, heads, 1, 3): [b, head, position]
    cache.scatter_nd_update(index, new)


class CachedTransformer(Transformer):
    def __init__(self, spec: Spec, variables: Variables, batch: int, length: int):
        super().__init__(spec, variables)
        self.blocks = spec.layer(L.TransformerBlock)
        d = spec.layer(L.TokenEmbedding)[0].dim
        self.heads, self.dh, self.length = self.blocks[0].heads, d // self.blocks[0].heads, length
        shape = (batch, self.heads, length, self.dh)
        self.keys = [tf.Variable(tf.zeros(shape), trainable=False) for _ in self.blocks]
        self.values = [tf.Variable(tf.zeros(shape), trainable=False) for _ in self.blocks]
        self.final = spec.layer(L.LayerNorm)[-1]

    def _qkv(self, x, layer):
        n, t = tf.shape(x)[0], x.shape[1]
        h = self._layer_norm(x, f"{layer.name}.ln1", layer.eps)
        qkv = tf.reshape(self._linear(h, f"{layer.name}.attn.qkv"), [n, t, 3, self.heads, self.dh])
        return tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # each (N, heads, T, dh)

    def _attend(self, x, layer, q, *, keys, values, allowed):
        """softmax(q k^T / sqrt(dh)) v where allowed, then the rest of the block."""
        n, t, d = tf.shape(x)[0], x.shape[1], x.shape[2]
        z = tf.matmul(q, keys, transpose_b=True) * tf.constant(1 / math.sqrt(self.dh))
        z = tf.where(allowed, z, tf.constant(-math.inf, z.dtype))
        y = tf.matmul(tf.nn.softmax(z, axis=-1), values)
        y = tf.reshape(tf.transpose(y, [0, 2, 1, 3]), [n, t, d])
        x = self._add(x, self._linear(y, f"{layer.name}.attn.out"))
        return self._add(x, self._mlp(self._layer_norm(x, f"{layer.name}.ln2", layer.eps), layer))

    def _head(self, x):
        z = self._logits(self._layer_norm(x, self.final.name, self.final.eps), "embed.word")
        return tf.argmax(z, axis=-1, output_type=tf.int32), z

    def prefill(self, prompt):
        t = prompt.shape[1]
        x = lookup(self.v["embed.word"], prompt) + self.v["embed.position"][:t]
        causal = tf.linalg.band_part(tf.ones((t, t), tf.bool), -1, 0)
        for i, layer in enumerate(self.blocks):
            q, k, v = self._qkv(x, layer)
            self.keys[i][:, :, :t].assign(k)
            self.values[i][:, :, :t].assign(v)
            x = self._attend(x, layer, q, keys=k, values=v, allowed=causal)
        return self._head(x[:, -1])

    def decode(self, tokens, position):
        x = lookup(self.v["embed.word"], tokens) + lookup(self.v["embed.position"], position)
        seen = tf.range(self.length) <= position  # (L,): the positions written so far
        x = x[:, None]
        for i, layer in enumerate(self.blocks):
            q, k, v = self._qkv(x, layer)
            write(self.keys[i], position, k)
            write(self.values[i], position, v)
            x = self._attend(x, layer, q, keys=self.keys[i], values=self.values[i], allowed=seen)
        return self._head(x[:, 0])


class TensorFlowGenerator(Generator):
    def __init__(self, spec: Spec, cell, weights: dict[str, np.ndarray]):
        self.device = tf_device(cell.device)
        b, t = cell.batch_size, cell.prompt_tokens
        with tf.device(self.device):
            self.net = CachedTransformer(
                spec, Variables(weights), b, cell.prompt_tokens + cell.new_tokens
            )
        self.cache_bytes = sum(4 * int(np.prod(c.shape)) for c in self.net.keys + self.net.values)
        if cell.mode == "eager":
            self._prefill, self._decode = self.net.prefill, self.net.decode
        else:
            compiled = dict(jit_compile=cell.mode == "xla", reduce_retracing=False)
            self._prefill = tf.function(
                self.net.prefill, input_signature=[tf.TensorSpec([b, t], tf.int32)], **compiled
            )
            self._decode = tf.function(
                self.net.decode,
                input_signature=[tf.TensorSpec([b], tf.int32), tf.TensorSpec([], tf.int32)],
                **compiled,
            )
        self.mode = cell.mode
        self.position = 0
        self._logits = None
        self.info = {
            "device_name": cell.device if cell.device == "cpu" else self.device,
            "attention_kernel": "softmax(q k^T / sqrt(dh)) v written out: BatchMatMulV2 and "
            "Softmax" + (", XLA-fused" if cell.mode == "xla" else ""),
            "cache_write": "tf.Variable: prompt by slice assignment, each step by "
            "ResourceScatterNdUpdate",
            "onednn": onednn_in_use(),
            "backend": backend(cell.device, cell.mode),
        }

    def _sync(self, out) -> np.ndarray:
        tokens, self._logits = out
        return tokens.numpy().astype(np.int64)  # a host copy: it waits for the device

    def prefill(self, prompt: np.ndarray) -> np.ndarray:
        with tf.device(self.device):
            out = self._sync(self._prefill(tf.constant(prompt, tf.int32)))
        self.position = prompt.shape[1]
        return out

    def decode(self, tokens: np.ndarray) -> np.ndarray:
        with tf.device(self.device):
            position = tf.constant(self.position, tf.int32)
            out = self._sync(self._decode(tf.constant(tokens, tf.int32), position))
        self.position += 1
        return out

    def logits(self) -> np.ndarray:
        return self._logits.numpy().astype(np.float32)

    def compile_facts(self) -> dict:
        if self.mode == "eager":
            return {}
        traces = {"prefill": self._prefill.experimental_get_tracing_count(),
                  "decode": self._decode.experimental_get_tracing_count()}  # fmt: skip
        if traces["decode"] != 1:
            raise RuntimeError(f"the decode step was traced {traces['decode']} times, not once")
        return {"traces": traces}

    def reset_peak_memory(self) -> None:
        if self.device.startswith("/GPU"):
            tf.config.experimental.reset_memory_stats(self.device.lstrip("/"))

    def peak_device_memory(self) -> int | None:
        if self.device.startswith("/GPU"):
            return int(tf.config.experimental.get_memory_info(self.device.lstrip("/"))["peak"])
        return None

    def close(self) -> None:
        del self.net, self._prefill, self._decode
