"""The networks of docs/models.md, each as a function of a width multiplier: Shi et al.'s
nine and two transformers beyond the paper (BERT-base, GPT-2 small); and a decoder the size
buyers serve, GPT-2's architecture at GPT-3 6.7B's shape, which the generation suite
decodes (DECODERS: no other suite trains or runs it).

width=1 is the exact network of the paper; tests use the smoke sizes below,
which keep every code path (same layer kinds, depth, strides, padding, flatten
order) but shrink channels, hidden units and, where the geometry allows, images.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from xfbench.models.layers import (
    INIT_STD,
    LSTM,
    AvgPool,
    BasicBlock,
    BatchNorm,
    Bottleneck,
    Conv,
    Dense,
    Embedding,
    Flatten,
    GlobalAvgPool,
    LayerNorm,
    MaskedLMHead,
    MaxPool,
    ReLU,
    Sigmoid,
    TiedLMHead,
    TokenEmbedding,
    TransformerBlock,
)
from xfbench.models.spec import Spec


def _w(n: int, width: float) -> int:
    return max(1, round(n * width))


def _fcn(
    id: str,
    paper: str,
    row: str | None,
    features: int,
    hidden: list[int],
    classes: int,
    batch: int,
    width: float,
    scale_io: bool = True,
) -> Spec:
    io = _w(features, width) if scale_io else features
    out = _w(classes, width) if scale_io else classes
    layers = []
    for i, units in enumerate(hidden):
        layers += [Dense(f"fc{i + 1}", _w(units, width)), Sigmoid()]
    layers.append(Dense(f"fc{len(hidden) + 1}", out))
    return Spec(
        id=id,
        paper_name=paper,
        input_shape=(io,),
        classes=out,
        layers=tuple(layers),
        batch_size=batch,
        table7_row=row,
    )


def fcn5(width: float = 1.0, size: int | None = None) -> Spec:
    return _fcn(
        id="fcn5",
        paper="FCN-5 / FCN-S",
        row="FCN-S",
        features=26752,
        hidden=[2048] * 3,
        classes=26752,
        batch=64,
        width=width,
    )


def fcn8(width: float = 1.0, size: int | None = None) -> Spec:
    return _fcn(
        id="fcn8",
        paper="FCN-8",
        row=None,
        features=26752,
        hidden=[2048] * 6,
        classes=26752,
        batch=64,
        width=width,
    )


def fcn_r(width: float = 1.0, size: int | None = None) -> Spec:
    # MNIST's 784 pixels and 10 classes are the data's, not the network's width.
    return _fcn(
        id="fcn_r",
        paper="FCN-R (MNIST)",
        row="FCN-R",
        features=784,
        hidden=[2048, 4096, 1024],
        classes=10,
        batch=1024,
        width=width,
        scale_io=False,
    )


def alexnet(width: float = 1.0, size: int | None = None) -> Spec:
    w = lambda n: _w(n, width)  # noqa: E731
    size = size or 224
    layers = (
        Conv(name="conv1", filters=w(96), kernel=11, stride=4, pad=2),
        ReLU(),
        MaxPool(3, 2),
        Conv(name="conv2", filters=w(256), kernel=5, stride=1, pad=2),
        ReLU(),
        MaxPool(3, 2),
        Conv(name="conv3", filters=w(384), kernel=3, stride=1, pad=1),
        ReLU(),
        Conv(name="conv4", filters=w(384), kernel=3, stride=1, pad=1),
        ReLU(),
        Conv(name="conv5", filters=w(256), kernel=3, stride=1, pad=1),
        ReLU(),
        MaxPool(3, 2),
        Flatten(),
        Dense("fc6", w(4096)),
        ReLU(),
        Dense("fc7", w(4096)),
        ReLU(),
        Dense("fc8", 1000),
    )
    return Spec(
        id="alexnet",
        paper_name="AlexNet / AlexNet-S",
        input_shape=(3, size, size),
        classes=1000,
        layers=layers,
        batch_size=16,
        table7_row="AlexNet-S",
    )


def alexnet_r(width: float = 1.0, size: int | None = None) -> Spec:
    w = lambda n: _w(n, width)  # noqa: E731
    layers = (
        Conv(name="conv1", filters=w(32), kernel=5, stride=1, pad=2),
        ReLU(),
        MaxPool(3, 2),
        Conv(name="conv2", filters=w(32), kernel=5, stride=1, pad=2),
        ReLU(),
        MaxPool(3, 2),
        Conv(name="conv3", filters=w(64), kernel=5, stride=1, pad=2),
        ReLU(),
        AvgPool(3, 2),
        Flatten(),
        Dense("fc4", 10),
    )
    return Spec(
        id="alexnet_r",
        paper_name="AlexNet-R (CIFAR-10)",
        input_shape=(3, 32, 32),
        classes=10,
        layers=layers,
        batch_size=1024,
        table7_row="AlexNet-R",
    )


def resnet50(width: float = 1.0, size: int | None = None) -> Spec:
    w = lambda n: _w(n, width)  # noqa: E731
    layers: list = [
        Conv(name="conv1", filters=w(64), kernel=7, stride=2, pad=3, bias=False),
        BatchNorm("bn1"),
        ReLU(),
        MaxPool(3, 2, pad=1),
    ]
    for stage, (blocks, width_) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512])):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 0) else 1
            layers.append(Bottleneck(f"layer{stage + 1}.{b}", w(width_), stride))
    layers += [GlobalAvgPool(), Dense("fc", 1000)]
    return Spec(
        id="resnet50",
        paper_name="ResNet-50",
        input_shape=(3, size or 224, size or 224),
        classes=1000,
        layers=tuple(layers),
        batch_size=16,
        table7_row="ResNet-50",
    )


def resnet56(width: float = 1.0, size: int | None = None) -> Spec:
    w = lambda n: _w(n, width)  # noqa: E731
    layers: list = [
        Conv(name="conv1", filters=w(16), kernel=3, stride=1, pad=1, bias=False),
        BatchNorm("bn1"),
        ReLU(),
    ]
    for stage, filters in enumerate([16, 32, 64]):
        for b in range(9):
            stride = 2 if (b == 0 and stage > 0) else 1
            layers.append(BasicBlock(f"layer{stage + 1}.{b}", w(filters), stride))
    layers += [GlobalAvgPool(), Dense("fc", 10)]
    return Spec(
        id="resnet56",
        paper_name="ResNet-56 (CIFAR-10)",
        input_shape=(3, size or 32, size or 32),
        classes=10,
        layers=tuple(layers),
        batch_size=128,
        table7_row="ResNet-56",
    )


def _lstm(id: str, steps: int, row: str | None, width: float) -> Spec:
    vocab, dim = _w(10000, width), _w(256, width)
    layers = (Embedding("embed", vocab, dim), LSTM("lstm", dim, 2), Dense("fc", vocab))
    return Spec(
        id=id,
        paper_name=f"LSTM-{steps} (PTB)",
        input_shape=(steps,),
        classes=vocab,
        layers=layers,
        batch_size=128,
        input_kind="tokens",
        vocab=vocab,
        clip_norm=5.0,
        table7_row=row,
    )


def lstm32(width: float = 1.0, size: int | None = None) -> Spec:
    return _lstm("lstm32", 32, "LSTM", width)


def lstm64(width: float = 1.0, size: int | None = None) -> Spec:
    return _lstm("lstm64", 64, None, width)


def _transformer_dims(width: float) -> tuple[int, int, int, int]:
    """(layers, width, heads, feed-forward): the published 12 x 768 with 12 heads and 3072
    at width 1; below it (smoke) 2 layers of width 768 x width with 4 heads."""
    if width == 1:
        return 12, 768, 12, 3072
    d = _w(768, width)
    return 2, d, 4, 4 * d


# Tokens per sequence and batch of the transformers on CPUs: a 2-core training step of
# seconds (about 0.35 TFLOP for either at 4 x 128 tokens). Accelerators take the published
# geometries (accelerator_geometry; docs/models.md says whose).
CPU_TOKENS, CPU_BATCH = 128, 4


def bert_base(width: float = 1.0, size: int | None = None) -> Spec:
    """BERT-base with its masked-LM head (Hugging Face's BertForMaskedLM, no pooler)."""
    n, d, heads, ff = _transformer_dims(width)
    vocab, positions = _w(30522, width), 512 if width == 1 else 64
    embed = TokenEmbedding("embed", vocab, d, positions, types=2)
    layers = [embed, LayerNorm("embed.ln", 1e-12)]
    layers += [TransformerBlock(f"layer{i}", heads, ff, eps=1e-12) for i in range(n)]
    layers.append(MaskedLMHead("mlm", vocab, eps=1e-12, tied="embed.word"))
    return Spec(
        id="bert_base",
        paper_name="BERT-base (masked LM)",
        input_shape=(size or CPU_TOKENS,),
        classes=vocab,
        layers=tuple(layers),
        batch_size=CPU_BATCH,
        input_kind="tokens",
        vocab=vocab,
        objective="masked_lm",
        mask_token=103,  # [MASK] in BERT's vocabulary
        **_ADAMW,
        accelerator_geometry=(128, 64),
    )


def gpt2(width: float = 1.0, size: int | None = None) -> Spec:
    """GPT-2 small (124 M) with its tied language-model head."""
    n, d, heads, ff = _transformer_dims(width)
    vocab, positions = _w(50257, width), 1024 if width == 1 else 64
    return _gpt("gpt2", "GPT-2 small (124M)", (n, d, heads, ff), vocab=vocab,
                positions=positions, size=size, accelerator_geometry=(1024, 64))  # fmt: skip


def gpt3_6_7b(width: float = 1.0, size: int | None = None) -> Spec:
    """GPT-2's layers at GPT-3 6.7B's shape (Brown et al. 2020, Table 2.1: 32 layers of
    width 4,096, 32 heads of 128, 2,048 positions), the vocabulary padded to 50,304 (a
    multiple of 64, as llm.c pads GPT-2's): 6.66 B parameters, 13.3 GB in bf16. Smoke: 2
    layers of width 64 with 4 heads, as GPT-2's smoke network."""
    d = 4096 if width == 1 else _w(4096, width)
    dims = (32, d, 32, 4 * d) if width == 1 else (2, d, 4, 4 * d)
    vocab, positions = _w(50304, width), 2048 if width == 1 else 64
    return _gpt("gpt3_6_7b", "GPT-3 6.7B's shape, GPT-2's layers", dims, vocab=vocab,
                positions=positions, size=size)  # fmt: skip


def _gpt(
    id: str, paper: str, dims: tuple[int, int, int, int], *, vocab: int, positions: int,
    size: int | None, accelerator_geometry: tuple[int, int] | None = None,
) -> Spec:  # fmt: skip
    """GPT-2's decoder at (layers, width, heads, feed-forward), with its tied head."""
    n, d, heads, ff = dims
    layers: list = [TokenEmbedding("embed", vocab, d, positions)]
    # GPT-2 scales the residual projections' initial weights by 1/sqrt(2 x layers), each
    # layer adding two of them to the residual stream (Radford et al. 2019, nanoGPT)
    residual = INIT_STD / math.sqrt(2 * n)
    layers += [
        TransformerBlock(
            f"layer{i}", heads, ff, eps=1e-5, causal=True, pre_norm=True, gelu="tanh",
            residual_std=residual,
        )
        for i in range(n)
    ]  # fmt: skip
    layers += [LayerNorm("final_ln", 1e-5), TiedLMHead("lm", vocab, tied="embed.word")]
    return Spec(
        id=id,
        paper_name=paper,
        input_shape=(size or CPU_TOKENS,),
        classes=vocab,
        layers=tuple(layers),
        batch_size=CPU_BATCH,
        input_kind="tokens",
        vocab=vocab,
        objective="next_token",
        **_GPT2_ADAMW,
        clip_norm=1.0,
        accelerator_geometry=accelerator_geometry,
    )


# Pretraining's optimizer for the transformers (docs/models.md): BERT's (Devlin et al.),
# and GPT-2's as llm.c and nanoGPT train it (lr 6e-4, beta2 0.95, weight decay 0.1, with a
# global gradient-norm clip at 1.0 on the spec); both decay the matrices and embeddings only.
_ADAMW = dict(optimizer="adamw", lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
_GPT2_ADAMW = dict(optimizer="adamw", lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)

# Shi et al.'s nine, the networks of Table 7 and its presets.
PAPER_NETWORKS = ("fcn5", "fcn8", "fcn_r", "alexnet", "alexnet_r", "resnet50", "resnet56")
PAPER_NETWORKS += ("lstm32", "lstm64")
TRANSFORMERS = ("bert_base", "gpt2")
# Each network's family of architecture, which xfbench compare's noise model fits apart
# where the runs hold enough of it (report/noise.py).
FAMILIES = {
    "fcn5": "fcn",
    "fcn8": "fcn",
    "fcn_r": "fcn",
    "alexnet": "cnn",
    "alexnet_r": "cnn",
    "resnet50": "cnn",
    "resnet56": "cnn",
    "lstm32": "rnn",
    "lstm64": "rnn",
    "bert_base": "transformer",
    "gpt2": "transformer",
}

NETWORKS: dict[str, Callable[..., Spec]] = {
    f.__name__: f
    for f in (
        fcn5, fcn8, fcn_r, alexnet, alexnet_r, resnet50, resnet56, lstm32, lstm64, bert_base, gpt2
    )
}  # fmt: skip

# Decoders only the generation suite runs (cell.py's NETWORKS), outside NETWORKS: not a
# network of Table 7's suite, whose sweeps and tests go over NETWORKS.
DECODERS: dict[str, Callable[..., Spec]] = {"gpt3_6_7b": gpt3_6_7b}

# Smoke sizes: (width multiplier, image size). Run in well under a second a step.
SMOKE: dict[str, tuple[float, int | None]] = {
    "fcn5": (1 / 64, None),
    "fcn8": (1 / 64, None),
    "fcn_r": (1 / 16, None),
    "alexnet": (1 / 16, 99),  # 99 keeps a 2x2 last map, so flatten order still matters
    "alexnet_r": (1 / 4, None),
    "resnet50": (1 / 8, 32),
    "resnet56": (1 / 4, None),
    "lstm32": (1 / 8, None),
    "lstm64": (1 / 8, None),
    "bert_base": (1 / 12, 16),  # 2 layers of width 64, 4 heads, 16 tokens
    "gpt2": (1 / 12, 16),
    "gpt3_6_7b": (1 / 64, 16),  # 2 layers of width 64, 4 heads, 16 tokens
}
SMOKE_BATCH = 8


# "full": the paper's networks; "smoke": the tests' smaller ones (SMOKE)
SCALES = ("full", "smoke")


def get_spec(network: str, scale: str = "full", tokens: int | None = None) -> Spec:
    """The spec of one network at "full" (the paper's) or "smoke" size; tokens sets a
    transformer's sequence length (its cell's; default: the CPU geometry, or smoke's)."""
    known = {**NETWORKS, **DECODERS}
    if network not in known:
        raise KeyError(f"unknown network {network!r}; known: {', '.join(known)}")
    if tokens and network not in (*TRANSFORMERS, *DECODERS):
        raise ValueError(f"{network} has no sequence length to set")
    if scale == "full":
        return known[network](1.0, tokens)
    if scale == "smoke":
        width, size = SMOKE[network]
        spec = known[network](width, tokens or size)
        return replace(spec, scale="smoke", batch_size=SMOKE_BATCH)
    raise ValueError(f"unknown scale {scale!r}; known: full, smoke")


def geometry(network: str, scale: str, device: str) -> tuple[int | None, int]:
    """(tokens, batch) of a network's cells on a device: a transformer's sequence length
    (None for the others) and the preset's batch."""
    spec = get_spec(network, scale)
    if scale == "smoke" or network not in TRANSFORMERS:
        return (spec.tokens or None) if network in TRANSFORMERS else None, spec.batch_size
    if device != "cpu" and spec.accelerator_geometry:
        return spec.accelerator_geometry
    return spec.tokens, spec.batch_size
