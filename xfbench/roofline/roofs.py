"""The machine's roofs, measured: memory bandwidth (STREAM's four kernels) and peak
FLOP/s (a GEMM probe per type), on the CPU at one thread count, or on one GPU.

`python -m xfbench.roofline.roofs --threads N` (or `--device cuda:N`) prints one JSON
object; `xfbench run` runs it in a child for each CPU thread count of its sweep and each
GPU it uses, before the cells, and writes the results into the run's machine record
(`roofs`), which every cell of the run and the report's roofline share.

Bandwidth follows STREAM's rules: three float64 arrays, each at least four times the
last-level cache (and at least 64 MiB), each kernel timed ARRAY_REPEATS times and the best
time kept, bytes counted as STREAM counts them (copy and scale: two arrays, add and triad:
three). The N threads are the process's Python threads, pinned to N CPUs, each running
NumPy's loop (which releases the GIL) over its own slice. NumPy has no fused triad: it is
two passes (c * s, then + b), and its bandwidth is counted with the five arrays those two
passes move, so that no kernel is credited with traffic it did not make. The bandwidth
roof is the best of the four.

The peak is an fp32 GEMM (NumPy's BLAS, limited to N threads with threadpoolctl), the best
of up to PEAK_REPEATS (budgeted_peak, below): the FLOP/s a dense product reaches here, not
a datasheet's. The half types' peaks are PyTorch's matmul at N threads where PyTorch is
installed and the CPU has the type's arithmetic (machine.half_arithmetic: on x86 bf16 with
AVX-512 BF16, AMX-BF16 or AVX-512 BW and VL, fp16 with AVX-512 FP16 or AMX-FP16; on aarch64
FEAT_BF16 and FEAT_FP16); elsewhere PyTorch computes it in a slow loop, which is no roof of
the machine's, and the roofs say so (`half_peaks_note`); a CPU whose flags could not be
read is measured. Every CPU peak runs under a time budget: its square grows from 256 until
one product takes CALL_S (at most PEAK_N), and its repeats stop at PEAK_BUDGET_S. And the
clock caps it: each peak has PEAK_LIMIT_S of wall-clock time and the bandwidth
STREAM_LIMIT_S, however slow a product or a pass is, so that no CPU spends more than 30 s
on its roofs at one thread count; one stopped there is null, and `stopped` says why.
Where the same run has the GEMM suite's best, the report takes it.

On a GPU (PyTorch): the same four kernels as PyTorch's element-wise operations on three
float64 arrays of DEVICE_ARRAY_BYTES (far beyond any GPU's L2), timed by CUDA events (the
triad is one fused kernel there: three arrays), and the peaks of fp32 (TF32 off), tf32,
bf16 and fp16 from torch.matmul at DEVICE_PEAK_N, the best of PEAK_REPEATS after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ARRAY_REPEATS = 5
MIN_ARRAY_BYTES = 64 << 20
PEAK_N = 2048
PEAK_REPEATS = 4
CALL_S = 0.2  # a CPU product this long is past its start-up costs
PEAK_BUDGET_S = 5.0  # one CPU peak's repeats, after its size is found
# The clock's caps on the CPU's roofs at one thread count: the bandwidth and three peaks
# (fp32, bf16, fp16) within 30 s, whatever a product or a pass takes
STREAM_LIMIT_S = 8.0
PEAK_LIMIT_S = 7.0
DEVICE_ARRAY_BYTES = 1 << 30
DEVICE_PEAK_N = 8192
# what the report calls a peak these roofs measured (beside a suite's, where higher)
PROBE = "GEMM probe"
METHOD = (
    "STREAM's four kernels on float64 arrays of 4 x the last-level cache (at least 64 MiB), "
    f"best of {ARRAY_REPEATS}, in N pinned threads of NumPy (triad in two passes, counted "
    f"with the five arrays they move); peak: NumPy's fp32 GEMM at N BLAS threads, "
    f"best of {PEAK_REPEATS} at the square (256 to {PEAK_N}) where a product takes "
    f"{CALL_S} s; half types: torch.matmul the same way at N threads"
)
DEVICE_METHOD = (
    "STREAM's four kernels as PyTorch element-wise operations on float64 arrays of "
    f"{DEVICE_ARRAY_BYTES >> 20} MiB (or 1/8 of free memory), best of {ARRAY_REPEATS} by CUDA "
    f"events (triad fused: three arrays); peaks: torch.matmul {DEVICE_PEAK_N}^3 per type, "
    f"best of {PEAK_REPEATS}"
)
CPU_HALF_TYPES = ("bf16", "fp16")


class Stopped(Exception):
    """A measurement stopped at its wall-clock limit; the message says where."""


# A stopped measurement's product still running (it cannot be interrupted), if any: a
# later roof then would share the CPUs with it, and its thread limits could be reset under
# it as that product ends, so no later roof is measured while it runs (_keep).
_IN_FLIGHT: list[threading.Thread] = []
# how long a stopped measurement's product in flight is waited for before giving up on it
GRACE_S = 1.0


def capped(limit_s: float, measure):
    """measure(stop)'s value, measured in a thread of its own and waited for limit_s at
    most: a product in flight cannot be interrupted, so past the limit `stop` is set (the
    measurement starts nothing more), that product is waited for GRACE_S more, left to
    end in its thread (_IN_FLIGHT) if it has not, and Stopped is raised. measure's own
    exceptions are raised here."""
    stop = threading.Event()
    done: dict = {}

    def run():
        try:
            done["value"] = measure(stop)
        except BaseException as e:  # handed to the caller
            done["error"] = e

    worker = threading.Thread(target=run, daemon=True, name="roof")
    worker.start()
    worker.join(limit_s)
    if worker.is_alive():
        stop.set()
        worker.join(GRACE_S)
        if worker.is_alive():
            _IN_FLIGHT.append(worker)
        raise Stopped(f"stopped at its {limit_s:g} s limit (a wall-clock cap)")
    if "error" in done:
        raise done["error"]
    return done["value"]


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


def stream(threads: int, stop: threading.Event | None = None) -> dict:
    """GB/s of copy, scale, add and triad, and the array size they ran on; stop, once
    set, ends it before its next pass (capped)."""
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
                if stop is not None and stop.is_set():
                    raise Stopped("stopped")
                t0 = time.perf_counter()
                list(pool.map(kernel, chunks))
                best = min(best, time.perf_counter() - t0)
            out[name] = arrays * n * 8 / best / 1e9
    return {"kernels_gbps": out, "array_bytes": n * 8}


def budgeted_peak(product, stop: threading.Event | None = None) -> float:
    """Best TFLOP/s of product(n) (one n x n x n product, returning its seconds) within a
    time budget: n doubles from 256 until one product takes CALL_S or n is PEAK_N, then the
    best of up to PEAK_REPEATS more, stopped once PEAK_BUDGET_S have passed. A CPU slow at
    a type thus spends seconds, not minutes, on its roof. stop, once set, ends it before
    its next product (capped: the wall-clock limit)."""

    def timed(n: int) -> float:
        if stop is not None and stop.is_set():
            raise Stopped("stopped")
        return product(n)

    n = 256
    seconds = timed(n)  # also the library's warm-up (threads, packing buffers)
    while seconds < CALL_S and n < PEAK_N:
        n *= 2
        seconds = timed(n)
    best, spent = seconds, 0.0
    for _ in range(PEAK_REPEATS):
        if spent >= PEAK_BUDGET_S:
            break
        seconds = timed(n)
        best, spent = min(best, seconds), spent + seconds
    return 2 * n**3 / best / 1e12


def gemm_peak(threads: int, stop: threading.Event | None = None) -> float:
    """Best fp32 TFLOP/s of NumPy's GEMM at this many BLAS threads."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)

    def product(n: int) -> float:
        x = rng.standard_normal((n, n), dtype=np.float32)
        y = rng.standard_normal((n, n), dtype=np.float32)
        t0 = time.perf_counter()
        np.matmul(x, y)
        return time.perf_counter() - t0

    with threadpool_limits(limits=threads, user_api="blas"):
        return budgeted_peak(product, stop)


