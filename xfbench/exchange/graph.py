"""A network spec as an ONNX graph, built node by node with onnx.helper.

Initializers carry the canonical parameter names and layouts of models/layers.py
unchanged (conv OIHW, dense (out, in) used through Gemm transB=1, LSTM W/R/B in
gate order i, o, f, c), so reading a file back needs no conversion at all. Where
an ONNX operator wants another shape (LSTM's leading direction axis) a node does
it inside the graph.

The transformers are written with the operators of opset 21 that name what they compute
(LayerNormalization, Gelu with its approximation, MatMul, Softmax); attention is
softmax(q k^T / sqrt(dh) [+ causal mask of -inf]) v, the heads split by Reshape/Transpose.
The heads' tied matrix is the word embedding's one initializer, used twice.

Two graphs from one spec (the same for the transformers, which have no BatchNorm):
- "infer" (the exchange file): BatchNormalization on running statistics, which
  start at mean 0, variance 1, as every framework's do before training;
- "train": BatchNorm on the batch's own statistics (biased variance, as every
  framework normalises while training), written out with Reduce/Sub/Mul nodes.
  It gives the loss that a training step's forward pass must compute.

Input "input": (N, C, H, W) or (N, F) float32, or (N, T) int64 token ids.
Output "logits": (N, classes) or (N, T, classes).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from xfbench.exchange.names import INPUT, IR_VERSION, OPSET, OUTPUT  # noqa: F401
from xfbench.models import Spec
from xfbench.models import layers as L


class _Graph:
    """Collects nodes and initializers; hands out unique tensor names."""

    def __init__(self, weights: dict[str, np.ndarray] | None):
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.params: list[tuple[str, tuple[int, ...]]] = []
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def op(
        self, op_type: str, inputs: list[str], hint: str | None = None, n_out: int = 1, **attrs
    ) -> str | list[str]:
        outs = [self.name(hint or op_type.lower()) for _ in range(n_out)]
        name = f"n{len(self.nodes)}_{op_type}"
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def param(self, name: str, shape: tuple[int, ...]) -> str:
        """A canonical parameter as an initializer (zeros when no weights are given:
        the caller fills them in from the external-data file)."""
        self.params.append((name, shape))
        if self.weights is not None:
            value = self.weights[name]
            if value.shape != shape:
                raise ValueError(f"{name}: weight has shape {value.shape}, the spec says {shape}")
            self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def const(self, value, dtype=np.int64, hint: str = "const") -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def buffer(self, name: str, value: np.ndarray) -> str:
        """A non-trainable tensor that belongs to the network (BN running statistics)."""
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name


def _dense(g: _Graph, layer: L.Dense, x: str, shape) -> str:
    w = g.param(f"{layer.name}.weight", (layer.units, shape[-1]))
    inputs = [x, w] + ([g.param(f"{layer.name}.bias", (layer.units,))] if layer.bias else [])
    if len(shape) == 1:
        return g.op("Gemm", inputs, layer.name, transB=1)
    # A sequence (T, N, F) inside the graph: fold time into the batch for Gemm.
    flat = g.op("Reshape", [x, g.const([-1, shape[-1]])])
    y = g.op("Gemm", [flat] + inputs[1:], layer.name, transB=1)
    return g.op("Reshape", [y, g.const([shape[0], -1, layer.units])])


def _conv(g: _Graph, layer: L.Conv, x: str, shape) -> str:
    k = layer.kernel
    inputs = [x, g.param(f"{layer.name}.weight", (layer.filters, shape[0], k, k))]
    if layer.bias:
        inputs.append(g.param(f"{layer.name}.bias", (layer.filters,)))
    p = layer.pad
    return g.op(
        "Conv",
        inputs,
        layer.name,
        kernel_shape=[k, k],
        strides=[layer.stride] * 2,
        pads=[p, p, p, p],
        dilations=[1, 1],
        group=1,
    )


def _batchnorm(g: _Graph, layer: L.BatchNorm, x: str, shape, train: bool) -> str:
    c = shape[0]
    scale = g.param(f"{layer.name}.weight", (c,))
    bias = g.param(f"{layer.name}.bias", (c,))
    if not train:
        mean = g.buffer(f"{layer.name}.running_mean", np.zeros(c))
        var = g.buffer(f"{layer.name}.running_var", np.ones(c))
        return g.op(
            "BatchNormalization", [x, scale, bias, mean, var], layer.name, epsilon=layer.eps
        )
    axes = g.const([0, 2, 3])
    mean = g.op("ReduceMean", [x, axes], keepdims=1)
    centred = g.op("Sub", [x, mean])
    var = g.op("ReduceMean", [g.op("Mul", [centred, centred]), axes], keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [var, g.const(layer.eps, np.float32)])])
    per_channel = g.const([c, 1, 1])
    y = g.op("Mul", [g.op("Div", [centred, std]), g.op("Reshape", [scale, per_channel])])
    return g.op("Add", [y, g.op("Reshape", [bias, per_channel])], layer.name)


def _blocks(g: _Graph, parts, x: str, train: bool) -> dict[str, str]:
    """Run conv/BN parts of a block, returning each part's output by its name."""
    out = {}
    for layer, shape in parts:
        if isinstance(layer, L.Conv):
            x = _conv(g, layer, x, shape)
        else:
            x = _batchnorm(g=g, layer=layer, x=x, shape=shape, train=train)
        out[layer.name] = x
    return out


