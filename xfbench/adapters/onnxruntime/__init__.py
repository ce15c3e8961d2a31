"""The ONNX Runtime adapter: inference of the canonical ONNX graph, one mode per
execution provider. onnxruntime is imported only when a method needs it.

Modes (each names the execution provider that runs the graph):
  cpu       CPUExecutionProvider, on device cpu
  cuda      CUDAExecutionProvider on cuda:N (onnxruntime-gpu)
  tensorrt  TensorrtExecutionProvider on cuda:N, with the CUDA provider for the
            nodes TensorRT does not take (onnxruntime-gpu with TensorRT libraries)
  fused     CPUExecutionProvider on the transformers' graph after ONNX Runtime's
            transformer optimizer (onnxruntime.transformers: fused LayerNorm, GELU and
            attention operators where it recognises them; what it fused is recorded);
            the transformers only, on the host, and it needs onnx
The provider a session really uses is checked; a session that fell back to
another provider is an error, never a result.

Inference only: a training cell is skipped with the reason below.
Precision: fp32 (cpu, cuda), tf32 (cuda, tensorrt), and int8 (cpu, inference: the
canonical graph statically quantized, int8.py). TensorRT picks TF32
kernels for fp32 layers on its own and ONNX Runtime has no switch to forbid it,
so its fp32 cell is skipped rather than mislabelled. fp16/bf16 would need a
converted model and are not offered.
"""

from __future__ import annotations

from xfbench.adapters.base import Adapter
from xfbench.adapters.onnxruntime.reasons import HALF_REASON, TRAIN_REASON

TRT_FP32_REASON = (
    "TensorRT may run fp32 layers with TF32 kernels and ONNX Runtime's TensorRT "
    "provider cannot forbid it: run the tensorrt mode with --precision tf32"
)

INT8_MODE_REASON = (
    "int8 runs in the cpu mode: the statically quantized canonical graph on the CPU provider"
)
FUSED_REASON = "the fused mode is ONNX Runtime's transformer optimizer: transformers only"

PROVIDERS = {
    "fused": "CPUExecutionProvider",
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}


class OnnxRuntimeAdapter(Adapter):
    name = "onnxruntime"
    precisions = ("fp32", "tf32", "int8")
    layers_reason = (
        "is not profiled per layer: its profiler (SessionOptions.enable_profiling) times "
        "the nodes of the optimized graph, where a convolution, its batch norm and its "
        "activation are one fused node; xfbench does not map those nodes back to the spec's "
        "layers"
    )

    def versions(self):
        import onnxruntime as ort

        try:
            import onnx

            onnx_version = onnx.__version__
        except ImportError:  # running exported files needs onnxruntime alone
            onnx_version = None
        return {
            "onnxruntime": ort.__version__,
            "onnx": onnx_version,
            "providers": ",".join(ort.get_available_providers()),
        }

    def devices(self):
        import onnxruntime as ort

        from xfbench import machine

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            return ["cpu"]
        return ["cpu"] + [f"cuda:{i}" for i in range(machine.gpu_count())]

    def mode_reason(self, mode, device):
        if mode in ("cpu", "fused") and device != "cpu":
            return f"the {mode} mode runs on the host; use the cuda or tensorrt mode on a GPU"
        if mode in ("cuda", "tensorrt") and not device.startswith("cuda"):
            return f"the {mode} execution provider runs only on a CUDA device"
        return None

    def check(self, cell):
        if cell.task != "infer":
            return TRAIN_REASON
        if cell.precision in ("fp16", "bf16"):
            return HALF_REASON
        if cell.mode == "tensorrt" and cell.precision == "fp32":
            return TRT_FP32_REASON
        if cell.mode == "fused" and not self.mode_applies(cell.mode, cell.network):
            return FUSED_REASON
        if cell.precision == "int8" and cell.mode != "cpu":
            return INT8_MODE_REASON
        if cell.mode in self.modes and self.mode_reason(cell.mode, cell.device):
            return self.mode_reason(cell.mode, cell.device)
        import onnxruntime as ort

        provider = PROVIDERS.get(cell.mode)
        if provider and provider not in ort.get_available_providers():
            return (
                f"{provider} is not in this onnxruntime build "
                f"({', '.join(ort.get_available_providers())}); install onnxruntime-gpu"
            )
        return super().check(cell)

    def mode_applies(self, mode, network):
        from xfbench.models import TRANSFORMERS

        return mode != "fused" or network in TRANSFORMERS

    def attention_scores_kept(self, cell):
        # the canonical graph's attention is written out (the fused graph keeps it so:
        # its optimizer fuses no Attention here): one layer's scores in flight
        return 1

    def configure_threads(self, threads):
        # ONNX Runtime ignores the CPU affinity mask and the OpenMP variables: each
        # session gets its thread counts from SessionOptions (see workload.py).
        return {
            "intra_op_num_threads": threads,
            "inter_op_num_threads": 1,
            "execution_mode": "ORT_SEQUENTIAL",
        }

    def build(self, spec, cell, weights):
        from xfbench.adapters.onnxruntime.workload import OrtWorkload

        return OrtWorkload(spec, cell, weights)

    def generator(self, spec, cell, weights):
        from xfbench.adapters.onnxruntime.generation import OrtGenerator

        return OrtGenerator(spec, cell, weights)


ADAPTER = OnnxRuntimeAdapter()
