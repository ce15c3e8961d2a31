"""A GEMM's share of its device's datasheet peak (the peaks: xfbench/published.toml).

An unknown device, and the CPU, get None, never a guess. tf32 is fp32 storage on TF32
tensor cores; fp8 is e4m3.
"""

from __future__ import annotations

from xfbench.published import peak_tflops


def peak_share(tflops: float | None, device_name: str | None, dtype: str) -> float | None:
    """Achieved over datasheet peak (0..1), or None when the peak is not known."""
    peak = peak_tflops(device_name, dtype)
    if peak is None or tflops is None:
        return None
    return tflops / peak