def _best_seconds(fn, device) -> float:
    """fn's best time of PEAK_REPEATS after one warm-up: CUDA events on a GPU (no host
    wait between calls), the wall clock on the CPU."""
    import torch

    fn()
    if device.type != "cuda":
        best = float("inf")
        for _ in range(PEAK_REPEATS):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        return best
    torch.cuda.synchronize(device)
    best = float("inf")
    for _ in range(PEAK_REPEATS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


def torch_peaks(device: str, n: int, precisions) -> dict[str, float]:
    """TFLOP/s of torch.matmul n^3 for each precision on a device."""
    import torch

    dev = torch.device(device)
    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}
    dtypes["fp16"] = torch.float16
    out = {}
    try:
        for p in precisions:
            torch.backends.cuda.matmul.fp32_precision = "tf32" if p == "tf32" else "ieee"
            gen = torch.Generator(dev).manual_seed(0)
            x = torch.randn(n, n, device=dev, dtype=dtypes[p], generator=gen)
            y = torch.randn(n, n, device=dev, dtype=dtypes[p], generator=gen)
            out[p] = 2 * n**3 / _best_seconds(lambda x=x, y=y: torch.matmul(x, y), dev) / 1e12
            del x, y
    finally:
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    return out


def torch_stream(device: str, array_bytes: int) -> dict[str, float]:
    """GB/s of STREAM's four kernels as PyTorch operations on a device."""
    import torch

    dev = torch.device(device)
    n = array_bytes // 8
    a = torch.ones(n, dtype=torch.float64, device=dev)
    b, c = torch.full_like(a, 2.0), torch.zeros_like(a)
    s = 3.0
    kernels = {
        "copy": (lambda: c.copy_(a), 2),
        "scale": (lambda: torch.mul(c, s, out=b), 2),
        "add": (lambda: torch.add(a, b, out=c), 3),
        "triad": (lambda: torch.add(b, c, alpha=s, out=a), 3),
    }
    return {
        name: arrays * n * 8 / _best_seconds(kernel, dev) / 1e9
        for name, (kernel, arrays) in kernels.items()
    }


