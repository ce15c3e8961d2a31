"""The PyTorch adapter. torch is imported only when a method needs it."""

from __future__ import annotations

from xfbench.adapters.base import Adapter


class TorchAdapter(Adapter):
    name = "torch"

    def versions(self):
        import torch

        out = {"torch": torch.__version__}
        if torch.cuda.is_available():
            out["cuda"] = torch.version.cuda
            out["cudnn"] = str(torch.backends.cudnn.version())
            nccl = torch.cuda.nccl.version() if torch.distributed.is_nccl_available() else None
            out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
        return out

    def devices(self):
        import torch

        return ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]

    def mode_reason(self, mode, device):
        if mode in ("cudagraph", "loop") and not device.startswith("cuda"):
            return "CUDA graphs replay only on a CUDA device"
        return None

    def precision_reason(self, mode, precision, device):
        if precision == "int8" and (mode != "compile" or device != "cpu"):
            from xfbench.adapters.torch.int8 import MODE_REASON

            return MODE_REASON
        return None

    def layer_times_reason(self, cell):
        if cell.mode != "eager":
            return (
                f"per-layer time is measured in eager mode ({cell.mode} runs kernels fused "
                "across layers, which have no time of their own)"
            )
        if cell.precision == "int8":
            return "per-layer time: int8 runs a quantized graph, not the spec's modules"
        return None

    def attention_scores_kept(self, cell):
        # scaled_dot_product_attention's fused kernels keep no (T, T) scores for the
        # backward pass; in float64 it runs its math backend, which keeps the probabilities
        return 1 if cell.precision == "fp64" else 0

    def configure_threads(self, threads):
        import torch

        torch.set_num_threads(threads)
        try:
            # One inter-op thread: N threads means N busy threads, all inside operators.
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass  # already started in this process; the count below says what holds
        return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}

    def build(self, spec, cell, weights):
        from xfbench.adapters.torch.workload import TorchWorkload

        return TorchWorkload(spec, cell, weights)

    makes_weights = True

    def generator(self, spec, cell, weights):
        from xfbench.adapters.torch.generation import TorchGenerator

        return TorchGenerator(spec, cell, weights)


ADAPTER = TorchAdapter()
