"""A network's framework-neutral specification, its synthetic data and its initial weights."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from math import prod

import numpy as np

from xfbench.models.layers import (
    LSTM,
    BasicBlock,
    Bottleneck,
    Conv,
    Dense,
    Embedding,
    Layer,
    Param,
    Shape,
    TransformerBlock,
)


@dataclass(frozen=True)
class Spec:
    """Everything an adapter needs to build one network, and what it costs.

    input_shape is one sample's shape, channels-first; token inputs are (T,).
    For sequence models the loss is taken at every time step (labels (N, T)).
    """

    id: str
    paper_name: str
    input_shape: Shape
    classes: int
    layers: tuple[Layer, ...]
    batch_size: int  # Table 7's mini-batch
    input_kind: str = "float"  # "float" or "tokens"
    vocab: int = 0  # token ids are uniform in [0, vocab)
    clip_norm: float | None = None  # global gradient-norm clip before the update
    table7_row: str | None = None  # the row of Shi et al.'s Table 7, where it has one
    scale: str = "full"  # "full" or "smoke"
    lr: float = 0.01
    momentum: float = 0.9
    notes: tuple[str, ...] = field(default=())
    # The transformers' (docs/models.md): what the labels are, and AdamW.
    objective: str = "classes"  # "classes" (drawn from the seed), "masked_lm", "next_token"
    mask_token: int = 0  # masked_lm: the id the masked positions hold in the input
    optimizer: str = "sgd"  # "sgd" (with momentum) or "adamw"
    betas: tuple[float, float] = (0.9, 0.999)  # adamw
    eps: float = 1e-8  # adamw
    weight_decay: float = 0.0  # adamw, decoupled, on the tensors decays() names
    # (tokens, batch) on accelerators, where it differs from the CPU's (input_shape, batch_size)
    accelerator_geometry: tuple[int, int] | None = None

    @cached_property
    def shapes(self) -> list[tuple[Layer, Shape]]:
        """Each layer with its per-sample input shape."""
        out, x = [], self.input_shape
        for layer in self.layers:
            out.append((layer, x))
            x = layer.out_shape(x)
        expected = self.output_shape
        if x != expected:
            raise ValueError(f"{self.id}: layers end in {x}, expected {expected}")
        return out

    @property
    def sequence(self) -> bool:
        return self.input_kind == "tokens"

    @property
    def time_major(self) -> bool:
        """The LSTM language models compute time-major, (T, N); the transformers batch-first."""
        return bool(self.layer(LSTM))

    @property
    def transformer(self) -> bool:
        return bool(self.layer(TransformerBlock))

    @property
    def tokens(self) -> int:
        """Tokens per sample (0 for images and feature vectors)."""
        return self.input_shape[0] if self.sequence else 0

    @cached_property
    def loss_positions(self) -> tuple[int, ...] | None:
        """The positions the loss is taken at, None for all: masked_lm's fixed 15 % of the
        positions, drawn from a seed of their own (the same in every framework and batch)."""
        if self.objective != "masked_lm":
            return None
        t = self.input_shape[0]
        rng = np.random.default_rng([0, 3])
        return tuple(sorted(int(i) for i in rng.choice(t, max(1, round(0.15 * t)), replace=False)))

    def decays(self, name: str) -> bool:
        """Whether AdamW's weight decay applies to a parameter: weight matrices and
        embeddings (2 or more axes), not biases or LayerNorm (one axis)."""
        shapes = {p.name: p.shape for p in self.params}
        return self.weight_decay > 0 and len(shapes[name]) >= 2

    @property
    def output_shape(self) -> Shape:
        return (self.input_shape[0], self.classes) if self.sequence else (self.classes,)

    @cached_property
    def params(self) -> list[Param]:
        ps = [p for layer, x in self.shapes for p in layer.params(x)]
        names = [p.name for p in ps]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.id}: duplicate parameter names")
        return ps

    @cached_property
    def param_count(self) -> int:
        return sum(p.size for p in self.params)

    @cached_property
    def forward_macs(self) -> int:
        """Multiply-accumulates of one sample's forward pass."""
        return sum(layer.macs(x) for layer, x in self.shapes)

    @cached_property
    def activations(self) -> int:
        """Values one sample's forward pass produces (Layer.activations), input included."""
        return prod(self.input_shape) + sum(layer.activations(x) for layer, x in self.shapes)

    def forward_flops(self, batch: int) -> int:
        return 2 * self.forward_macs * batch

    def train_flops(self, batch: int) -> int:
        """Forward plus gradients for inputs and for weights: 3x the forward."""
        return 3 * self.forward_flops(batch)

    def flops(self, task: str, batch: int) -> int:
        return self.train_flops(batch) if task == "train" else self.forward_flops(batch)

    def label_shape(self, batch: int) -> Shape:
        return (batch, self.input_shape[0]) if self.sequence else (batch,)

    def layer(self, kind: type) -> list[Layer]:
        """The layers of one kind, in order (blocks are not unpacked)."""
        return [layer for layer in self.layers if isinstance(layer, kind)]