def cpu_torch_peak(precision: str, stop: threading.Event | None = None) -> float:
    """TFLOP/s of torch.matmul in a half type on the CPU, under the peaks' time budget."""
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    gen = torch.Generator().manual_seed(0)

    def product(n: int) -> float:
        x = torch.randn(n, n, generator=gen).to(dtype)
        y = torch.randn(n, n, generator=gen).to(dtype)
        t0 = time.perf_counter()
        torch.matmul(x, y)
        return time.perf_counter() - t0

    return budgeted_peak(product, stop)


def cpu_half_peaks(threads: int) -> dict:
    """The half types' peaks on the CPU (`<type>_peak_tflops`) where it has their
    arithmetic, and why the others were not measured (`half_peaks_note`); each under
    PEAK_LIMIT_S (a peak stopped there: null, with why in `stopped`)."""
    try:
        import torch
    except ImportError:
        return {"half_peaks_note": "not measured: PyTorch is not installed"}
    from xfbench import machine

    lacking = {p: machine.half_arithmetic(p) for p in CPU_HALF_TYPES}
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    out: dict = {}
    try:
        for p in (p for p, why in lacking.items() if not why):
            _keep(out, f"{p}_peak_tflops", PEAK_LIMIT_S, lambda stop, p=p: cpu_torch_peak(p, stop))
    finally:  # the caller's count back (a test measures in its own process)
        torch.set_num_threads(before)
    notes = [f"{p} not measured: {why}" for p, why in lacking.items() if why]
    if machine.UNKNOWN in machine.cpu()["isa"]:
        notes.append("the CPU's flags could not be read: bf16 and fp16 measured unchecked")
    if notes:
        out["half_peaks_note"] = "; ".join(notes)
    return out


def _keep(out: dict, name: str, limit_s: float, measure) -> None:
    """out[name] = measure's value within limit_s, or None and out["stopped"][name], why:
    a peak stopped at its limit is recorded, never dropped. While an earlier roof's product
    still runs, it is not measured (it would share the CPUs with that product): the same."""
    _IN_FLIGHT[:] = [t for t in _IN_FLIGHT if t.is_alive()]
    if _IN_FLIGHT:
        out[name] = None
        out.setdefault("stopped", {})[name] = (
            "not measured: an earlier roof's product, stopped at its limit, was still running"
        )
        return
    try:
        out[name] = capped(limit_s, measure)
    except Stopped as e:
        out[name] = None
        out.setdefault("stopped", {})[name] = str(e)


