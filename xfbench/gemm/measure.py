"""One GEMM cell: inputs, the correctness check, warm-up, timing, the record.

Timing. Each pytest-benchmark round is one call of `batch(calls)`:
- on the CPU, calls = 1 and the round is perf_counter around one product that
  returns when done, so pytest-benchmark's own statistics are the per-product
  times and its median is the figure quoted;
- on a GPU, a round is `calls` products queued back to back (enough to keep the
  device busy for about ROUND_S), timed by the implementation's timer: CUDA events
  for CuPy and PyTorch (device time, with the batch queued behind a sleep kernel
  so launch gaps do not count), the wall clock stopped after a device sync for
  the others. A single small product lasts a few microseconds, below what the
  wall clock around one call can resolve, which is why GPU rounds are batches.
  The quoted figure is the median over rounds of the timer's seconds / calls;
  pytest-benchmark's statistics (wall time per round of `calls` products) stay
  in the JSON for its compare tooling.
Inputs. Several input sets are rotated so that consecutive products never find
their operands in a cache (together the sets exceed FLUSH_BYTES, more than any
current GPU L2 or CPU L3), as far as free memory allows.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

import psutil

from xfbench import records
from xfbench.errors import CannotRun
from xfbench.gemm import get_impl
from xfbench.gemm.check import Sample, random_pool, tolerance, within
from xfbench.gemm.peaks import peak_share
from xfbench.gemm.shapes import Shape
from xfbench.harness.energy import EnergyMeter
from xfbench.harness.presets import Preset
from xfbench.harness.threads import CpuMeter, allowed_cpus, contention_fields
from xfbench.published import peak_tflops

ROUND_S = 0.01  # GPU: device time of one round of queued products
MAX_CALLS = 200  # well below CUDA's queue of pending launches (about 1000)
FLUSH_BYTES = 256 * 2**20
MAX_SETS = 32
SHIFT = 7936  # offset between input sets drawn from one random pool (16 x 496)
ITEMSIZE = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
OUT_ITEMSIZE = {**ITEMSIZE, "fp8": 2}  # fp8 products are written as bf16

# the record kind its cells write, and the task their failures' cells carry
KIND = "gemm"


class WrongProduct(AssertionError):
    """The product failed the correctness check."""


@dataclass(frozen=True, kw_only=True)
class GemmCell:
    impl: str
    shape: Shape
    dtype: str
    device: str
    threads: int

    @property
    def id(self) -> str:
        return (
            f"{self.impl}-{self.shape.label}-{self.dtype}-{self.device.replace(':', '')}"
            f"-t{self.threads}"
        )

    def as_dict(self) -> dict[str, Any]:
        s = asdict(self.shape)
        return {
            "suite": KIND,
            "task": KIND,
            "impl": self.impl,
            "framework": self.impl,
            "shape": s["label"],
            "m": s["m"],
            "n": s["n"],
            "k": s["k"],
            "dtype": self.dtype,
            "precision": self.dtype,
            "device": self.device,
            "threads": self.threads,
        }


def matrix_bytes(shape: Shape, dtype: str) -> tuple[int, int]:
    """Bytes of A + B, and of C."""
    a, b, c = shape.elements()
    return (a + b) * ITEMSIZE[dtype], c * OUT_ITEMSIZE[dtype]


def input_sets(shape: Shape, dtype: str, spare_bytes: int | None) -> int:
    """How many input sets to rotate: enough to exceed FLUSH_BYTES, as memory allows."""
    per_set, _ = matrix_bytes(shape, dtype)
    n = max(1, min(MAX_SETS, math.ceil(FLUSH_BYTES / per_set)))
    if spare_bytes is not None:
        n = max(1, min(n, 1 + spare_bytes // per_set))
    return n


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _fitting_sets(impl, shape: Shape, dtype: str, device: str) -> int:
    """How many input sets to rotate within the device's free memory; CannotRun when even
    the three matrices do not fit."""
    operands, out = matrix_bytes(shape, dtype)
    pool_bytes = 4 * (sum(shape.elements()[:2]) + (MAX_SETS - 1) * SHIFT)
    if device == "cpu":
        free = psutil.virtual_memory().available - pool_bytes
    else:
        free = impl.free_bytes(device)
    if free is not None and operands + out > free:
        raise CannotRun(
            f"the three matrices need {_gib(operands + out)}; {device} has "
            f"{_gib(max(free, 0))} free"
        )
    # Leave a quarter of free memory to the library (workspaces, its own pool).
    spare = None if free is None else int(0.75 * free) - operands - out
    return input_sets(shape, dtype, spare)


def _operands(impl, shape: Shape, dtype: str, device: str, *, n_sets: int, seed: int):
    """n_sets (A, B) pairs on the device, overlapping windows of one random pool, and the
    check's sample of the first pair's product."""
    a_n, b_n, _ = shape.elements()
    pool = impl.quantize(random_pool(a_n + b_n + (n_sets - 1) * SHIFT, seed), dtype)
    host = [
        (
            pool[i * SHIFT : i * SHIFT + a_n].reshape(shape.m, shape.k),
            pool[a_n + i * SHIFT : a_n + i * SHIFT + b_n].reshape(shape.k, shape.n),
        )
        for i in range(n_sets)
    ]
    sample = Sample.of(*host[0], seed=seed)
    pairs = [(impl.load(a, "a", dtype, device), impl.load(b, "b", dtype, device)) for a, b in host]
    return pairs, sample


def _timed_rounds(benchmark, impl, pairs, *, device: str, preset: Preset):
    """The timed rounds, each a batch of products (one on the CPU; on a GPU enough to fill
    ROUND_S of device time): (seconds per product, products per round, rounds, the timer's
    kind, the CPU and energy meters)."""
    timer = impl.timer(device)
    turn = [0]

    def batch(calls: int) -> float:
        timer.start(calls)
        last = None
        for _ in range(calls):
            a, b = pairs[turn[0] % len(pairs)]
            turn[0] += 1
            last = impl.matmul(a, b)
        return timer.stop(last)

    calls = 1
    if device != "cpu":
        probe = min(len(pairs), 8)
        per_call = batch(probe) / probe
        calls = max(1, min(MAX_CALLS, math.ceil(ROUND_S / max(per_call, 1e-9))))
    for _ in range(preset.warmup):
        batch(calls)
    t0 = time.perf_counter()
    batch(calls)
    rounds, _ = preset.rounds(time.perf_counter() - t0)
    samples: list[float] = []
    with CpuMeter() as meter, EnergyMeter(device) as energy:
        benchmark.pedantic(
            lambda: samples.append(batch(calls)), rounds=rounds, iterations=1, warmup_rounds=0
        )
    stats = benchmark.stats.stats if benchmark.stats else None
    if device == "cpu" and stats:
        seconds = stats.median
    else:
        seconds = statistics.median(samples) / calls
    kind = "perf_counter (pytest-benchmark)" if device == "cpu" else timer.kind
    return seconds, calls, rounds, kind, meter, energy


# The largest half-type product measured on a CPU without that arithmetic: a 512^3 square
# (0.2 s a call at PyTorch's bf16 fallback of 1.2 GFLOP/s on an AVX2 Zen 3). The smoke
# preset's layer shapes at batch 16 (1.2-1.4 GFLOP) took 18-25 s a cell there.
HALF_FALLBACK_FLOPS = 2 * 512**3


def cpu_half_reason(dtype: str, device: str, flops: int) -> str | None:
    """A half-type product on a CPU without that arithmetic (machine.half_arithmetic) is
    measured only up to HALF_FALLBACK_FLOPS, at any preset: every implementation would time
    its slow fallback (8192^3 would take 15 minutes)."""
    from xfbench.machine import half_arithmetic

    if device != "cpu" or dtype not in ("bf16", "fp16") or flops <= HALF_FALLBACK_FLOPS:
        return None
    why = half_arithmetic(dtype)
    return f"not measured above 2 x 512^3 FLOPs: {why}" if why else None


def measure(
    benchmark, cell: GemmCell, preset: Preset, threads_config: dict[str, Any], seed: int = 0
) -> dict:
    """Run one GEMM cell under pytest-benchmark; returns the record put in extra_info.
    Raises CannotRun when the cell cannot run here, WrongProduct when the check fails
    (after putting the failed record in `benchmark.extra_info`)."""
    impl = get_impl(cell.impl)
    reason = impl.import_error() or impl.reason(cell.dtype, cell.device)
    reason = reason or cpu_half_reason(cell.dtype, cell.device, cell.shape.flops)
    if reason:
        raise CannotRun(reason)
    shape, dtype, device = cell.shape, cell.dtype, cell.device
    pairs = None
    try:
        mode = impl.prepare(dtype, device)
        n_sets = _fitting_sets(impl, shape, dtype, device)
        pairs, sample = _operands(impl, shape, dtype, device, n_sets=n_sets, seed=seed)

        # First product: compilation, autotuning and the check, timed apart.
        t0 = time.perf_counter()
        c = impl.matmul(*pairs[0])
        got = impl.fetch(c, sample.rows, sample.cols)
        compile_s = time.perf_counter() - t0
        placed = impl.placed_on(c)
        del c
        if placed != device:
            raise RuntimeError(f"asked for {device}, but the product was computed on {placed}")
        error = sample.error(got)
        # PyTorch reports whether cuBLAS may reduce split-K sums in the 16-bit type.
        bound = tolerance(dtype, shape.k, bool(mode.get(f"{dtype}_reduced_precision_reduction")))

        record = {
            **records.header(KIND),
            **cell.as_dict(),
            "preset": preset.name,
            "call": mode.pop("call", impl.call),
            "device_name": impl.device_name(device),
            "flops_per_call": shape.flops,
            "check_error": error,
            "check_tolerance": bound,
            "check_block": [len(sample.rows), len(sample.cols)],
            "compile_s": compile_s,
            "input_sets": n_sets,
            "threads_requested": cell.threads,
            "threads_config": {"cpus_allowed": len(allowed_cpus()), **threads_config},
            "versions": impl.versions(),
            **mode,
        }
        if not within(error, bound):
            record.update(
                status="failed",
                reason=f"wrong product: relative error {error:.3g} > tolerance {bound:.3g}",
            )
            benchmark.extra_info.update(record)
            raise WrongProduct(record["reason"])

        seconds, calls, rounds, timer, meter, energy = _timed_rounds(
            benchmark, impl, pairs, device=device, preset=preset
        )
        tflops = shape.flops / seconds / 1e12 if seconds > 0 else math.nan
        record.update(
            {
                "status": "ok",
                "seconds_per_call": seconds,
                "tflops": tflops,
                "peak_tflops": peak_tflops(record["device_name"], dtype),
                "peak_share": peak_share(tflops, record["device_name"], dtype),
                "share_of_best": None,  # filled in at the end of the session (gemm/best.py)
                "timer": timer,
                "calls_per_round": calls,
                "rounds": rounds,
                "warmup_rounds": preset.warmup,
                "threads_used": round(meter.threads_used, 2),
                **contention_fields(meter, cell.threads, on_cpu=device == "cpu"),
                # a "sample" here is one product
                **energy.fields(rounds * calls, 1),
            }
        )
        if record["energy_j"]:
            record["gflops_per_joule"] = shape.flops * rounds * calls / record["energy_j"] / 1e9
        benchmark.extra_info.update(record)
        return record
    finally:
        pairs = None
        gc.collect()
        impl.release()
