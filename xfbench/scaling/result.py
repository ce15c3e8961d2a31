"""What every worker shares: its CPUs, the worker JSON, and the summary of step times.

No framework is imported here: the workers call worker_cpus() and pin() before
importing theirs.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

from xfbench import environment
from xfbench.harness import threads
from xfbench.scaling import SCALING_CPUS

# The CPUs a scaling run may spread its workers over, as "0,1,2,3". The launcher sets
# it from the CPUs its process could use before any pinning (a pytest session pins
# itself to --threads CPUs, and children inherit that mask); unset, a worker uses its
# own affinity.

# Replicas agree when no weight differs by more than this share of the largest weight.
# Data-parallel replicas apply the same update to the same weights, so in practice the
# difference is exactly 0; the recorded replicas_max_diff shows it.
REPLICA_RTOL = 1e-6

# (normal step, step without the gradient all-reduce) pairs run after the timed steps
# for comm_share.
COMM_PAIRS = 3


def available_cpus() -> list[int]:
    """The CPUs the workers may use (XFBENCH_SCALING_CPUS if set, else this process's affinity)."""
    return environment.cpu_list(SCALING_CPUS) or threads.allowed_cpus()


def worker_cpus(index: int, per_worker: int, count: int = 1) -> list[int]:
    """CPUs [index*T, (index+count)*T) of the available ones: `count` workers' disjoint share."""
    cpus = available_cpus()
    lo, hi = index * per_worker, (index + count) * per_worker
    if hi > len(cpus):
        raise RuntimeError(
            f"{(index + count)} workers of {per_worker} threads need {hi} CPUs, "
            f"but only {len(cpus)} are available ({SCALING_CPUS.name} or the affinity)"
        )
    return cpus[lo:hi]


def pin(cpus: list[int]) -> list[int]:
    """Run this process on exactly these CPUs, with one thread per CPU in every threading
    library (harness.threads.pin, after widening or narrowing the mask to them).
    Call before importing the framework."""
    os.sched_setaffinity(0, cpus)
    return threads.pin(len(cpus))


def step_summary(seconds: list[float]) -> dict[str, Any]:
    return {
        "step_seconds": [float(s) for s in seconds],
        "median_step_s": statistics.median(seconds) if seconds else None,
    }


def comm_share(normal: list[float], alone: list[float]) -> tuple[float, bool]:
    """(1 - median(steps without the gradient all-reduce) / median(normal steps), at least 0;
    whether it was clipped at 0, the difference being within noise)."""
    share = 1.0 - statistics.median(alone) / statistics.median(normal)
    return max(0.0, share), share < 0


def write(path: str | os.PathLike, result: dict[str, Any]) -> None:
    """Write the worker JSON atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(result, indent=1, default=float))
    os.replace(tmp, path)


def header(cell, backend: str, device_name: str, versions: dict[str, str]) -> dict[str, Any]:
    """The fields every worker JSON starts with."""
    return {
        "status": "ok",
        "framework": cell.framework,
        "network": cell.network,
        "scale": cell.scale,
        "device": cell.device,
        "device_name": device_name,
        "precision": cell.precision,
        "workers": cell.workers,
        "scaling": cell.scaling,
        "global_batch": cell.global_batch,
        "per_worker_batch": cell.per_worker_batch,
        "threads_per_worker": cell.threads_per_worker,
        "backend": backend,
        "versions": versions,
    }


def failed(cell, reason: str, **fields) -> dict[str, Any]:
    """A worker JSON for a run that could not measure; reason is one line."""
    base = {
        "status": "failed",
        "reason": reason.strip().splitlines()[0] if reason.strip() else "failed",
        "framework": cell.framework,
        "network": cell.network,
        "scale": cell.scale,
        "device": cell.device,
        "precision": cell.precision,
        "workers": cell.workers,
        "scaling": cell.scaling,
        "step_seconds": [],
        "replicas_agree": False,
    }
    base.update(fields)
    return base
