"""NumPy's matmul: the CPU's BLAS (OpenBLAS or MKL, whichever NumPy was built with).

Its thread count comes from OPENBLAS_NUM_THREADS / MKL_NUM_THREADS and the CPU
affinity, both set by harness.threads.pin before NumPy's BLAS starts.
"""

from __future__ import annotations

import numpy as np

from xfbench.gemm.impls.base import GemmImpl


def blas_name() -> str:
    try:
        return np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except Exception:  # layout of show_config differs between NumPy versions
        return "unknown"


class NumpyMatmul(GemmImpl):
    name = "numpy"
    package = "numpy"
    call = "numpy.matmul"

    def versions(self):
        return {"numpy": np.__version__, "blas": blas_name()}

    def configure_threads(self, threads):
        import os

        return {
            var: os.environ.get(var)
            for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")
        }

    def dtype_reason(self, dtype, device):
        if dtype == "fp16":
            return (
                "NumPy has no BLAS half-precision GEMM: its float16 matmul is a plain loop, "
                "not the CPU's BLAS"
            )
        if dtype == "bf16":
            return "NumPy has no bfloat16 type"
        return None

    def prepare(self, dtype, device):
        return {"tf32_mode": "n/a (cpu)"}

    def load(self, x, role, dtype, device):
        return np.array(x, dtype=np.float32, copy=True)  # its own, aligned buffer

    def matmul(self, a, b):
        return np.matmul(a, b)

    def fetch(self, c, rows, cols):
        return c[np.ix_(rows, cols)].astype(np.float64)

    def placed_on(self, c):
        return "cpu"


IMPL = NumpyMatmul()
