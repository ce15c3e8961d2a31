"""int8 inference: ONNX Runtime's static quantization of the canonical graph.

`onnxruntime.quantization.quantize_static` in the QDQ format (QuantizeLinear and
DequantizeLinear around each quantized operator, which the CPU provider fuses into its int8
kernels): weights int8 per output channel, activations with ranges calibrated (MinMax) on a
fixed set of synthetic samples, the same for every batch size, so that every cell of a
network quantizes to the same graph. Activations are uint8 on x86-64 (U8S8), as ONNX
Runtime's quantization guide advises for x86 CPUs: its CPU provider fuses a U8S8 graph
whole (ResNet-50: 53 QLinearConv and 16 QLinearAdd, 83 samples/s at batch 16 on 2 threads
of a Zen 4 EPYC), where with int8 activations it fused only 33 of the 53 convolutions,
left the residual additions in float32 with 94 DequantizeLinear and 34 Transposes between,
and ran at 31 samples/s, barely above float32's 26. Elsewhere (ARM) S8S8, as the guide
advises there. How far its logits are from fp32 is measured
(xfbench/adapters/int8.py) and recorded beside its speed.
"""

from __future__ import annotations

import platform
import tempfile
from pathlib import Path

import numpy as np

from xfbench.adapters import int8
from xfbench.errors import CannotRun
from xfbench.exchange.names import INPUT, OUTPUT
from xfbench.models import Spec

X86 = platform.machine() in ("x86_64", "AMD64")
SETTINGS = {
    "method": "onnxruntime.quantization.quantize_static",
    "format": "QDQ",
    "weights": "int8, per output channel",
    "activations": ("uint8" if X86 else "int8") + ", MinMax calibration",
}


def quantized(spec: Spec, model: bytes, options, providers) -> tuple[bytes, dict]:
    """The int8 graph of a canonical inference graph and what its record says: its logits'
    distance from the fp32 graph's on the check samples, the settings, the CPU's int8
    instructions. Made once for a run of cells of one network (int8.once)."""

    def make():
        import onnxruntime as ort

        q8 = quantize(spec, model)
        x = int8.check_samples(spec)
        fp32 = ort.InferenceSession(model, options, providers=providers)
        reference = fp32.run([OUTPUT], {INPUT: x})[0]
        session = ort.InferenceSession(q8, options, providers=providers)
        facts = {
            **int8.drift(session.run([OUTPUT], {INPUT: x})[0], reference),
            "int8_quantization": SETTINGS,
            "int8_cpu_isa": int8.isa(),
        }
        return q8, facts

    return int8.once(("onnxruntime", spec.id, spec.scale, int8.digest([model])), make)


def quantize(spec: Spec, model: bytes) -> bytes:
    """The canonical inference graph (bytes), statically quantized to int8."""
    try:
        import onnx
        from onnxruntime.quantization import (
            CalibrationDataReader,
            CalibrationMethod,
            QuantFormat,
            QuantType,
            quantize_static,
        )
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError as e:
        raise CannotRun(f"int8 needs onnx and onnxruntime.quantization: {e}") from None

    class Samples(CalibrationDataReader):
        def __init__(self):
            self.batches = iter(np.split(int8.calibration_samples(spec), 4))

        def get_next(self):
            batch = next(self.batches, None)
            return None if batch is None else {INPUT: batch}

    with tempfile.TemporaryDirectory(prefix="xfbench-int8-") as tmp:
        fp32, pre, q8 = (Path(tmp) / n for n in ("fp32.onnx", "pre.onnx", "int8.onnx"))
        onnx.save_model(onnx.load_from_string(model), fp32)
        # shape inference and graph clean-up first, as the quantization guide asks
        quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=True)
        quantize_static(
            str(pre),
            str(q8),
            Samples(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8 if X86 else QuantType.QInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
        )
        return q8.read_bytes()
