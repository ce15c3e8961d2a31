"""CPU threads: set before any framework starts, then verified from CPU time.

Environment variables are read by OpenMP, MKL and OpenBLAS when their pools
start, so pin() must run before the first framework import. The affinity mask
is the one setting every runtime obeys; ONNX Runtime and TensorFlow also need
their own knobs, which the adapters set in configure_threads().
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import threadpoolctl

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "NPROC",
)


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on."""
    return sorted(os.sched_getaffinity(0))


def _core_of(cpu: int) -> tuple[int, int]:
    topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
    try:
        return (
            int((topo / "physical_package_id").read_text()),
            int((topo / "core_id").read_text()),
        )
    except (OSError, ValueError):
        return (0, cpu)


def choose_cpus(n: int) -> list[int]:
    """n CPUs, one per physical core first, so N threads get N cores, not N hyperthreads."""
    cpus = allowed_cpus()
    if n > len(cpus):
        raise ValueError(f"{n} threads asked for, but this process may use only {len(cpus)} CPUs")
    first, siblings, seen = [], [], set()
    for cpu in cpus:
        core = _core_of(cpu)
        (siblings if core in seen else first).append(cpu)
        seen.add(core)
    return sorted((first + siblings)[:n])


def pin(n: int) -> list[int]:
    """Restrict this process (its threads now and those it will start) to n CPUs and tell
    every threading library to use n threads. Call before importing a framework."""
    cpus = choose_cpus(n)
    for var in THREAD_VARIABLES:
        os.environ[var] = str(n)
    # Affinity is per thread: the threads already running (NumPy's OpenBLAS pool starts when
    # NumPy is imported, before any option is read) are pinned one by one; new threads
    # inherit the mask from the thread that starts them.
    for tid in Path("/proc/self/task").iterdir():
        try:
            os.sched_setaffinity(int(tid.name), cpus)
        except (ProcessLookupError, ValueError):
            pass  # the thread ended meanwhile
    # BLAS and OpenMP pools already loaded read their variables too early: resize them.
    threadpoolctl.threadpool_limits(limits=n)
    return cpus


@dataclass
class CpuMeter:
    """CPU time over wall time of this process: how many threads were really busy."""

    cpu0: float = 0.0
    wall0: float = 0.0
    cpu: float = 0.0
    wall: float = 0.0

    def __enter__(self):
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.cpu = time.process_time() - self.cpu0
        self.wall = time.perf_counter() - self.wall0

    @property
    def threads_used(self) -> float:
        return self.cpu / self.wall if self.wall > 0 else 0.0
