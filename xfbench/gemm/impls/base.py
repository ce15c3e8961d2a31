"""What every GEMM implementation provides, and the timers it may use.

The measurement (gemm/measure.py) drives an implementation like this:
  configure_threads(n) once per process, before the framework's first operation;
  reason(dtype, device) -> why the cell cannot run here, or None;
  prepare(dtype, device) -> the modes in force (TF32 and the like), for the record;
  load(x, role, dtype, device) -> a device operand from a float32 host array;
  matmul(a, b) -> the product, possibly still being computed;
  fetch(c, rows, cols) -> that block of the product on the host, as float64;
  timer(device) -> a Timer whose start()/stop() bracket a batch of matmul calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from xfbench.adapters.base import not_installed


class Timer:
    """Brackets `calls` products; stop() returns seconds for all of them."""

    kind = ""

    def start(self, calls: int) -> None:
        raise NotImplementedError

    def stop(self, last) -> float:
        raise NotImplementedError


class WallTimer(Timer):
    """perf_counter around the calls, the device synchronised before and after.

    On the CPU the call returns when done. On a GPU the calls are queued
    asynchronously and the clock stops after the device has finished the last,
    so dispatch overhead counts only where the framework dispatches more slowly
    than the device computes."""

    kind = "wall"

    def __init__(self, sync: Callable[[Any], None] = lambda last: None):
        self.sync = sync
        self.t0 = 0.0

    def start(self, calls: int) -> None:
        self.t0 = time.perf_counter()

    def stop(self, last) -> float:
        self.sync(last)
        return time.perf_counter() - self.t0


class GemmImpl:
    name = ""  # the --gemm-impl value
    package = ""  # the module that must be importable
    call = ""  # what is timed, for the record
    install_hint = "pip install -r requirements.lock"

    def import_error(self) -> str | None:
        return not_installed(self.package, self.install_hint)

    def versions(self) -> dict[str, str]:
        raise NotImplementedError

    def devices(self) -> list[str]:
        """The devices this implementation can really use here, in harness names."""
        return ["cpu"]

    def configure_threads(self, threads: int) -> dict[str, Any]:
        return {}

    def reason(self, dtype: str, device: str) -> str | None:
        """Why (dtype, device) cannot run here, or None. May import the framework."""
        if dtype == "tf32" and not device.startswith("cuda"):
            return f"tf32 is a mode of NVIDIA tensor cores; it has no meaning on {device}"
        if dtype == "fp8":
            return (
                "fp8 GEMMs are measured through PyTorch only (torch._scaled_mm); "
                f"{self.name} is not timed at fp8"
            )
        seen = self.devices()
        if device not in seen:
            return f"{device} is not present to {self.name} (it sees: {', '.join(seen)})"
        return self.dtype_reason(dtype, device)

    def dtype_reason(self, dtype: str, device: str) -> str | None:
        return None

    def device_name(self, device: str) -> str:
        return "cpu"

    def free_bytes(self, device: str) -> int | None:
        """Bytes this implementation could still allocate on device (None: the host,
        whose free memory the measurement reads itself). By default the driver's
        count of free bytes (NVML)."""
        from xfbench.machine import gpu_free_bytes

        # The GPU CUDA calls device (CUDA_VISIBLE_DEVICES honoured); None without NVML: the
        # cell then runs unchecked and fails if memory runs out.
        return gpu_free_bytes(device) if device.startswith("cuda") else None

    def prepare(self, dtype: str, device: str) -> dict[str, Any]:
        return {}

    def quantize(self, x: np.ndarray, dtype: str) -> np.ndarray:
        from xfbench.gemm.check import quantize

        return quantize(x, dtype)

    def load(self, x: np.ndarray, role: str, dtype: str, device: str):
        raise NotImplementedError

    def matmul(self, a, b):
        raise NotImplementedError

    def fetch(self, c, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def placed_on(self, c) -> str:
        """The harness device the product was computed on (no silent fallback)."""
        raise NotImplementedError

    def timer(self, device: str) -> Timer:
        return WallTimer()

    def release(self) -> None:
        """Give cached device memory back after a cell."""


def gpu_index(device: str) -> int:
    return int(device.split(":")[1])