def _bottleneck(g: _Graph, layer: L.Bottleneck, x: str, shape, train: bool) -> str:
    parts = dict((p.name, (p, s)) for p, s in layer.parts(shape))
    n = layer.name
    y = x
    for i in (1, 2, 3):
        y = _blocks(g, [parts[f"{n}.conv{i}"], parts[f"{n}.bn{i}"]], y, train)[f"{n}.bn{i}"]
        if i < 3:
            y = g.op("Relu", [y])
    identity = x
    if layer.projected(shape):
        identity = _blocks(
            g, [parts[f"{n}.downsample.conv"], parts[f"{n}.downsample.bn"]], x, train
        )[f"{n}.downsample.bn"]
    return g.op("Relu", [g.op("Add", [y, identity])], n)


def _basic_block(g: _Graph, layer: L.BasicBlock, x: str, shape, train: bool) -> str:
    (c1, s1), (b1, sb1), (c2, s2), (b2, sb2) = layer.parts(shape)
    y = g.op("Relu", [_batchnorm(g=g, layer=b1, x=_conv(g, c1, x, s1), shape=sb1, train=train)])
    y = _batchnorm(g=g, layer=b2, x=_conv(g, c2, y, s2), shape=sb2, train=train)
    identity = x
    extra = layer.filters - shape[0]
    if layer.stride != 1 or extra:
        # Option A: every stride-th pixel, new channels zero-padded evenly on both sides.
        s = layer.stride
        identity = g.op(
            "Slice", [x, g.const([0, 0]), g.const([2**62, 2**62]), g.const([2, 3]), g.const([s, s])]
        )
        before, after = extra // 2, extra - extra // 2
        identity = g.op(
            "Pad", [identity, g.const([0, before, 0, 0, 0, after, 0, 0])], mode="constant"
        )
    return g.op("Relu", [g.op("Add", [y, identity])], layer.name)


def _lstm_stack(g: _Graph, layer: L.LSTM, x: str, shape) -> str:
    """x: (T, N, F) time-major, as ONNX's LSTM wants; returns (T, N, hidden)."""
    h, fin = layer.hidden, shape[-1]
    axis0 = g.const([0])
    for i in range(layer.layers):
        n = f"{layer.name}.l{i}"
        # Canonical W (4H, F), R (4H, H), B (8H,) gain the direction axis ONNX expects.
        w = g.op("Unsqueeze", [g.param(f"{n}.W", (4 * h, fin)), axis0])
        r = g.op("Unsqueeze", [g.param(f"{n}.R", (4 * h, h)), axis0])
        b = g.op("Unsqueeze", [g.param(f"{n}.B", (8 * h,)), axis0])
        y = g.op("LSTM", [x, w, r, b], n, hidden_size=h, direction="forward")
        x = g.op("Squeeze", [y, g.const([1])])  # (T, 1, N, H) -> (T, N, H)
        fin = h
    return x


