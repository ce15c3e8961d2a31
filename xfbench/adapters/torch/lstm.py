"""The PTB word model in PyTorch: embedding -> nn.LSTM (cuDNN's fused kernel on CUDA)
-> dense at every step. Time-major inside, as cuDNN prefers, so no activation is
transposed: the token ids are transposed once, when the batch is made resident."""

from __future__ import annotations

import torch
from torch import nn

from xfbench.models import Spec
from xfbench.models import layers as L


class LSTMLanguageModel(nn.Module):
    time_major = True  # forward takes (T, N) token ids and returns (T, N, vocab)

    def __init__(self, spec: Spec):
        super().__init__()
        embed, lstm, fc = spec.layers
        assert isinstance(embed, L.Embedding) and isinstance(lstm, L.LSTM)
        self.embed = nn.Embedding(embed.vocab, embed.dim)
        self.lstm = nn.LSTM(embed.dim, lstm.hidden, lstm.layers)
        self.fc = nn.Linear(lstm.hidden, fc.units)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.fc(out)
