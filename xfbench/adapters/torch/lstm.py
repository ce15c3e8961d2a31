"""The PTB word model in PyTorch: embedding -> nn.LSTM (cuDNN's fused kernel on CUDA)
-> dense at every step. Time-major inside, as cuDNN prefers, so no activation is
transposed: the token ids are transposed once, when the batch is made resident."""

from __future__ import annotations

import functools

import torch
from torch import nn

from xfbench.models import Spec
from xfbench.models import layers as L


@functools.cache
def onednn_runs_lstm(dtype: torch.dtype) -> bool:
    """Whether oneDNN's CPU LSTM runs under autocast to dtype here, asked of PyTorch with a
    tiny one: its bf16 and fp16 LSTM needs hardware support (avx512_bf16, AMX) that an
    AVX2-only CPU lacks, and there it raises instead of falling back."""
    try:
        with torch.autocast("cpu", dtype):
            nn.LSTM(2, 2)(torch.zeros(1, 1, 2))
    except RuntimeError:
        return False
    return True


class LSTMLanguageModel(nn.Module):
    time_major = True  # forward takes (T, N) token ids and returns (T, N, vocab)
    # False: the LSTM runs ATen's own kernels (set where oneDNN cannot run it)
    onednn = True

    def __init__(self, spec: Spec):
        super().__init__()
        embed, lstm, fc = spec.layers
        assert isinstance(embed, L.Embedding) and isinstance(lstm, L.LSTM)
        self.embed = nn.Embedding(embed.vocab, embed.dim)
        self.lstm = nn.LSTM(embed.dim, lstm.hidden, lstm.layers)
        self.fc = nn.Linear(lstm.hidden, fc.units)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.onednn:
            out, _ = self.lstm(self.embed(tokens))
        else:
            with torch.backends.mkldnn.flags(enabled=False):
                out, _ = self.lstm(self.embed(tokens))
        return self.fc(out)
