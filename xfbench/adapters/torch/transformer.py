"""BERT-base and GPT-2 small in PyTorch, built from the spec.

Modules are named so that every state-dict key is the parameter's canonical name
(models/layers.py): weights load and export without a conversion. Attention is
F.scaled_dot_product_attention, which dispatches to PyTorch's fused kernels (flash or
memory-efficient on CUDA, flash on the CPU) where they apply; the heads share the word
embedding matrix (tied), as both published networks do.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from xfbench.models import Spec
from xfbench.models import layers as L


class ScaledDotProduct(nn.Module):
    """softmax(q k^T / sqrt(dh)) v over (N, heads, T, dh): a module of its own so that the
    precision probe (precision.py) sees what attention computed in."""

    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


class _Attention(nn.Module):
    def __init__(self, d: int, heads: int, causal: bool):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.sdpa = ScaledDotProduct(causal)

    def forward(self, x):
        n, t, d = x.shape
        # rows of qkv: q, k, v, each head's dh rows together -> (3, N, heads, T, dh)
        q, k, v = self.qkv(x).view(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = self.sdpa(q, k, v)
        return self.out(y.transpose(1, 2).reshape(n, t, d))


class _MLP(nn.Module):
    def __init__(self, d: int, ff: int, gelu: str):
        super().__init__()
        self.fc = nn.Linear(d, ff)
        self.proj = nn.Linear(ff, d)
        self.approximate = "tanh" if gelu == "tanh" else "none"

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate=self.approximate))


class Block(nn.Module):
    def __init__(self, layer: L.TransformerBlock, d: int):
        super().__init__()
        self.pre_norm = layer.pre_norm
        self.attn = _Attention(d, layer.heads, layer.causal)
        self.ln1 = nn.LayerNorm(d, eps=layer.eps)
        self.mlp = _MLP(d, layer.ff, layer.gelu)
        self.ln2 = nn.LayerNorm(d, eps=layer.eps)

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


class Embeddings(nn.Module):
    """word + position (+ token type 0); BERT's LayerNorm after them is its child `ln`."""

    def __init__(self, layer: L.TokenEmbedding):
        super().__init__()
        self.word = nn.Parameter(torch.empty(layer.vocab, layer.dim))
        self.position = nn.Parameter(torch.empty(layer.positions, layer.dim))
        if layer.types:
            self.token_type = nn.Parameter(torch.empty(layer.types, layer.dim))
        self.ln: nn.Module = nn.Identity()

    def forward(self, tokens):
        t = tokens.shape[1]
        x = F.embedding(tokens, self.word) + self.position[:t]
        if hasattr(self, "token_type"):
            x = x + self.token_type[0]  # one segment: every token has type 0
        return self.ln(x)


class MaskedLMHead(nn.Module):
    def __init__(self, layer: L.MaskedLMHead, d: int, word: nn.Parameter):
        super().__init__()
        self.transform = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d, eps=layer.eps)
        self.bias = nn.Parameter(torch.zeros(layer.vocab))
        self.word = [word]  # tied: a reference, not a second parameter

    def forward(self, x):
        # LayerNorm in the master dtype, as every LayerNorm here: autocast runs it in its
        # input's type on the CPU (fp32 on CUDA), and GELU's output is the half type.
        y = F.gelu(self.transform(x))
        x = self.ln(y.to(self.bias.dtype))
        return F.linear(x, self.word[0], self.bias)


class TiedLMHead(nn.Module):
    def __init__(self, word: nn.Parameter):
        super().__init__()
        self.word = [word]
        # padded vocabulary (training.pad_vocab): 0 for each real word, -inf for each
        # padded one, added in the product's epilogue
        self.register_buffer("mask", None, persistent=False)

    def forward(self, x):
        return F.linear(x, self.word[0], self.mask)


class Transformer(nn.Module):
    """(N, T) token ids -> (N, T, vocab) logits."""

    def __init__(self, spec: Spec):
        super().__init__()
        self.order: list[str] = []
        for layer, x in spec.shapes:
            if isinstance(layer, L.TokenEmbedding):
                module = Embeddings(layer)
            elif isinstance(layer, L.LayerNorm) and layer.name == "embed.ln":
                self.embed.ln = nn.LayerNorm(x[-1], eps=layer.eps)
                continue
            elif isinstance(layer, L.LayerNorm):
                module = nn.LayerNorm(x[-1], eps=layer.eps)
            elif isinstance(layer, L.TransformerBlock):
                module = Block(layer, x[-1])
            elif isinstance(layer, L.MaskedLMHead):
                module = MaskedLMHead(layer, x[-1], self.embed.word)
            elif isinstance(layer, L.TiedLMHead):
                module = TiedLMHead(self.embed.word)
            else:
                raise TypeError(f"no PyTorch module for {type(layer).__name__} in a transformer")
            self.add_module(layer.name, module)
            self.order.append(layer.name)

    def _apply(self, fn, recurse=True):
        # .to() makes new parameters; the heads' references follow the embedding's.
        out = super()._apply(fn, recurse)
        for name in self.order:
            module = getattr(self, name)
            if isinstance(getattr(module, "word", None), list):
                module.word[0] = self.embed.word
        return out

    def forward(self, tokens):
        return getattr(self, self.order[-1])(self.hidden(tokens))

    def hidden(self, tokens):
        """The states the head reads: every layer but the last."""
        x = tokens
        for name in self.order[:-1]:
            x = getattr(self, name)(x)
        return x
