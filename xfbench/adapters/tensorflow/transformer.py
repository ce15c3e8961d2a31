"""BERT-base and GPT-2 small as a tf.Module over tf ops, built from the spec.

Dense weights are held as TensorFlow's (in, out) (weights.DENSE), the embeddings as they
are; the heads multiply by the word embedding matrix transposed (tied). Products are
tf.matmul on 2-D operands (MatMul: oneDNN's or Eigen's GEMM on the CPU, cuBLAS on GPUs) and
batched for attention (BatchMatMulV2); under `function` Grappler and oneDNN fuse what they
can, under `xla` XLA fuses the whole step. TensorFlow has no fused attention operator of its
own outside Keras' einsum-based layer, so attention is written out: softmax(q k^T / sqrt(dh))
v, the softmax in float32.

Mixed precision is PyTorch's autocast, written out (as the JAX adapter does): every product
takes its inputs in the compute dtype and gives its output in it, as does the GELU after
it; the residual stream, the embeddings and LayerNorm stay in the master dtype (float32),
each half-type branch cast up where it is added back.
"""

from __future__ import annotations

import math

import tensorflow as tf

from xfbench.adapters.tensorflow.layers import Variables
from xfbench.adapters.tensorflow.weights import DENSE, SAME
from xfbench.models import Spec
from xfbench.models import layers as L


def _gelu(x, tanh: bool, written: bool = False):
    """tf.nn.gelu, except in float64: there it is 5e-9 from the exact function (TensorFlow
    2.21 on the CPU, measured against PyTorch's and math.erf), so the proof's float64 step
    writes the same formula out; and where `written` asks for it (the ONNX export: the erf
    form's Erfc has no ONNX conversion in tf2onnx)."""
    if x.dtype != tf.float64 and not written:
        return tf.nn.gelu(x, approximate=tanh)
    if tanh:
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + tf.tanh(inner))
    return 0.5 * x * (1 + tf.math.erf(x / math.sqrt(2)))


def lookup(table: tf.Variable, ids):
    """Rows ids of an embedding table, gathered from its dense value. A gather on the
    variable itself (ResourceGather) switches it to copy-on-read, after which every dense
    read copies the whole table: the tied head's, each step (GPT-2's 154 MB: 6 to 25 ms
    per product at batch 1, TensorFlow 2.21 on a 2-core Zen 4). Keras' Embedding gathers
    from the value too."""
    return tf.gather(tf.convert_to_tensor(table), ids)


def _causal(t: int):
    """(T, T): True where a query may attend to a key: the key's position is not after
    the query's."""
    return tf.linalg.band_part(tf.ones((t, t), tf.bool), -1, 0)


def _scale(head_dim: int) -> float:
    """Attention's softmax scale, 1 / sqrt(dh)."""
    return 1 / math.sqrt(head_dim)


def scores(q, k, dtype):
    """q k^T in dtype (float32; float64 in fp64): in the half precisions, the half-type
    values' products, which float32 holds exactly, summed in float32 and kept so through
    the scale, the mask and the softmax, as PyTorch's and JAX's attention kernels keep them
    (docs/frameworks.md); never rounded to the half type on the way."""
    return tf.matmul(tf.cast(q, dtype), tf.cast(k, dtype), transpose_b=True)


