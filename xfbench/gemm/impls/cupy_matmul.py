"""cupy.matmul: cuBLAS with nothing in between, the GPU baseline.

TF32: CuPy reads CUPY_TF32 once, at its first fp32 product, and caches the
compute type for the rest of the process. So the variable is set to match the
cell before that first product, and for later cells the cached compute type is
set explicitly with cupy._core.set_compute_type (CuPy's own switch, the one its
tests use). The compute type in force is read back and recorded; if it cannot
be switched the cell is skipped with the reason, never run in the other mode.
bf16 needs CuPy 14 or later with ml_dtypes (earlier CuPy has no bfloat16).
CuPy has no fp8 GEMM. The timer is a pair of CUDA events around a batch of calls
queued behind a spin kernel, so it measures the device's time, not launch overhead.
"""

from __future__ import annotations

import os

import numpy as np

from xfbench.errors import CannotRun
from xfbench.gemm.impls.base import GemmImpl, Timer, gpu_index

LAUNCH_S = 50e-6
MAX_SLEEP_S = 0.05

_SPIN = r"""
extern "C" __global__ void xfbench_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


class CupyEventTimer(Timer):
    kind = "cuda-events"

    def __init__(self, device):
        import cupy

        self.cupy, self.index = cupy, gpu_index(device)
        with cupy.cuda.Device(self.index):
            self.spin = cupy.RawKernel(_SPIN, "xfbench_spin")
            self.e0, self.e1 = cupy.cuda.Event(), cupy.cuda.Event()
            self.cycles_per_s = self._calibrate()

    def _sleep(self, cycles: int) -> None:
        self.spin((1,), (1,), (np.int64(cycles),))

    def _calibrate(self) -> float:
        cycles = 10_000_000
        self._sleep(1000)
        self.e0.record()
        self._sleep(cycles)
        self.e1.record()
        self.e1.synchronize()
        return cycles / max(self.cupy.cuda.get_elapsed_time(self.e0, self.e1) / 1e3, 1e-6)

    def start(self, calls):
        with self.cupy.cuda.Device(self.index):
            self.cupy.cuda.Device(self.index).synchronize()
            self._sleep(int(min(MAX_SLEEP_S, calls * LAUNCH_S) * self.cycles_per_s))
            self.e0.record()

    def stop(self, last):
        with self.cupy.cuda.Device(self.index):
            self.e1.record()
        self.e1.synchronize()
        return self.cupy.cuda.get_elapsed_time(self.e0, self.e1) / 1e3


class CupyMatmul(GemmImpl):
    name = "cupy"
    package = "cupy"
    call = "cupy.matmul"
    install_hint = "pip install cupy-cuda12x (GPU machines only)"

    def versions(self):
        import cupy

        out = {"cupy": cupy.__version__}
        try:
            out["cuda_runtime"] = str(cupy.cuda.runtime.runtimeGetVersion())
        except Exception:
            pass
        return out

    def devices(self):
        import cupy

        try:
            return [f"cuda:{i}" for i in range(cupy.cuda.runtime.getDeviceCount())]
        except Exception:  # installed, but no driver or no GPU
            return []

    def reason(self, dtype, device):
        if dtype == "fp8":
            return "CuPy has no fp8 GEMM (fp8 is measured through torch._scaled_mm)"
        if not device.startswith("cuda"):
            return "CuPy runs on CUDA GPUs only"
        return super().reason(dtype, device)

    def dtype_reason(self, dtype, device):
        if dtype == "bf16" and self._bfloat16() is None:
            import cupy

            return (
                f"CuPy {cupy.__version__} has no bfloat16 (it arrived with ml_dtypes support "
                "in CuPy 14)"
            )
        return None

    @staticmethod
    def _bfloat16():
        try:
            import cupy
            import ml_dtypes

            cupy.empty(1, dtype=ml_dtypes.bfloat16)
            return np.dtype(ml_dtypes.bfloat16)
        except Exception:
            return None

    def device_name(self, device):
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(gpu_index(device))["name"].decode()

    def free_bytes(self, device):
        import cupy

        with cupy.cuda.Device(gpu_index(device)):
            free, _ = cupy.cuda.runtime.memGetInfo()
            return free + cupy.get_default_memory_pool().free_bytes()

    def prepare(self, dtype, device):
        from cupy._core import _routines_linalg as linalg

        self.index = gpu_index(device)
        if dtype not in ("fp32", "tf32"):
            return {"tf32_mode": "n/a"}
        want_tf32 = dtype == "tf32"
        # Read at CuPy's first fp32 product; set it to match in case this is that product.
        os.environ["CUPY_TF32"] = "1" if want_tf32 else "0"
        want = getattr(linalg, "COMPUTE_TYPE_TF32" if want_tf32 else "COMPUTE_TYPE_DEFAULT", None)
        try:
            linalg.set_compute_type(np.float32, want)
        except Exception:
            pass  # the switch is missing or refused: the check below says what runs
        got = linalg.get_compute_type(np.float32)
        if want is None or got != want:
            raise CannotRun(
                f"CuPy reads CUPY_TF32 once per process and this one runs fp32 products as "
                f"{linalg.compute_type_to_str(got)}; run {dtype} CuPy cells in a process of "
                f"their own (--gemm-impl cupy --precision {dtype})"
            )
        return {
            "tf32_mode": f"cupy compute type {linalg.compute_type_to_str(got)}",
            "CUPY_TF32": os.environ["CUPY_TF32"],
        }

    def load(self, x, role, dtype, device):
        import cupy

        storage = {
            "fp32": np.float32,
            "tf32": np.float32,
            "fp16": np.float16,
            "bf16": self._bfloat16(),
        }[dtype]
        # Converted on the host (exactly: x holds values of the type), then copied.
        with cupy.cuda.Device(gpu_index(device)):
            return cupy.asarray(np.ascontiguousarray(x).astype(storage))

    def matmul(self, a, b):
        import cupy

        with cupy.cuda.Device(self.index):
            return cupy.matmul(a, b)

    def fetch(self, c, rows, cols):
        import cupy

        # The whole product to the host, then NumPy (ml_dtypes) picks the block: no
        # gather kernels needed for bfloat16.
        with cupy.cuda.Device(self.index):
            host = cupy.asnumpy(c)
        return host[np.ix_(rows, cols)].astype(np.float64)

    def placed_on(self, c):
        return f"cuda:{c.device.id}"

    def timer(self, device):
        return CupyEventTimer(device)

    def release(self):
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()


IMPL = CupyMatmul()
