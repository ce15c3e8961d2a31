"""Inputs and the correctness check.

Inputs are N(0, 1) random numbers (never zeros: a tensor core multiplying zeros
draws less power and clocks higher), rounded on the host to values the operand
type holds exactly, so every implementation multiplies the same numbers and the
float64 reference is the exact product of those numbers. The product is checked
by its relative Frobenius error against that reference, on a random block of
rows and columns at most SAMPLE x SAMPLE (cheap at any size, and a wrong product,
such as a transposed operand, is off by order 1 everywhere).

The tolerances sit between what a correct product of each type gives and what the
next cheaper mode would give, so they also catch a silent mode change (fp32 run
on TF32 tensor cores errs by ~5e-4, well above the fp32 bound):
  fp32 ~4e-7 (fp32 accumulation), tf32 ~3e-4 to 8e-4 (10-bit mantissas, rounded or cut),
  bf16 ~2e-3 and fp16 ~3e-4 (rounding of the 16-bit result), fp8 ~2e-3 (bf16 result).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOLERANCE = {"fp32": 1e-5, "tf32": 5e-3, "bf16": 1e-2, "fp16": 1e-2, "fp8": 1e-2}
SAMPLE = 128


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> the nearest bfloat16 value (ties to even), kept as float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return r.view(np.float32)


def quantize(x: np.ndarray, dtype: str) -> np.ndarray:
    """The values of x as the operand type holds them, as float32 (fp8 is the
    implementation's business: see the torch implementation)."""
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return round_bf16(x)
    return x  # fp32 and tf32 operands are fp32 (tf32 rounds inside the tensor core)


def random_pool(size: int, seed: int) -> np.ndarray:
    """size float32 N(0, 1) numbers."""
    return np.random.default_rng(seed).standard_normal(size, dtype=np.float32)


@dataclass
class Sample:
    """The rows and columns checked, and the float64 reference there."""

    rows: np.ndarray
    cols: np.ndarray
    reference: np.ndarray

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray, seed: int = 0) -> Sample:
        rng = np.random.default_rng(seed)
        m, n = a.shape[0], b.shape[1]
        rows = np.sort(rng.choice(m, size=min(m, SAMPLE), replace=False))
        cols = np.sort(rng.choice(n, size=min(n, SAMPLE), replace=False))
        ref = a[rows].astype(np.float64) @ b[:, cols].astype(np.float64)
        return cls(rows, cols, ref)

    def error(self, got: np.ndarray) -> float:
        """Relative Frobenius error of got (the product at rows x cols)."""
        got = np.asarray(got, dtype=np.float64)
        if got.shape != self.reference.shape:
            return float("inf")
        denom = np.linalg.norm(self.reference)
        diff = np.linalg.norm(got - self.reference)
        return float(diff / denom) if denom > 0 else float(diff)


def within(error: float, dtype: str) -> bool:
    return bool(np.isfinite(error)) and error <= TOLERANCE[dtype]