class Transformer(tf.Module):
    """(N, T) token ids -> (N, T, vocab) logits in the master dtype."""

    def __init__(self, spec: Spec, variables: Variables, compute_dtype=tf.float32):
        super().__init__()
        self.spec, self.compute_dtype = spec, compute_dtype
        self.master_dtype = tf.float64 if compute_dtype == tf.float64 else tf.float32
        self.written = False  # GELU written out (export.py sets it while it traces)
        self.v = {}
        for layer, x in spec.shapes:
            for p in layer.params(x):
                matrix = len(p.shape) == 2 and not isinstance(layer, L.TokenEmbedding)
                self.v[p.name] = variables.param(p, DENSE if matrix else SAME)
        self.positions = spec.loss_positions

    def _cast(self, name, dtype):
        return tf.cast(self.v[name], dtype)

    def _linear(self, x, name):
        """x @ W + b in the compute dtype."""
        x = tf.cast(x, self.compute_dtype)
        shape = tf.shape(x)
        w = self._cast(f"{name}.weight", x.dtype)
        y = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), w) + self._cast(f"{name}.bias", x.dtype)
        return tf.reshape(y, tf.concat([shape[:-1], [w.shape[-1]]], 0))

    def _layer_norm(self, x, name, eps):
        """In the master dtype (float32; float64 in float64), whatever x's type."""
        wide = tf.cast(x, self.master_dtype)
        mean, var = tf.nn.moments(wide, axes=[-1], keepdims=True)
        y = (wide - mean) * tf.math.rsqrt(var + eps)
        return y * self.v[f"{name}.weight"] + self.v[f"{name}.bias"]

    def _add(self, x, branch):
        """The residual sum, in the master dtype."""
        return x + tf.cast(branch, self.master_dtype)

    def _attention(self, x, layer: L.TransformerBlock):
        n, t, d = tf.shape(x)[0], x.shape[1], x.shape[2]
        h = layer.heads
        qkv = tf.reshape(self._linear(x, f"{layer.name}.attn.qkv"), [n, t, 3, h, d // h])
        q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # each (N, heads, T, dh)
        # the scores formed, scaled and normalised in the master dtype
        z = scores(q, k, self.master_dtype) * tf.constant(_scale(d // h), self.master_dtype)
        if layer.causal:
            z = tf.where(_causal(t), z, tf.constant(-math.inf, z.dtype))
        probs = tf.cast(tf.nn.softmax(z, axis=-1), v.dtype)
        y = tf.reshape(tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3]), [n, t, d])
        return self._linear(y, f"{layer.name}.attn.out")

    def _mlp(self, x, layer: L.TransformerBlock):
        y = _gelu(
            self._linear(x, f"{layer.name}.mlp.fc"), tanh=layer.gelu == "tanh", written=self.written
        )
        return self._linear(y, f"{layer.name}.mlp.proj")

    def _block(self, x, layer: L.TransformerBlock):
        n, eps = layer.name, layer.eps
        if layer.pre_norm:
            x = self._add(x, self._attention(self._layer_norm(x, f"{n}.ln1", eps), layer))
            return self._add(x, self._mlp(self._layer_norm(x, f"{n}.ln2", eps), layer))
        x = self._layer_norm(self._add(x, self._attention(x, layer)), f"{n}.ln1", eps)
        return self._layer_norm(self._add(x, self._mlp(x, layer)), f"{n}.ln2", eps)

    def _logits(self, x, tied: str, bias: str | None = None):
        x = tf.cast(x, self.compute_dtype)
        shape = tf.shape(x)
        word = self._cast(tied, x.dtype)
        y = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), word, transpose_b=True)
        if bias:
            y = y + self._cast(bias, x.dtype)
        return tf.reshape(y, tf.concat([shape[:-1], [word.shape[0]]], 0))

    def __call__(self, tokens, training=False):
        x = tokens
        for layer, _ in self.spec.shapes:
            if isinstance(layer, L.TokenEmbedding):
                t = tokens.shape[1]
                e = lookup(self.v[f"{layer.name}.word"], tokens)
                e = e + self.v[f"{layer.name}.position"][:t]
                if layer.types:
                    e = e + self.v[f"{layer.name}.token_type"][0]
                x = e  # the master dtype, as the variables
            elif isinstance(layer, L.LayerNorm):
                x = self._layer_norm(x, layer.name, layer.eps)
            elif isinstance(layer, L.TransformerBlock):
                x = self._block(x, layer)
            elif isinstance(layer, L.MaskedLMHead):
                y = _gelu(
                    self._linear(x, f"{layer.name}.transform"), tanh=False, written=self.written
                )
                y = self._layer_norm(y, f"{layer.name}.ln", layer.eps)
                x = self._logits(y, layer.tied, f"{layer.name}.bias")
            elif isinstance(layer, L.TiedLMHead):
                x = self._logits(x, layer.tied)
            else:
                raise TypeError(f"no TensorFlow function for {type(layer).__name__}")
        return x
