"""GPT-2's decoder with a static key/value cache as one ONNX graph (token generation).

One graph serves prefill and decode: it takes T new tokens (B, T) at positions
`position`.. (T = ISL at prefill, 1 at each decode step) and the cache, one (B, heads,
ISL + OSL, dh) tensor per layer for keys and one for values, and writes the new keys and
values into it with opset 24's TensorScatter. Bound to the same buffer as input and
output (ONNX Runtime's I/O binding), the cache is written in place: allocated once,
never copied. Each new token attends to the cache positions up to its own (a mask of
-inf beyond); the head runs on the last new position only, and ArgMax (greedy) on it.

The rest is graph.py's: the canonical parameters under their names, LayerNormalization,
Gelu (tanh), MatMul, Softmax, the tied head the word embedding's one initializer.

Inputs:  tokens (B, T) int64, position (1,) int64, past_key_i / past_value_i (cache)
Outputs: next (B,) int64, logits (B, vocab) float32, present_key_i / present_value_i
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from xfbench.exchange.graph import _Graph, _layer_norm, _linear, _matmul_t, score_scale
from xfbench.exchange.names import IR_VERSION
from xfbench.models import Spec
from xfbench.models import layers as L

# TensorScatter is opset 24's; IR version 10 reads only up to opset 21.
OPSET = 24
DECODER_IR_VERSION = max(IR_VERSION, 11)
TOKENS, POSITION, NEXT, LOGITS = "tokens", "position", "next", "logits"


def cache_names(layers: int) -> list[tuple[str, str, str, str]]:
    """(past key, past value, present key, present value) of each layer."""
    return [(f"past_key_{i}", f"past_value_{i}", f"present_key_{i}", f"present_value_{i}")
            for i in range(layers)]  # fmt: skip


def _block(g: _Graph, layer: L.TransformerBlock, x: str, *, d: int, cache, where: dict) -> str:
    n, h, dh = layer.name, layer.heads, d // layer.heads
    past_k, past_v, present_k, present_v = cache
    qkv = _linear(g, f"{n}.attn.qkv", _layer_norm(g, f"{n}.ln1", x, d=d, eps=layer.eps),
                  d_in=d, d_out=3 * d)  # fmt: skip
    qkv = g.op(
        "Transpose", [g.op("Reshape", [qkv, g.const([0, 0, 3, h, dh])])], perm=[2, 0, 3, 1, 4]
    )  # (3, B, heads, T, dh); fmt: skip
    q, k, v = (
        g.op("Squeeze", [part, g.const([0])])
        for part in g.op("Split", [qkv, g.const([1, 1, 1])], axis=0, n_out=3)
    )
    for past, new, present in ((past_k, k, present_k), (past_v, v, present_v)):
        g.nodes.append(helper.make_node("TensorScatter", [past, new, where["indices"]],
                                        [present], name=f"write_{present}", axis=2))  # fmt: skip
    scores = g.op("MatMul", [q, g.op("Transpose", [present_k], perm=[0, 1, 3, 2])])
    scores = g.op("Mul", [scores, g.const(score_scale(dh), np.float32)])
    probs = g.op("Softmax", [g.op("Add", [scores, where["mask"]])], axis=-1)
    y = g.op("Transpose", [g.op("MatMul", [probs, present_v])], perm=[0, 2, 1, 3])
    y = _linear(g, f"{n}.attn.out", g.op("Reshape", [y, g.const([0, 0, d])]), d_in=d, d_out=d)
    x = g.op("Add", [x, y])
    z = _layer_norm(g, f"{n}.ln2", x, d=d, eps=layer.eps)
    z = g.op("Gelu", [_linear(g, f"{n}.mlp.fc", z, d_in=d, d_out=layer.ff)], approximate="tanh")
    return g.op("Add", [x, _linear(g, f"{n}.mlp.proj", z, d_in=layer.ff, d_out=d)], n)


def _positions(g: _Graph, length: int) -> dict:
    """The new tokens' positions, TensorScatter's write indices (B,) and the (T, L) mask:
    0 where a cache position is at or before the query's own, -inf after it."""
    t = g.op("Gather", [g.op("Shape", [TOKENS]), g.const(1)], axis=0)
    b = g.op("Gather", [g.op("Shape", [TOKENS]), g.const([0])], axis=0)
    start = g.op("Squeeze", [POSITION, g.const([0])])
    query = g.op("Range", [start, g.op("Add", [start, t]), g.const(1)])  # (T,)
    keys = g.const(np.arange(length)[None, :], hint="cache_positions")  # (1, L)
    allowed = g.op("LessOrEqual", [keys, g.op("Unsqueeze", [query, g.const([1])])])  # (T, L)
    mask = g.op("Where", [allowed, g.const(0.0, np.float32), g.const(-np.inf, np.float32)])
    return {"indices": g.op("Expand", [POSITION, b]), "mask": mask, "positions": query}


