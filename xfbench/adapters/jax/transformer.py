"""BERT-base and GPT-2 small as pure JAX functions of the canonical parameter dict.

Parameters keep their canonical names and layouts ((out, in) matrices): each product is
one dot_general contracting the weight's second axis, which XLA takes as it is, so no
conversion is needed either way. Attention is jax.nn.dot_product_attention, with the
implementation the workload chose (XLA's, or cuDNN's fused kernel on NVIDIA GPUs).

Mixed precision as the other networks (networks.py): activations in the compute dtype,
each weight cast to it where it is used, the parameters float32; LayerNorm's statistics
and the softmax are computed in float32 (as PyTorch's autocast does); logits float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xfbench.adapters.jax.layers import wide
from xfbench.models import Spec
from xfbench.models import layers as L


def init(spec: Spec) -> dict:
    """Parameter shapes (zeros; under jax.eval_shape nothing is allocated)."""
    return {p.name: jnp.zeros(p.shape, jnp.float32) for p in spec.params}


def _linear(x, params, name: str, bias: bool = True):
    w = params[f"{name}.weight"].astype(x.dtype)
    y = jnp.einsum("...i,oi->...o", x, w)
    return y + params[f"{name}.bias"].astype(x.dtype) if bias else y


def _layer_norm(x, params, name: str, eps: float):
    wide_x = x.astype(wide(x.dtype))
    mean = jnp.mean(wide_x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(wide_x - mean), axis=-1, keepdims=True)
    y = (wide_x - mean) * jax.lax.rsqrt(var + eps)
    y = y * params[f"{name}.weight"] + params[f"{name}.bias"]
    return y.astype(x.dtype)


def _gelu(x, kind: str):
    return jax.nn.gelu(x, approximate=kind == "tanh")


def _attention(x, params, layer: L.TransformerBlock, implementation: str | None):
    n, t, d = x.shape
    h = layer.heads
    qkv = _linear(x, params, f"{layer.name}.attn.qkv").reshape(n, t, 3, h, d // h)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # (N, T, heads, dh), as JAX wants
    if implementation == "float64":
        y = _float64_attention(q, k, v, layer.causal)
    else:
        y = jax.nn.dot_product_attention(
            q, k, v, is_causal=layer.causal, implementation=implementation
        )
    return _linear(y.reshape(n, t, d), params, f"{layer.name}.attn.out")


def _float64_attention(q, k, v, causal: bool):
    """The same attention written out for the float64 proof: dot_product_attention computes
    its softmax in float32 whatever the input's type."""
    scores = jnp.einsum("btnh,bsnh->bnts", q, k) / jnp.sqrt(jnp.asarray(q.shape[-1], q.dtype))
    if causal:
        t = q.shape[1]
        scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, -jnp.inf)
    return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v)


def _mlp(x, params, layer: L.TransformerBlock):
    y = _gelu(_linear(x, params, f"{layer.name}.mlp.fc"), layer.gelu)
    return _linear(y, params, f"{layer.name}.mlp.proj")


def _block(x, params, layer: L.TransformerBlock, implementation):
    n, eps = layer.name, layer.eps
    if layer.pre_norm:
        x = x + _attention(_layer_norm(x, params, f"{n}.ln1", eps), params, layer, implementation)
        return x + _mlp(_layer_norm(x, params, f"{n}.ln2", eps), params, layer)
    x = _layer_norm(x + _attention(x, params, layer, implementation), params, f"{n}.ln1", eps)
    return _layer_norm(x + _mlp(x, params, layer), params, f"{n}.ln2", eps)


def apply(spec: Spec, params: dict, tokens, dtype, implementation: str | None = "xla"):
    """(N, T) token ids -> (N, T, vocab) logits, float32 (float64 in float64)."""
    x = tokens
    for layer, _ in spec.shapes:
        if isinstance(layer, L.TokenEmbedding):
            t = x.shape[1]
            e = jnp.take(params[f"{layer.name}.word"], x, axis=0)
            e = e + params[f"{layer.name}.position"][:t]
            if layer.types:
                e = e + params[f"{layer.name}.token_type"][0]
            x = e.astype(dtype)
        elif isinstance(layer, L.LayerNorm):
            x = _layer_norm(x, params, layer.name, layer.eps)
        elif isinstance(layer, L.TransformerBlock):
            x = _block(x, params, layer, implementation)
        elif isinstance(layer, L.MaskedLMHead):
            y = _gelu(_linear(x, params, f"{layer.name}.transform"), "erf")
            y = _layer_norm(y, params, f"{layer.name}.ln", layer.eps)
            word = params[layer.tied].astype(y.dtype)
            x = jnp.einsum("...i,vi->...v", y, word) + params[f"{layer.name}.bias"].astype(y.dtype)
        elif isinstance(layer, L.TiedLMHead):
            x = jnp.einsum("...i,vi->...v", x, params[layer.tied].astype(x.dtype))
        else:
            raise TypeError(f"no JAX function for {type(layer).__name__} in a transformer")
    return x.astype(wide(dtype))
