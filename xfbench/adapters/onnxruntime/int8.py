"""int8 inference: ONNX Runtime's static quantization of the canonical graph.

`onnxruntime.quantization.quantize_static` in the QDQ format (QuantizeLinear and
DequantizeLinear around each quantized operator, which the CPU provider fuses into its int8
kernels): weights int8 per output channel, activations int8 with ranges calibrated (MinMax)
on a fixed set of synthetic samples, the same for every batch size, so that every cell of
a network quantizes to the same graph. How far its logits are from fp32 is measured
(xfbench/adapters/int8.py) and recorded beside its speed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from xfbench.adapters.int8 import calibration_samples
from xfbench.errors import CannotRun
from xfbench.exchange.names import INPUT
from xfbench.models import Spec

SETTINGS = {
    "method": "onnxruntime.quantization.quantize_static",
    "format": "QDQ",
    "weights": "int8, per output channel",
    "activations": "int8, MinMax calibration",
}


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
            self.batches = iter(np.split(calibration_samples(spec), 4))

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
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
        )
        return q8.read_bytes()
