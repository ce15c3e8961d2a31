"""Datasheet dense peaks, TFLOP/s, keyed by the name the NVIDIA driver reports.

From the datasheet column of shared/reference/ANCHORS.md (dense, no sparsity).
Only devices listed there are here: an unknown device, and the CPU, get None,
never a guess. tf32 is fp32 storage on TF32 tensor cores; fp8 is e4m3.
"""

from __future__ import annotations

_H100_SXM = {"fp32": 67.0, "tf32": 494.5, "fp16": 989.0, "bf16": 989.0, "fp8": 1979.0}
_H100_PCIE = {"fp32": 51.0, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0, "fp8": 1513.0}
_A100_SXM = {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}  # no fp8 units

PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "NVIDIA H100 80GB HBM3": _H100_SXM,
    "NVIDIA H200": _H100_SXM,  # the SXM part: the H100 SXM's arithmetic rates
    "NVIDIA H100 PCIe": _H100_PCIE,
    "NVIDIA A100-SXM4-80GB": _A100_SXM,
    "NVIDIA A100-SXM4-40GB": _A100_SXM,
}


def peak_tflops(device_name: str | None, dtype: str) -> float | None:
    return PEAK_TFLOPS.get(device_name or "", {}).get(dtype)


def peak_share(tflops: float | None, device_name: str | None, dtype: str) -> float | None:
    """Achieved over datasheet peak (0..1), or None when the peak is not known."""
    peak = peak_tflops(device_name, dtype)
    if peak is None or tflops is None:
        return None
    return tflops / peak
