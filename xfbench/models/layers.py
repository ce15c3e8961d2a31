"""Framework-neutral layers: shapes, parameters and multiply-accumulates.

Shapes are per sample and channels-first, as ONNX stores them: (C, H, W) for
images, (F,) for feature vectors, (T,) for token ids and (T, F) for sequences.
Every layer derives its output shape, its parameters (name, shape) and its
forward MACs from its input shape, so counts are computed, never typed in.

Only matrix products are counted as MACs (convolutions, dense layers, LSTM gate
products): the usual convention, and the one the table of docs/models.md follows.
Activations, pooling, normalisation and additions are not counted.

Parameter names and layouts are the canonical ones of the ONNX exchange:
conv weights (O, I, KH, KW); dense weights (out, in) as ONNX Gemm with transB;
LSTM W (4H, in), R (4H, H) and B (8H,) with gates in ONNX order i, o, f, c and
the input bias before the recurrent bias.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Param:
    """One trainable tensor: its canonical name, shape and initial distribution.

    init is "uniform" (bound = 1/sqrt(fan_in), PyTorch's default for conv,
    dense and LSTM), "normal" (N(0, std), embeddings; the transformers' weights with
    std 0.02, as BERT and GPT-2 start), "ones" or "zeros".
    """

    name: str
    shape: Shape
    init: str
    fan_in: int = 1
    std: float = 1.0

    @property
    def size(self) -> int:
        return prod(self.shape)


def _pool_out(n: int, k: int, s: int, p: int = 0) -> int:
    out = (n + 2 * p - k) // s + 1  # floor, as every framework's VALID pooling
    if out < 1:
        raise ValueError(f"input of {n} is too small for a window of {k}")
    return out


class Layer:
    """Base: a layer maps an input shape to an output shape."""

    def out_shape(self, x: Shape) -> Shape:
        return x

    def params(self, x: Shape) -> list[Param]:
        return []

    def macs(self, x: Shape) -> int:
        return 0

    def activations(self, x: Shape) -> int:
        """Values one sample's forward pass produces here: what training keeps for the
        backward pass (a lower bound: frameworks may keep more)."""
        return prod(self.out_shape(x))


@dataclass(frozen=True)
class Dense(Layer):
    """Fully connected on the last axis (applied at every time step of a sequence)."""

    name: str
    units: int
    bias: bool = True

    def out_shape(self, x):
        return x[:-1] + (self.units,)

    def params(self, x):
        fan_in = x[-1]
        ps = [Param(f"{self.name}.weight", (self.units, fan_in), "uniform", fan_in)]
        if self.bias:
            ps.append(Param(f"{self.name}.bias", (self.units,), "uniform", fan_in))
        return ps

    def macs(self, x):
        return prod(x[:-1]) * x[-1] * self.units


@dataclass(frozen=True)
class Conv(Layer):
    """2-D convolution with explicit symmetric padding (never "same")."""

    name: str
    filters: int
    kernel: int
    stride: int = 1
    pad: int = 0
    bias: bool = True

    def out_shape(self, x):
        _, h, w = x
        return (
            self.filters,
            _pool_out(h, self.kernel, self.stride, self.pad),
            _pool_out(w, self.kernel, self.stride, self.pad),
        )

    def params(self, x):
        fan_in = x[0] * self.kernel * self.kernel
        ps = [
            Param(
                f"{self.name}.weight",
                (self.filters, x[0], self.kernel, self.kernel),
                "uniform",
                fan_in,
            )
        ]
        if self.bias:
            ps.append(Param(f"{self.name}.bias", (self.filters,), "uniform", fan_in))
        return ps

    def macs(self, x):
        c, h, w = self.out_shape(x)
        return c * h * w * x[0] * self.kernel * self.kernel


@dataclass(frozen=True)
class BatchNorm(Layer):
    """Batch statistics in training, running statistics in evaluation.

    momentum is PyTorch's convention (new = (1 - m) * old + m * batch); Keras's
    momentum is 1 - m. Running mean and variance are buffers, not parameters.
    """

    name: str
    eps: float = 1e-5
    momentum: float = 0.1

    def params(self, x):
        c = x[0]
        return [
            Param(f"{self.name}.weight", (c,), "ones"),
            Param(f"{self.name}.bias", (c,), "zeros"),
        ]


@dataclass(frozen=True)
class ReLU(Layer):
    name: str = "relu"


@dataclass(frozen=True)
class Sigmoid(Layer):
    name: str = "sigmoid"


@dataclass(frozen=True)
class MaxPool(Layer):
    kernel: int
    stride: int
    name: str = "maxpool"
    pad: int = 0

    def out_shape(self, x):
        c, h, w = x
        return (
            c,
            _pool_out(h, self.kernel, self.stride, self.pad),
            _pool_out(w, self.kernel, self.stride, self.pad),
        )


@dataclass(frozen=True)
class AvgPool(Layer):
    kernel: int
    stride: int
    name: str = "avgpool"

    def out_shape(self, x):
        c, h, w = x
        return (c, _pool_out(h, self.kernel, self.stride), _pool_out(w, self.kernel, self.stride))


@dataclass(frozen=True)
class GlobalAvgPool(Layer):
    """Mean over H and W: (C, H, W) -> (C,)."""

    name: str = "gap"

    def out_shape(self, x):
        return (x[0],)


@dataclass(frozen=True)
class Flatten(Layer):
    """(C, H, W) -> (C*H*W,) in channels-first order, as ONNX flattens.

    An adapter computing channels-last must flatten in this same order (or
    permute the next dense layer's weights) for weights to be interchangeable.
    """

    name: str = "flatten"

    def out_shape(self, x):
        return (prod(x),)


@dataclass(frozen=True)
class Bottleneck(Layer):
    """ResNet v1.5 bottleneck: 1x1 -> 3x3 (stride here) -> 1x1 (x4), BN after each.

    The projection shortcut (1x1 conv with the block's stride, then BN) is
    present when the block changes shape.
    """

    name: str
    width: int
    stride: int = 1
    expansion: int = 4

    def projected(self, x: Shape) -> bool:
        return self.stride != 1 or x[0] != self.width * self.expansion

    def parts(self, x: Shape) -> list[tuple[Layer, Shape]]:
        """The block's convolutions and norms, each with its input shape."""
        n = self.name
        seq: list[Layer] = [
            Conv(f"{n}.conv1", self.width, 1, bias=False),
            BatchNorm(f"{n}.bn1"),
            Conv(
                name=f"{n}.conv2",
                filters=self.width,
                kernel=3,
                stride=self.stride,
                pad=1,
                bias=False,
            ),
            BatchNorm(f"{n}.bn2"),
            Conv(f"{n}.conv3", self.width * self.expansion, 1, bias=False),
            BatchNorm(f"{n}.bn3"),
        ]
        out, shape = [], x
        for layer in seq:
            out.append((layer, shape))
            shape = layer.out_shape(shape)
        if self.projected(x):
            proj = Conv(
                f"{n}.downsample.conv", self.width * self.expansion, 1, self.stride, bias=False
            )
            out.append((proj, x))
            out.append((BatchNorm(f"{n}.downsample.bn"), proj.out_shape(x)))
        return out

    def out_shape(self, x):
        c, h, w = x
        return (
            self.width * self.expansion,
            _pool_out(h, 3, self.stride, 1),
            _pool_out(w, 3, self.stride, 1),
        )

    def params(self, x):
        return [p for layer, s in self.parts(x) for p in layer.params(s)]

    def macs(self, x):
        return sum(layer.macs(s) for layer, s in self.parts(x))

    def activations(self, x):
        return sum(layer.activations(s) for layer, s in self.parts(x)) + prod(self.out_shape(x))


@dataclass(frozen=True)
class BasicBlock(Layer):
    """CIFAR ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN, add shortcut, ReLU.

    When the block changes shape its shortcut is "option A": every second
    pixel, new channels zero-padded (split evenly before and after), no weights.
    """

    name: str
    filters: int
    stride: int = 1

    def parts(self, x: Shape) -> list[tuple[Layer, Shape]]:
        n = self.name
        c1 = Conv(
            name=f"{n}.conv1", filters=self.filters, kernel=3, stride=self.stride, pad=1, bias=False
        )
        mid = c1.out_shape(x)
        c2 = Conv(name=f"{n}.conv2", filters=self.filters, kernel=3, stride=1, pad=1, bias=False)
        return [(c1, x), (BatchNorm(f"{n}.bn1"), mid), (c2, mid), (BatchNorm(f"{n}.bn2"), mid)]

    def out_shape(self, x):
        return self.parts(x)[0][0].out_shape(x)

    def params(self, x):
        return [p for layer, s in self.parts(x) for p in layer.params(s)]

    def macs(self, x):
        return sum(layer.macs(s) for layer, s in self.parts(x))

    def activations(self, x):
        return sum(layer.activations(s) for layer, s in self.parts(x)) + prod(self.out_shape(x))


@dataclass(frozen=True)
class Embedding(Layer):
    """Token ids (T,) -> vectors (T, dim)."""

    name: str
    vocab: int
    dim: int

    def out_shape(self, x):
        return x + (self.dim,)

    def params(self, x):
        return [Param(f"{self.name}.weight", (self.vocab, self.dim), "normal")]


@dataclass(frozen=True)
class LSTM(Layer):
    """Stacked unidirectional LSTM over (T, F) -> (T, hidden), zero initial state.

    Two bias vectors per layer (input and recurrent), as ONNX, PyTorch and cuDNN
    keep them; a framework with one bias uses their sum. The forget-gate biases
    start at zero.
    """

    name: str
    hidden: int
    layers: int = 1

    def out_shape(self, x):
        return x[:-1] + (self.hidden,)

    def params(self, x):
        h, ps, fin = self.hidden, [], x[-1]
        for i in range(self.layers):
            n = f"{self.name}.l{i}"
            ps += [
                Param(f"{n}.W", (4 * h, fin), "uniform", h),
                Param(f"{n}.R", (4 * h, h), "uniform", h),
                Param(f"{n}.B", (8 * h,), "lstm_bias", h),
            ]
            fin = h
        return ps

    def macs(self, x):
        steps, fin, h, total = prod(x[:-1]), x[-1], self.hidden, 0
        for _ in range(self.layers):
            total += steps * 4 * h * (fin + h)
            fin = h
        return total

    def activations(self, x):
        # per layer and step: the four gates, the cell state and the output
        return self.layers * prod(x[:-1]) * 6 * self.hidden


# -- transformers -------------------------------------------------------------------------
# Shapes are per sample: token ids (T,), hidden states (T, dim). Weights start as BERT's and
# GPT-2's do: N(0, 0.02) for matrices and embeddings, zero biases, LayerNorm ones and zeros.
INIT_STD = 0.02


def _normal(name: str, shape: Shape) -> Param:
    return Param(name, shape, "normal", std=INIT_STD)


def _zeros(name: str, n: int) -> Param:
    return Param(name, (n,), "zeros")


@dataclass(frozen=True)
class TokenEmbedding(Layer):
    """Token ids (T,) -> word + position (+ token type 0) embeddings, summed: (T, dim).

    Learned positions 0..T-1 of `positions`; `types` > 0 adds the embedding of token type 0
    (BERT's one segment, no padding), so that table is part of the network and its row 0
    trains, as in BERT."""

    name: str
    vocab: int
    dim: int
    positions: int
    types: int = 0

    def out_shape(self, x):
        if x[0] > self.positions:
            raise ValueError(f"{x[0]} tokens is more than the {self.positions} positions")
        return x + (self.dim,)

    def params(self, x):
        ps = [
            _normal(f"{self.name}.word", (self.vocab, self.dim)),
            _normal(f"{self.name}.position", (self.positions, self.dim)),
        ]
        if self.types:
            ps.append(_normal(f"{self.name}.token_type", (self.types, self.dim)))
        return ps


@dataclass(frozen=True)
class LayerNorm(Layer):
    """Over the last axis, with a scale (ones) and a shift (zeros)."""

    name: str
    eps: float

    def params(self, x):
        return [Param(f"{self.name}.weight", x[-1:], "ones"), _zeros(f"{self.name}.bias", x[-1])]


@dataclass(frozen=True)
class TransformerBlock(Layer):
    """One encoder (BERT) or decoder (GPT-2) layer on (T, dim), no dropout, no padding:

    post-norm (BERT): x = LN1(x + Attn(x)); x = LN2(x + MLP(x))
    pre-norm (GPT-2): x = x + Attn(LN1(x)); x = x + MLP(LN2(x))

    Attn: one product for queries, keys and values (`attn.qkv`, rows q, k, v, each head's
    dh = dim / heads rows together), softmax(q k^T / sqrt(dh)) v per head (causal: each
    position sees itself and those before it), heads concatenated, then `attn.out`.
    MLP: `mlp.fc` (dim -> ff), GELU (erf, or tanh's approximation), `mlp.proj` (ff -> dim).
    """

    name: str
    heads: int
    ff: int
    eps: float
    causal: bool = False
    pre_norm: bool = False
    gelu: str = "erf"  # "erf" (BERT) or "tanh" (GPT-2)
    # the initial standard deviation of the two projections that feed the residual stream
    # (attn.out, mlp.proj): GPT-2 scales them by 1/sqrt(2 x layers), BERT does not
    residual_std: float = INIT_STD

    def params(self, x):
        d, n = x[-1], self.name
        if d % self.heads:
            raise ValueError(f"{n}: width {d} is not a multiple of {self.heads} heads")
        return [
            _normal(f"{n}.attn.qkv.weight", (3 * d, d)),
            _zeros(f"{n}.attn.qkv.bias", 3 * d),
            Param(f"{n}.attn.out.weight", (d, d), "normal", std=self.residual_std),
            _zeros(f"{n}.attn.out.bias", d),
            *LayerNorm(f"{n}.ln1", self.eps).params(x),
            _normal(f"{n}.mlp.fc.weight", (self.ff, d)),
            _zeros(f"{n}.mlp.fc.bias", self.ff),
            Param(f"{n}.mlp.proj.weight", (d, self.ff), "normal", std=self.residual_std),
            _zeros(f"{n}.mlp.proj.bias", d),
            *LayerNorm(f"{n}.ln2", self.eps).params(x),
        ]

    def macs(self, x):
        # The four projections and the feed-forward at every position, and attention's two
        # products (q k^T and weights x v): T x T x dh per head each, counted whole even when
        # causal (as published FLOP counts do; a causal kernel may skip the upper half).
        t, d = x
        return t * (4 * d * d + 2 * d * self.ff) + 2 * t * t * d

    def activations(self, x):
        t, d = x
        # q, k, v, the heads' output, the projection, two norms, the MLP's two inner tensors
        # and its output. Not attention's T x T scores: fused kernels (flash, cuDNN,
        # memory-efficient) recompute them in the backward pass instead of keeping them.
        return t * (3 * d) + t * d * 4 + 2 * t * self.ff + t * d


@dataclass(frozen=True)
class MaskedLMHead(Layer):
    """BERT's masked-LM head at every position: dense dim -> dim, GELU (erf), LayerNorm,
    then the decoder to the vocabulary with the word embeddings' matrix (tied, so no weight
    of its own) and its own bias."""

    name: str
    vocab: int
    eps: float
    tied: str  # the canonical name of the embedding matrix it shares

    def out_shape(self, x):
        return x[:-1] + (self.vocab,)

    def params(self, x):
        d = x[-1]
        return [
            _normal(f"{self.name}.transform.weight", (d, d)),
            _zeros(f"{self.name}.transform.bias", d),
            *LayerNorm(f"{self.name}.ln", self.eps).params(x),
            _zeros(f"{self.name}.bias", self.vocab),
        ]

    def macs(self, x):
        t, d = x
        return t * (d * d + d * self.vocab)

    def activations(self, x):
        t, d = x
        return 3 * t * d + t * self.vocab


@dataclass(frozen=True)
class TiedLMHead(Layer):
    """GPT-2's language-model head: logits = x E^T with the token embedding E (tied, no bias)."""

    name: str
    vocab: int
    tied: str

    def out_shape(self, x):
        return x[:-1] + (self.vocab,)

    def macs(self, x):
        return x[0] * x[1] * self.vocab
