"""BERT-base and GPT-2 small as pure JAX functions of the canonical parameter dict.

Parameters keep their canonical names and layouts ((out, in) matrices): each product is
one dot_general contracting the weight's second axis, which XLA takes as it is, so no
conversion is needed either way. Attention is jax.nn.dot_product_attention, with the
implementation the workload chose (XLA's, or cuDNN's fused kernel on NVIDIA GPUs).

Mixed precision is PyTorch's autocast, written out: every product (the projections, the
MLP, attention, the heads) takes its inputs in the compute dtype and gives its output in
it, as does the GELU that follows; the residual stream, the embeddings and LayerNorm stay
float32 (a half-type product added to it promotes to float32), and so do the parameters.
Logits come back as float32; in float64 everything is float64.
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


def linear(x, params, name: str, dtype):
    """x @ W^T + b, in dtype."""
    w = params[f"{name}.weight"].astype(dtype)
    y = jnp.einsum("...i,oi->...o", x.astype(dtype), w)
    return y + params[f"{name}.bias"].astype(dtype)


def layer_norm(x, params, name: str, eps: float):
    """In float32 (float64 in float64), whatever x's type."""
    x = x.astype(wide(x.dtype))
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    y = (x - mean) * jax.lax.rsqrt(var + eps)
    return y * params[f"{name}.weight"] + params[f"{name}.bias"]


def gelu(x, kind: str):
    return jax.nn.gelu(x, approximate=kind == "tanh")


def _attention(x, params, layer: L.TransformerBlock, dtype, *, implementation: str | None):
    n, t, d = x.shape
    h = layer.heads
    qkv = linear(x, params, f"{layer.name}.attn.qkv", dtype).reshape(n, t, 3, h, d // h)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # (N, T, heads, dh), as JAX wants
    if implementation == "written":
        y = _written_attention(q, k, v, layer.causal)
    else:
        y = jax.nn.dot_product_attention(
            q, k, v, is_causal=layer.causal, implementation=implementation
        )
    return linear(y.reshape(n, t, d), params, f"{layer.name}.attn.out", dtype)


def written_scores(q, k):
    """q k^T, (N, T, heads, dh) -> (N, heads, T, T), in float32 (float64 in float64): in the
    half precisions the half-type products summed in float32 and kept so, as
    jax.nn.dot_product_attention's XLA implementation keeps them (its
    DotAlgorithmPreset.BF16_BF16_F32); never rounded to the half type on the way."""
    wide = jnp.float64 if q.dtype == jnp.float64 else jnp.float32
    return jnp.einsum("btnh,bsnh->bnts", q, k, preferred_element_type=wide)


def _written_attention(q, k, v, causal: bool):
    """The same attention written out, where dot_product_attention cannot run it: in float64
    (its softmax is float32 whatever the input's type) and in fp16 on the CPU (its fp16
    products ask for a dot algorithm XLA:CPU does not have). The products in q's type, the
    scaling and softmax in float32 (float64 in float64)."""
    wide = jnp.float64 if q.dtype == jnp.float64 else jnp.float32
    scores = written_scores(q, k) / jnp.sqrt(wide(q.shape[-1]))
    if causal:
        t = q.shape[1]
        scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, -jnp.inf)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    return jnp.einsum("bnts,bsnh->btnh", probs, v)


def mlp(x, params, layer: L.TransformerBlock, dtype):
    y = gelu(linear(x, params, f"{layer.name}.mlp.fc", dtype), layer.gelu)
    return linear(y, params, f"{layer.name}.mlp.proj", dtype)


def _block(x, params, layer: L.TransformerBlock, dtype, *, implementation):
    """x (float32) -> float32: each half-type branch promotes when it is added back."""
    n, eps = layer.name, layer.eps
    attn = lambda z: _attention(z, params, layer, dtype, implementation=implementation)  # noqa: E731
    if layer.pre_norm:
        x = x + attn(layer_norm(x, params, f"{n}.ln1", eps))
        return x + mlp(layer_norm(x, params, f"{n}.ln2", eps), params, layer, dtype)
    x = layer_norm(x + attn(x), params, f"{n}.ln1", eps)
    return layer_norm(x + mlp(x, params, layer, dtype), params, f"{n}.ln2", eps)


def logits(x, params, tied: str, dtype):
    return jnp.einsum("...i,vi->...v", x.astype(dtype), params[tied].astype(dtype))


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
            x = e  # float32 (float64 in float64), as the parameters
        elif isinstance(layer, L.LayerNorm):
            x = layer_norm(x, params, layer.name, layer.eps)
        elif isinstance(layer, L.TransformerBlock):
            x = _block(x, params, layer, dtype, implementation=implementation)
        elif isinstance(layer, L.MaskedLMHead):
            y = gelu(linear(x, params, f"{layer.name}.transform", dtype), "erf")
            y = layer_norm(y, params, f"{layer.name}.ln", layer.eps)
            x = logits(y, params, layer.tied, dtype) + params[f"{layer.name}.bias"].astype(dtype)
        elif isinstance(layer, L.TiedLMHead):
            x = logits(x, params, layer.tied, dtype)
        else:
            raise TypeError(f"no JAX function for {type(layer).__name__} in a transformer")
    return x.astype(wide(dtype))