def _last_token(g: _Graph, x: str) -> str:
    """x at the last of the tokens' positions: (B, T, d) to (B, d)."""
    return g.op(
        "Gather",
        [
            x,
            g.op(
                "Sub", [g.op("Gather", [g.op("Shape", [TOKENS]), g.const(1)], axis=0), g.const(1)]
            ),
        ],
        axis=1,
    )  # (B, d); fmt: skip


def build_decoder(spec: Spec, weights: dict[str, np.ndarray], length: int):
    """The ModelProto of spec's decoder over a cache of `length` positions."""
    embed = spec.layer(L.TokenEmbedding)[0]
    blocks = spec.layer(L.TransformerBlock)
    d, heads = embed.dim, blocks[0].heads
    if length > embed.positions:
        raise ValueError(f"{length} positions is more than {spec.id}'s {embed.positions}")
    g = _Graph(weights)
    where = _positions(g, length)
    word = g.param(f"{embed.name}.word", (embed.vocab, d))
    position = g.param(f"{embed.name}.position", (embed.positions, d))
    x = g.op("Add", [g.op("Gather", [word, TOKENS], axis=0),
                     g.op("Gather", [position, where["positions"]], axis=0)])  # fmt: skip
    caches = cache_names(len(blocks))
    for block, cache in zip(blocks, caches):
        x = _block(g, block, x, d=d, cache=cache, where=where)
    last = _last_token(g, x)
    final = spec.layer(L.LayerNorm)[-1]
    logits = _matmul_t(g, _layer_norm(g, final.name, last, d=d, eps=final.eps), word)
    g.nodes.append(helper.make_node("Identity", [logits], [LOGITS], name="logits"))
    g.nodes.append(helper.make_node("ArgMax", [logits], [NEXT], name="next", axis=-1,
                                    keepdims=0))  # fmt: skip

    shape = ["B", heads, length, d // heads]
    cache_type = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa: E731
    inputs = [
        helper.make_tensor_value_info(TOKENS, TensorProto.INT64, ["B", "T"]),
        helper.make_tensor_value_info(POSITION, TensorProto.INT64, [1]),
        *(cache_type(name) for c in caches for name in c[:2]),
    ]
    outputs = [
        helper.make_tensor_value_info(NEXT, TensorProto.INT64, ["B"]),
        helper.make_tensor_value_info(LOGITS, TensorProto.FLOAT, ["B", embed.vocab]),
        *(cache_type(name) for c in caches for name in c[2:]),
    ]
    graph = helper.make_graph(g.nodes, f"{spec.id}_{spec.scale}_decoder", inputs, outputs,
                              initializer=g.inits)  # fmt: skip
    model = helper.make_model(graph, producer_name="xfbench", producer_version="1",
                              opset_imports=[helper.make_opsetid("", OPSET)])  # fmt: skip
    model.ir_version = DECODER_IR_VERSION
    model.doc_string = f"{spec.paper_name}, {spec.scale} size: greedy decoder, static cache"
    return model
