"""Inputs and the correctness check.

Inputs are N(0, 1) random numbers (never zeros: a tensor core multiplying zeros
draws less power and clocks higher), rounded on the host to values the operand
type holds exactly, so every implementation multiplies the same numbers and the
float64 reference is the exact product of those numbers. The product is checked
by its relative Frobenius error against that reference, on a random block of
rows and columns at most SAMPLE x SAMPLE (cheap at any size, and a wrong product,
such as a transposed operand, is off by order 1 everywhere).

The tolerance is derived from the arithmetic each type names, not chosen: for a
product of inner dimension k it is SAFETY x (operands + accumulation + output),
each term built from the unit roundoff u = 2^-p of the format involved (p
significand bits, the implicit one counted):
- operands: fp32 operands that the unit itself narrows (TF32's 10-bit mantissas;
  whether it rounds or cuts them is not documented, so cut, 2u, is assumed), 2 x 2u
  for the two factors of each product; 0 where the operands are exact in their
  type, as every other type's are here;
- accumulation in an accumulator that rounds: sqrt(k) u, the probabilistic bound
  on a sum of k products of random sign (Higham and Mary, 2019), which holds for
  blocked and pairwise sums as for a plain loop;
- accumulation in one that cuts: each store shrinks the sum by u on average, with
  no cancellation between stores, so (k / G) u for a store every G products.
  Hopper's fp8 tensor cores with fast accumulation keep partial sums in a 22-bit
  float (13 stored mantissa bits) cut at every 32-product MMA, as published
  measurements of the H100 found; NVIDIA does not document it, so the acceptance
  run's check_error is the number to hold this against;
- output: u of the stored result; where the library may reduce split-K partial
  sums in the 16-bit output type (PyTorch's allow_{fp16,bf16}_reduced_precision_
  reduction, on by default), (1 + sqrt(SPLITS)) u.
At k = 8192 that gives fp32 1.1e-5, tf32 3.9e-3, bf16 7.8e-3 (3.9e-2 with split
reductions), fp16 9.8e-4 (4.9e-3) and fp8 3.9e-2. Correct products err 2 to 10
times less (simulated in tests/test_gemm.py), and a silent change to cheaper
arithmetic is caught: fp32 run on TF32 errs by ~5e-4, and a 16-bit product that
accumulated in its own type by ~0.4 sqrt(k) u of that type (fp16 at k = 2048:
6.6e-3, which the earlier fixed bound of 1e-2 let through, as it failed a correct
fast-accumulated fp8 product at k = 16384, 1.3e-2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from xfbench.adapters.base import round_bf16

SAMPLE = 128
SAFETY = 2.0
SPLITS = 16  # the most split-K partial sums assumed reduced in the output type

# Significand bits, the implicit one counted. fp22 is the H100 fp8 MMA's accumulator.
SIGNIFICAND_BITS = {"fp32": 24, "tf32": 11, "fp22": 14, "fp16": 11, "bf16": 8}


def unit_roundoff(fmt: str, cuts: bool = False) -> float:
    """The largest relative error of storing a real number in fmt: 2^-p when
    rounding to nearest, 2^(1-p) when the bits past the format are cut."""
    return 2.0 ** (int(cuts) - SIGNIFICAND_BITS[fmt])


@dataclass(frozen=True)
class Arithmetic:
    """The formats a GEMM of one type passes its numbers through."""

    operands: str | None  # the format the unit narrows fp32 operands to; None: exact
    accumulator: str
    output: str
    cut_every: int = 0  # the accumulator is cut, not rounded, every this many products


ARITHMETIC = {
    "fp32": Arithmetic(None, "fp32", "fp32"),
    "tf32": Arithmetic("tf32", "fp32", "fp32"),
    "bf16": Arithmetic(None, "fp32", "bf16"),
    "fp16": Arithmetic(None, "fp32", "fp16"),
    "fp8": Arithmetic(None, "fp22", "bf16", cut_every=32),
}


def tolerance(dtype: str, k: int, split_reduction: bool = False) -> float:
    """The bound on the relative error of a correct product of type dtype and inner
    dimension k (the module's docstring derives it)."""
    a = ARITHMETIC[dtype]
    operands = 2 * unit_roundoff(a.operands, cuts=True) if a.operands else 0.0
    if a.cut_every:
        accumulation = math.ceil(k / a.cut_every) * unit_roundoff(a.accumulator)
    else:
        accumulation = math.sqrt(k) * unit_roundoff(a.accumulator)
    reduced = split_reduction and SIGNIFICAND_BITS[a.output] < SIGNIFICAND_BITS["fp32"]
    output = (1 + math.sqrt(SPLITS) if reduced else 1) * unit_roundoff(a.output)
    return SAFETY * (operands + accumulation + output)


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


def within(error: float, bound: float) -> bool:
    return bool(np.isfinite(error)) and error <= bound
