"""The machine's roofs on the CPU, measured: memory bandwidth (STREAM's four kernels) and
peak fp32 FLOP/s (a GEMM probe), at one thread count.

`python -m xfbench.roofline.roofs --threads N` prints one JSON object; `xfbench run` runs
it in a child for each CPU thread count of its sweep, before the cells, and writes the
results into the run's machine record (`roofs`), which every cell of the run and the
report's roofline share.

Bandwidth follows STREAM's rules: three float64 arrays, each at least four times the
last-level cache (and at least 64 MiB), each kernel timed ARRAY_REPEATS times and the best
time kept, bytes counted as STREAM counts them (copy and scale: two arrays, add and triad:
three). The N threads are the process's Python threads, pinned to N CPUs, each running
NumPy's loop (which releases the GIL) over its own slice. NumPy has no fused triad: it is
two passes (c * s, then + b), and its bandwidth is counted with the five arrays those two
passes move, so that no kernel is credited with traffic it did not make. The bandwidth
roof is the best of the four.

The peak is an fp32 GEMM (NumPy's BLAS, limited to N threads with threadpoolctl) of
PEAK_N x PEAK_N, the best of PEAK_REPEATS: the FLOP/s a dense product reaches here, not a
datasheet's. Half types are the GEMM suite's (`xfbench/suites/test_gemm.py`), whose best
the report takes where the same run has it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ARRAY_REPEATS = 5
MIN_ARRAY_BYTES = 64 << 20
PEAK_N = 2048
PEAK_REPEATS = 4
METHOD = (
    "STREAM's four kernels on float64 arrays of 4 x the last-level cache (at least 64 MiB), "
    f"best of {ARRAY_REPEATS}, in N pinned threads of NumPy (triad in two passes, counted "
    f"with the five arrays they move); peak: NumPy's fp32 GEMM {PEAK_N}^3 at N BLAS threads, "
    f"best of {PEAK_REPEATS}"
)


def last_level_cache_bytes() -> int:
    """The largest cache of CPU 0, from sysfs (0 when not readable)."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * unit)
    return best


def stream(threads: int) -> dict:
    """GB/s of copy, scale, add and triad, and the array size they ran on."""
    n = max(MIN_ARRAY_BYTES, 4 * last_level_cache_bytes()) // 8
    n -= n % threads
    a, b, c = np.ones(n), np.full(n, 2.0), np.zeros(n)
    chunks = [slice(i * n // threads, (i + 1) * n // threads) for i in range(threads)]
    scalar = 3.0

    def copy(s):
        np.copyto(c[s], a[s])

    def scale(s):
        np.multiply(c[s], scalar, out=b[s])

    def add(s):
        np.add(a[s], b[s], out=c[s])

    def triad(s):
        np.multiply(c[s], scalar, out=a[s])
        np.add(a[s], b[s], out=a[s])

    kernels = {"copy": (copy, 2), "scale": (scale, 2), "add": (add, 3), "triad": (triad, 5)}
    out = {}
    with ThreadPoolExecutor(threads) as pool:
        for name, (kernel, arrays) in kernels.items():
            best = float("inf")
            for _ in range(ARRAY_REPEATS):
                t0 = time.perf_counter()
                list(pool.map(kernel, chunks))
                best = min(best, time.perf_counter() - t0)
            out[name] = arrays * n * 8 / best / 1e9
    return {"kernels_gbps": out, "array_bytes": n * 8}


def gemm_peak(threads: int) -> float:
    """Best fp32 TFLOP/s of NumPy's GEMM at this many BLAS threads."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    x = rng.standard_normal((PEAK_N, PEAK_N), dtype=np.float32)
    y = rng.standard_normal((PEAK_N, PEAK_N), dtype=np.float32)
    with threadpool_limits(limits=threads, user_api="blas"):
        x @ y  # the BLAS's own warm-up (thread start, packing buffers)
        best = float("inf")
        for _ in range(PEAK_REPEATS):
            t0 = time.perf_counter()
            x @ y
            best = min(best, time.perf_counter() - t0)
    return 2 * PEAK_N**3 / best / 1e12


def measure(threads: int) -> dict:
    """The roofs at this thread count, pinned to the first `threads` CPUs allowed."""
    allowed = sorted(os.sched_getaffinity(0))
    if threads > len(allowed):
        raise ValueError(f"{threads} threads, but only {len(allowed)} CPUs are allowed")
    os.sched_setaffinity(0, allowed[:threads])
    try:
        bandwidth = stream(threads)
        peak = gemm_peak(threads)
    finally:  # the caller's CPUs back (the runner measures in a child of its own)
        os.sched_setaffinity(0, allowed)
    return {
        "threads": threads,
        "memory_bandwidth_gbps": max(bandwidth["kernels_gbps"].values()),
        "stream_bandwidth_gbps": bandwidth["kernels_gbps"],
        "stream_array_bytes": bandwidth["array_bytes"],
        "fp32_peak_tflops": peak,
        "method": METHOD,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m xfbench.roofline.roofs")
    p.add_argument("--threads", type=int, required=True)
    args = p.parse_args(argv)
    try:
        print(json.dumps(measure(args.threads)))
    except (ValueError, OSError, MemoryError) as e:
        print(f"roofs not measured: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