def _matmul_t(g: _Graph, x: str, weight: str) -> str:
    """x @ weight^T for a canonical (out, in) matrix, on any number of leading axes."""
    return g.op("MatMul", [x, g.op("Transpose", [weight], perm=[1, 0])])


def _linear(g: _Graph, name: str, x: str, *, d_in: int, d_out: int) -> str:
    y = _matmul_t(g, x, g.param(f"{name}.weight", (d_out, d_in)))
    return g.op("Add", [y, g.param(f"{name}.bias", (d_out,))], name)


def _layer_norm(g: _Graph, name: str, x: str, *, d: int, eps: float) -> str:
    scale, bias = g.param(f"{name}.weight", (d,)), g.param(f"{name}.bias", (d,))
    return g.op("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=eps)


def score_scale(head_dim: int) -> float:
    """Attention's softmax scale, 1 / sqrt(dh)."""
    return 1 / np.sqrt(head_dim)


def causal_mask(t: int) -> np.ndarray:
    """(T, T) added to the scores: -inf at keys after the query's position (no weight)."""
    return np.triu(np.full((t, t), -np.inf, np.float32), k=1)


def _attention(g: _Graph, layer: L.TransformerBlock, x: str, shape) -> str:
    t, d = shape
    h = layer.heads
    qkv = g.op(
        "Reshape",
        [
            _linear(g, f"{layer.name}.attn.qkv", x, d_in=d, d_out=3 * d),
            g.const([0, t, 3, h, d // h]),
        ],
    )
    qkv = g.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])  # (3, N, heads, T, dh)
    q, k, v = (
        g.op("Squeeze", [part, g.const([0])])
        for part in g.op("Split", [qkv, g.const([1, 1, 1])], axis=0, n_out=3)
    )
    scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = g.op("Mul", [scores, g.const(score_scale(d // h), np.float32)])
    if layer.causal:
        scores = g.op("Add", [scores, g.const(causal_mask(t), np.float32, "causal_mask")])
    y = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
    y = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]), g.const([0, t, d])])
    return _linear(g, f"{layer.name}.attn.out", y, d_in=d, d_out=d)


def _transformer_block(g: _Graph, layer: L.TransformerBlock, x: str, shape) -> str:
    d, n, eps = shape[-1], layer.name, layer.eps

    def mlp(z):
        z = g.op(
            "Gelu",
            [_linear(g, f"{n}.mlp.fc", z, d_in=d, d_out=layer.ff)],
            approximate=_GELU[layer.gelu],
        )
        return _linear(g, f"{n}.mlp.proj", z, d_in=layer.ff, d_out=d)

    if layer.pre_norm:
        x = g.op(
            "Add", [x, _attention(g, layer, _layer_norm(g, f"{n}.ln1", x, d=d, eps=eps), shape)]
        )
        return g.op("Add", [x, mlp(_layer_norm(g, f"{n}.ln2", x, d=d, eps=eps))], n)
    x = _layer_norm(g, f"{n}.ln1", g.op("Add", [x, _attention(g, layer, x, shape)]), d=d, eps=eps)
    return _layer_norm(g, f"{n}.ln2", g.op("Add", [x, mlp(x)]), d=d, eps=eps)


_GELU = {"erf": "none", "tanh": "tanh"}


def _token_embedding(g: _Graph, layer: L.TokenEmbedding, x: str, shape) -> str:
    t, d = shape[0], layer.dim
    word = g.param(f"{layer.name}.word", (layer.vocab, d))
    y = g.op("Gather", [word, x], axis=0)
    positions = g.param(f"{layer.name}.position", (layer.positions, d))
    y = g.op("Add", [y, g.op("Slice", [positions, g.const([0]), g.const([t]), g.const([0])])])
    if layer.types:  # every token has type 0
        types = g.param(f"{layer.name}.token_type", (layer.types, d))
        y = g.op("Add", [y, g.op("Gather", [types, g.const(0)], axis=0)])
    return g.op("Identity", [y], layer.name)


def _masked_lm_head(g: _Graph, layer: L.MaskedLMHead, x: str, shape) -> str:
    d, n = shape[-1], layer.name
    y = g.op("Gelu", [_linear(g, f"{n}.transform", x, d_in=d, d_out=d)], approximate="none")
    y = _layer_norm(g, f"{n}.ln", y, d=d, eps=layer.eps)
    y = _matmul_t(g, y, layer.tied)  # the word embeddings, already an initializer
    return g.op("Add", [y, g.param(f"{n}.bias", (layer.vocab,))], n)


def _layer(g: _Graph, layer, x: str, shape, *, train: bool) -> str:
    """One layer of the spec as ONNX nodes after x; its output."""
    if isinstance(layer, L.Embedding):
        weight = g.param(f"{layer.name}.weight", (layer.vocab, layer.dim))
        return g.op("Gather", [weight, x], layer.name, axis=0)
    if isinstance(layer, L.BatchNorm):
        return _batchnorm(g=g, layer=layer, x=x, shape=shape, train=train)
    if isinstance(layer, L.Bottleneck):
        return _bottleneck(g=g, layer=layer, x=x, shape=shape, train=train)
    if isinstance(layer, L.BasicBlock):
        return _basic_block(g=g, layer=layer, x=x, shape=shape, train=train)
    if isinstance(layer, L.ReLU | L.Sigmoid):
        return g.op("Relu" if isinstance(layer, L.ReLU) else "Sigmoid", [x])
    if isinstance(layer, L.MaxPool | L.AvgPool):
        p = layer.pad if isinstance(layer, L.MaxPool) else 0
        return g.op(
            "MaxPool" if isinstance(layer, L.MaxPool) else "AveragePool",
            [x],
            kernel_shape=[layer.kernel] * 2,
            strides=[layer.stride] * 2,
            pads=[p, p, p, p],
            ceil_mode=0,
        )
    if isinstance(layer, L.GlobalAvgPool):
        return g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    if isinstance(layer, L.Flatten):
        return g.op("Flatten", [x], axis=1)  # channels-first order, as the spec flattens
    if isinstance(layer, L.LayerNorm):
        return _layer_norm(g, layer.name, x, d=shape[-1], eps=layer.eps)
    if isinstance(layer, L.TiedLMHead):
        return _matmul_t(g, x, layer.tied)
    for kind, make in _LAYERS.items():
        if isinstance(layer, kind):
            return make(g, layer, x, shape)
    raise TypeError(f"no ONNX operator for {type(layer).__name__}")


# layers made by a function of (graph, layer, input, output shape)
_LAYERS = {
    L.Dense: _dense,
    L.Conv: _conv,
    L.LSTM: _lstm_stack,
    L.TokenEmbedding: _token_embedding,
    L.TransformerBlock: _transformer_block,
    L.MaskedLMHead: _masked_lm_head,
}


def build_graph(
    spec: Spec, weights: dict[str, np.ndarray] | None = None, mode: str = "infer"
) -> tuple[onnx.ModelProto, list[tuple[str, tuple[int, ...]]]]:
    """The ONNX model of spec, and its canonical parameters (name, shape) in order.

    With weights=None the model has no parameter initializers (the file writer adds
    them as external data one at a time, so no full copy of the weights is held).
    """
    if mode not in ("infer", "train"):
        raise ValueError(f"unknown graph mode {mode!r}")
    train = mode == "train"
    g = _Graph(weights)
    x = INPUT
    if spec.time_major:
        x = g.op("Transpose", [x], perm=[1, 0])  # (N, T) -> (T, N): time-major inside
    for layer, shape in spec.shapes:
        x = _layer(g, layer, x, shape, train=train)
    if spec.time_major:
        x = g.op("Transpose", [x], perm=[1, 0, 2])  # back to (N, T, classes)
    g.nodes.append(helper.make_node("Identity", [x], [OUTPUT], name="output"))

    if spec.sequence:
        inp = helper.make_tensor_value_info(INPUT, TensorProto.INT64, ["N", spec.input_shape[0]])
    else:
        inp = helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, ["N", *spec.input_shape])
    out = helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["N", *spec.output_shape])
    graph = helper.make_graph(
        g.nodes, f"{spec.id}_{spec.scale}_{mode}", [inp], [out], initializer=g.inits
    )
    model = helper.make_model(
        graph,
        producer_name="xfbench",
        producer_version="1",
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    model.ir_version = IR_VERSION
    model.doc_string = f"{spec.paper_name}, {spec.scale} size: canonical xfbench network ({mode})"
    return model, g.params
