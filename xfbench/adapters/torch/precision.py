"""What a PyTorch cell really computes in, asked of PyTorch rather than assumed.

Autocast decides per operator, and not always as its dtype says: under
autocast(bfloat16) on CUDA, PyTorch's cuDNN RNN wrapper casts the LSTM to float16
(aten/src/ATen/cudnn/AutocastRNN.cpp), so a "bf16" LSTM cell would time an fp16 LSTM.
One untimed forward with hooks on every layer and a dispatch mode underneath records
the dtype each kind of layer returned and the aten kernel that ran the LSTM.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# The layers whose arithmetic the precision names (Adapter: check_layer_dtypes): attention
# and the transformers' tied heads are modules of their own for this (transformer.py).
MATH_LAYERS = ("Conv2d", "Linear", "LSTM", "ScaledDotProduct", "MaskedLMHead", "TiedLMHead")

# The aten operator each LSTM implementation dispatches to, under the name records use.
RNN_KERNELS = {
    "aten::_cudnn_rnn": "cudnn",
    "aten::mkldnn_rnn_layer": "onednn",
    "aten::_thnn_fused_lstm_cell": "aten (CUDA fused cell)",
}
# ... and each of scaled_dot_product_attention's backends (what it chose is not an error
# when it falls back: the probe reads which one ran). Anything else is the math fallback.
ATTENTION_KERNELS = {
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "aten::_scaled_dot_product_efficient_attention": "memory-efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cuDNN",
    "aten::_scaled_dot_product_fused_attention_overrideable": "fused (device's own)",
}


class _Operators(TorchDispatchMode):
    """The aten operators a forward dispatches to (below autograd and autocast)."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func._schema.name)
        return func(*args, **(kwargs or {}))


def probe(net: torch.nn.Module, x: torch.Tensor, autocast, time_major: bool):
    """(layer kind -> dtype(s) its output had, {"lstm": its kernel, "attention": its
    kernel} for those the network has) for one forward
    on two samples of x, in evaluation mode without gradients so that nothing the timed
    steps see changes (no batch-norm statistics move, no optimizer state)."""
    sample = x[:, :2] if time_major else x[:2]
    seen: dict[str, set[str]] = {}

    def record(module, inputs, output):
        out = output[0] if isinstance(output, tuple) else output
        if isinstance(out, torch.Tensor):
            dtype = str(out.dtype).removeprefix("torch.")
            seen.setdefault(type(module).__name__, set()).add(dtype)

    leaves = [
        m
        for m in net.modules()
        if not any(True for _ in m.children()) or type(m).__name__ in MATH_LAYERS
    ]
    hooks = [m.register_forward_hook(record) for m in leaves]
    was_training = net.training
    net.eval()
    operators = _Operators()
    try:
        with torch.no_grad(), autocast(), operators:
            net(sample)
    finally:
        for h in hooks:
            h.remove()
        net.train(was_training)
    dtypes = {kind: ",".join(sorted(d)) for kind, d in sorted(seen.items())}
    found: dict[str, str] = {}
    if "LSTM" in dtypes:
        rnn = [RNN_KERNELS[n] for n in sorted(operators.names) if n in RNN_KERNELS]
        found["lstm"] = rnn[0] if rnn else "aten"
    if "ScaledDotProduct" in dtypes:
        fused = [ATTENTION_KERNELS[n] for n in sorted(operators.names) if n in ATTENTION_KERNELS]
        found["attention"] = ", ".join(fused) or "math (unfused)"
    return dtypes, found