def synthetic_batch(spec: Spec, batch: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The synthetic mini-batch every framework gets: inputs N(0, 1) float32 (token
    ids uniform int64 for sequence models) and int64 labels uniform over the classes."""
    rng = np.random.default_rng([seed, 1])
    if spec.objective == "next_token":  # labels: each position's next token
        ids = rng.integers(0, spec.vocab, size=(batch, spec.input_shape[0] + 1), dtype=np.int64)
        return np.ascontiguousarray(ids[:, :-1]), np.ascontiguousarray(ids[:, 1:])
    if spec.objective == "masked_lm":  # labels: the tokens the mask hides
        ids = rng.integers(0, spec.vocab, size=(batch,) + spec.input_shape, dtype=np.int64)
        x = ids.copy()
        x[:, list(spec.loss_positions)] = spec.mask_token
        return x, ids
    if spec.sequence:
        x = rng.integers(0, spec.vocab, size=(batch,) + spec.input_shape, dtype=np.int64)
    else:
        x = rng.standard_normal((batch,) + spec.input_shape, dtype=np.float32)
    y = rng.integers(0, spec.classes, size=spec.label_shape(batch), dtype=np.int64)
    return x, y


# A trained transformer's ranges, which the checks' weights stand at (harness/
# equivalence.trained_range; the decoders' weights, models/seeded.py): the standard
# deviations its GELU inputs and attention scores reach, where the initial weights (std
# 0.02) keep both near zero and a swapped GELU or a wrong softmax scale changes the logits
# by less than fp32's round-off.
TRAINED_GELU_STD = 1.5
TRAINED_SCORE_STD = 3.0


def init_param(p: Param, seed: int, index: int) -> np.ndarray:
    """The canonical initial value of one parameter; each has its own stream, so
    any one can be drawn without drawing the others."""
    rng = np.random.default_rng([seed, 2, index])
    if p.init == "ones":
        return np.ones(p.shape, np.float32)
    if p.init == "zeros":
        return np.zeros(p.shape, np.float32)
    if p.init == "normal":
        return rng.standard_normal(p.shape, dtype=np.float32) * np.float32(p.std)
    bound = np.float32(1.0 / np.sqrt(p.fan_in))
    value = rng.uniform(-bound, bound, p.shape).astype(np.float32)
    if p.init == "lstm_bias":
        h = p.shape[0] // 8
        value[2 * h : 3 * h] = 0.0  # forget gate of the input bias (gate order i, o, f, c)
        value[6 * h : 7 * h] = 0.0  # and of the recurrent bias
    return value


def initial_weights(spec: Spec, seed: int = 0) -> dict[str, np.ndarray]:
    """All parameters in canonical (ONNX) names and layouts, float32."""
    return {p.name: init_param(p, seed, i) for i, p in enumerate(spec.params)}


def describe(spec: Spec) -> str:
    """A one-line summary for logs and errors."""
    kinds = {
        Conv: "conv",
        Dense: "dense",
        Bottleneck: "bottleneck",
        BasicBlock: "basic block",
        LSTM: "lstm",
        Embedding: "embedding",
        TransformerBlock: "transformer block",
    }
    counts = {name: len(spec.layer(kind)) for kind, name in kinds.items() if spec.layer(kind)}
    parts = ", ".join(f"{n} {k}" for k, n in counts.items())
    return (
        f"{spec.id} ({spec.scale}): input {spec.input_shape}, {spec.classes} classes, "
        f"{parts}; {spec.param_count:,} parameters, {spec.forward_macs / 1e6:,.2f} M MACs/sample"
    )
