"""torch.matmul (and torch._scaled_mm for fp8) on the CPU and CUDA GPUs.

fp32 is IEEE fp32 (torch.backends.cuda.matmul.fp32_precision = "ieee"), tf32
sets it to "tf32". fp8 multiplies float8_e4m3fn operands with unit tensor-wise
scales (N(0, 1) numbers fit e4m3's range) into a bf16 result, with cuBLASLt's
fast accumulation, which is how fp8 GEMMs are run for speed; it needs compute
capability 8.9 or more (Ada, Hopper). On a GPU the timer is a pair of CUDA events
around a batch of calls queued behind a sleep kernel, so the events measure the
device's time, not Python's launch overhead.
"""

from __future__ import annotations

import numpy as np

from xfbench.adapters.torch import ADAPTER as TORCH
from xfbench.gemm.impls.base import GemmImpl, Timer, WallTimer, gpu_index

LAUNCH_S = 50e-6  # generous CPU time to queue one call; the sleep kernel covers the batch
MAX_SLEEP_S = 0.05


class TorchEventTimer(Timer):
    kind = "cuda-events"

    def __init__(self, device):
        import torch

        self.torch, self.device = torch, torch.device(device)
        self.e0 = torch.cuda.Event(enable_timing=True)
        self.e1 = torch.cuda.Event(enable_timing=True)
        self.cycles_per_s = self._calibrate()

    def _calibrate(self) -> float:
        torch = self.torch
        with torch.cuda.device(self.device):
            torch.cuda.synchronize()
            cycles = 10_000_000
            self.e0.record()
            torch.cuda._sleep(cycles)
            self.e1.record()
            self.e1.synchronize()
            return cycles / max(self.e0.elapsed_time(self.e1) / 1e3, 1e-6)

    def start(self, calls):
        torch = self.torch
        torch.cuda.synchronize(self.device)
        # Keep the GPU busy while the batch is queued, so that the calls run back to back.
        sleep_s = min(MAX_SLEEP_S, calls * LAUNCH_S)
        with torch.cuda.device(self.device):
            torch.cuda._sleep(int(sleep_s * self.cycles_per_s))
            self.e0.record()

    def stop(self, last):
        with self.torch.cuda.device(self.device):
            self.e1.record()
        self.e1.synchronize()
        return self.e0.elapsed_time(self.e1) / 1e3


class TorchMatmul(GemmImpl):
    name = "torch"
    package = "torch"
    call = "torch.matmul"

    def __init__(self):
        self.fp8 = False

    def versions(self):
        import torch

        out = {"torch": torch.__version__}
        if torch.cuda.is_available():
            out["cuda"] = str(torch.version.cuda)
        return out

    def devices(self):
        return TORCH.devices()

    def configure_threads(self, threads):
        return TORCH.configure_threads(threads)  # the same knobs as the network cells

    def dtype_reason(self, dtype, device):
        import torch

        if dtype != "fp8":
            return None
        if not device.startswith("cuda"):
            return "fp8 GEMMs run through torch._scaled_mm on CUDA GPUs only"
        cc = torch.cuda.get_device_capability(gpu_index(device))
        if cc < (8, 9):
            return f"fp8 needs compute capability 8.9 or more; this GPU is {cc[0]}.{cc[1]}"
        return None

    def reason(self, dtype, device):
        if dtype == "fp8":  # the one implementation that runs fp8
            seen = self.devices()
            if device not in seen:
                return f"{device} is not present to torch (it sees: {', '.join(seen)})"
            return self.dtype_reason(dtype, device)
        return super().reason(dtype, device)

    def device_name(self, device):
        import torch

        return torch.cuda.get_device_name(gpu_index(device)) if device.startswith("cuda") else "cpu"

    def free_bytes(self, device):
        import torch

        if not device.startswith("cuda"):
            return None
        free, _ = torch.cuda.mem_get_info(gpu_index(device))
        cached = torch.cuda.memory_reserved(gpu_index(device)) - torch.cuda.memory_allocated(
            gpu_index(device)
        )
        return free + cached

    def prepare(self, dtype, device):
        import torch

        torch.backends.cuda.matmul.fp32_precision = "tf32" if dtype == "tf32" else "ieee"
        torch.backends.mkldnn.matmul.fp32_precision = "ieee"  # never bf16 behind an fp32 name
        self.fp8 = dtype == "fp8"
        info = {
            "tf32_mode": f"torch.backends.cuda.matmul.fp32_precision="
            f"{torch.backends.cuda.matmul.fp32_precision}",
            "fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        }
        if self.fp8:
            self.scale = torch.ones((), dtype=torch.float32, device=device)
            info["fp8"] = "e4m3fn x e4m3fn -> bf16, tensor-wise scales 1, use_fast_accum"
            info["call"] = "torch._scaled_mm"
        return info

    def quantize(self, x, dtype):
        if dtype != "fp8":
            return super().quantize(x, dtype)
        import torch

        return torch.from_numpy(x).to(torch.float8_e4m3fn).float().numpy()

    def load(self, x, role, dtype, device):
        import torch

        t = torch.from_numpy(np.ascontiguousarray(x))
        if dtype == "fp8":
            t = t.to(device)
            if role == "b":  # _scaled_mm wants B column-major
                return t.t().contiguous().to(torch.float8_e4m3fn).t()
            return t.to(torch.float8_e4m3fn)
        storage = {
            "fp32": torch.float32,
            "tf32": torch.float32,
            "bf16": torch.bfloat16,
            "fp16": torch.float16,
        }[dtype]
        return t.to(device=device, dtype=storage).contiguous()

    def matmul(self, a, b):
        import torch

        if self.fp8:
            return torch._scaled_mm(
                a, b, self.scale, self.scale, out_dtype=torch.bfloat16, use_fast_accum=True
            )
        return torch.matmul(a, b)

    def fetch(self, c, rows, cols):
        import torch

        r = torch.as_tensor(rows, device=c.device)
        k = torch.as_tensor(cols, device=c.device)
        return c.index_select(0, r).index_select(1, k).double().cpu().numpy()

    def placed_on(self, c):
        return "cpu" if c.device.type == "cpu" else f"cuda:{c.device.index}"

    def timer(self, device):
        if device.startswith("cuda"):
            return TorchEventTimer(device)
        return WallTimer()

    def release(self):
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


IMPL = TorchMatmul()
