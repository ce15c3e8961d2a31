"""int8 inference: PyTorch's PT2E static quantization for x86, compiled by Inductor.

The network is exported (torch.export, batch dimension dynamic), annotated by torchao's
X86InductorQuantizer with its default configuration (int8 weights per output channel,
activations int8 per tensor), calibrated on fixed synthetic samples (adapters/int8.py, the
same for every batch size, so every cell of a network is the same function) and
converted; torch.compile with Inductor's freezing then lowers the quantize/dequantize
pairs into oneDNN's int8 convolutions and products. Run uncompiled, the converted graph
would time fp32 kernels between quantize and dequantize steps, so int8 is a compile-mode
precision. (PT2E quantization moved from torch.ao to torchao; torchao is in the torch
extra.)
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from xfbench.adapters.int8 import calibration_samples
from xfbench.errors import CannotRun
from xfbench.models import Spec

SETTINGS = {
    "method": "PT2E: torch.export, torchao X86InductorQuantizer (default config), "
    "convert_pt2e, torch.compile with Inductor freezing",
    "weights": "int8, per output channel",
    "activations": "int8, per tensor, calibrated",
}
MODE_REASON = (
    "int8 runs in the compile mode on the CPU: Inductor lowers PT2E's quantized graph to "
    "oneDNN's int8 kernels, and uncompiled it would run fp32 kernels between quantize steps"
)
LSTM_REASON = (
    "int8 in PyTorch is for the convolutional, fully connected and transformer networks: "
    "the x86 quantizer has no LSTM pattern, so the LSTM's products would stay fp32"
)
QUANTIZE_OPS = ("quantize_per_tensor", "quantize_per_channel", "dequantize_per")


def quantize(net: torch.nn.Module, spec: Spec, to_input) -> tuple[torch.nn.Module, int]:
    """The converted (int8) module of net, and how many quantize/dequantize nodes its graph
    holds (0 would mean nothing was quantized). to_input turns samples as synthetic_batch
    gives them into the network's input tensor."""
    try:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq
    except ImportError as e:
        raise CannotRun(
            f"int8 in PyTorch needs torchao's PT2E quantization ({e}); "
            "pip install -r requirements.lock"
        ) from None
    if spec.time_major:
        raise CannotRun(LSTM_REASON)
    samples = to_input(calibration_samples(spec))
    batch = torch.export.Dim("batch", min=1, max=1 << 16)
    # strict (TorchDynamo) export: the quantizer's fusion patterns match its graph
    with _legacy_cudnn_flags():
        exported = torch.export.export(
            net.eval(), (samples,), dynamic_shapes=({0: batch},), strict=True
        ).module()
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(exported, quantizer)
    with torch.no_grad():
        for chunk in torch.split(samples, 8):
            prepared(chunk)
    converted = convert_pt2e(prepared)
    nodes = sum(
        1
        for n in converted.graph.nodes
        if n.op == "call_function" and any(q in str(n.target) for q in QUANTIZE_OPS)
    )
    if not nodes:
        raise RuntimeError("PT2E quantized nothing in this network: an int8 cell would time fp32")
    return converted, nodes


@contextlib.contextmanager
def _legacy_cudnn_flags():
    """Strict export reads cuDNN's legacy allow_tf32 flag, which torch 2.13 refuses to read
    once the per-operator flags are set to ieee (workload.set_fp32_precision): they are
    put back to the legacy default while exporting. cuDNN's flags do nothing on the CPU,
    where int8 runs."""
    cudnn = torch.backends.cudnn
    saved = cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision
    cudnn.conv.fp32_precision = cudnn.rnn.fp32_precision = "tf32"
    try:
        yield
    finally:
        cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision = saved


def compiled(converted: torch.nn.Module):
    """converted compiled by Inductor with freezing (which folds the weights' quantization
    into prepacked int8 weights), one static graph per batch size."""
    import torch._inductor.config as inductor

    fn = torch.compile(converted, dynamic=False)

    def forward(x):
        with inductor.patch(freezing=True):
            return fn(x)

    return forward


def host_input(spec: Spec, memory_format):
    def to_input(x: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(np.ascontiguousarray(x))
        return t.contiguous(memory_format=memory_format) if t.ndim == 4 else t

    return to_input
