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
    # A dtype: the LSTM runs in it with autocast off, its input and weights cast
    # explicitly. Set for bf16 on CUDA, where autocast's cuDNN RNN wrapper casts to fp16
    # whatever autocast's dtype is (precision.py).
    explicit_dtype: torch.dtype | None = None

    def __init__(self, spec: Spec):
        super().__init__()
        embed, lstm, fc = spec.layers
        assert isinstance(embed, L.Embedding) and isinstance(lstm, L.LSTM)
        self.embed = nn.Embedding(embed.vocab, embed.dim)
        self.lstm = nn.LSTM(embed.dim, lstm.hidden, lstm.layers)
        self.fc = nn.Linear(lstm.hidden, fc.units)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        if self.onednn:
            out = self._lstm(x)
        else:
            with torch.backends.mkldnn.flags(enabled=False):
                out = self._lstm(x)
        return self.fc(out)

    def _lstm(self, x: torch.Tensor) -> torch.Tensor:
        dtype = self.explicit_dtype
        if dtype is None:
            return self.lstm(x)[0]
        # The casts are autograd's: gradients reach the float32 master weights, as
        # autocast's own casts do.
        weights = {name: w.to(dtype) for name, w in self.lstm.named_parameters()}
        with torch.autocast(x.device.type, enabled=False):
            return torch.func.functional_call(self.lstm, weights, (x.to(dtype),))[0]