def measure(threads: int) -> dict:
    """The roofs at this thread count, pinned to the first `threads` CPUs allowed."""
    allowed = sorted(os.sched_getaffinity(0))
    if threads > len(allowed):
        raise ValueError(f"{threads} threads, but only {len(allowed)} CPUs are allowed")
    os.sched_setaffinity(0, allowed[:threads])  # the measuring threads inherit it
    out: dict = {}
    try:
        _keep(out, "stream", STREAM_LIMIT_S, lambda stop: stream(threads, stop))
        _keep(out, "fp32_peak_tflops", PEAK_LIMIT_S, lambda stop: gemm_peak(threads, stop))
        halves = cpu_half_peaks(threads)
    finally:  # the caller's CPUs back (the runner measures in a child of its own)
        os.sched_setaffinity(0, allowed)
    bandwidth = out.pop("stream") or {"kernels_gbps": {}, "array_bytes": None}
    stopped = {**out.pop("stopped", {}), **halves.pop("stopped", {})}
    if "stream" in stopped:
        stopped["memory_bandwidth_gbps"] = stopped.pop("stream")
    return {
        "threads": threads,
        "memory_bandwidth_gbps": max(bandwidth["kernels_gbps"].values(), default=None),
        "stream_bandwidth_gbps": bandwidth["kernels_gbps"],
        "stream_array_bytes": bandwidth["array_bytes"],
        **out,
        **halves,
        **({"stopped": stopped} if stopped else {}),
        "method": METHOD,
    }


def measure_device(device: str) -> dict:
    """One GPU's roofs (PyTorch): device-to-device bandwidth and each type's peak."""
    try:
        import torch
    except ImportError:
        raise ValueError(
            "the GPU's roofs are measured with PyTorch, which is not installed"
        ) from None
    if not device.startswith("cuda:") or not torch.cuda.is_available():
        raise ValueError(f"{device}: not a CUDA device PyTorch can use here")
    dev = torch.device(device)
    free, _ = torch.cuda.mem_get_info(dev)
    array = min(DEVICE_ARRAY_BYTES, free // 8)
    kernels = torch_stream(device, array)
    torch.cuda.empty_cache()
    peaks = torch_peaks(device, DEVICE_PEAK_N, ("fp32", "tf32", "bf16", "fp16"))
    return {
        "device": device,
        "device_name": torch.cuda.get_device_name(dev),
        "memory_bandwidth_gbps": max(kernels.values()),
        "stream_bandwidth_gbps": kernels,
        "stream_array_bytes": array,
        **{f"{p}_peak_tflops": v for p, v in peaks.items()},
        "method": DEVICE_METHOD,
    }


def key(threads: int | None = None, device: str | None = None) -> str:
    """The name of one set of roofs in a run's roofs.json: `t<N>` for the CPU at N threads,
    the device (`cuda:0`) for a GPU."""
    return device if device else f"t{threads}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m xfbench.roofline.roofs")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--threads", type=int, help="the CPU's roofs at this many threads")
    where.add_argument("--device", help="one GPU's roofs (cuda:N)")
    p.add_argument(
        "--into",
        type=Path,
        help="also keep them (or why they were not measured) under their key in this JSON "
        "file, a run's roofs.json, which the report reads beside the run's cells",
    )
    args = p.parse_args(argv)
    try:
        measured = measure_device(args.device) if args.device else measure(args.threads)
        print(json.dumps(measured))
    except (ValueError, OSError, MemoryError) as e:
        measured = {"error": str(e)}
        print(f"roofs not measured: {e}", file=sys.stderr)
    if args.into:
        kept = json.loads(args.into.read_text()) if args.into.is_file() else {}
        kept[key(args.threads, args.device)] = measured
        args.into.parent.mkdir(parents=True, exist_ok=True)
        args.into.write_text(json.dumps(kept, indent=1))
    return 1 if "error" in measured else 0


if __name__ == "__main__":
    sys.exit(main())
