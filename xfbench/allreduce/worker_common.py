"""What both workers do around the measurement: CPU pinning, the result file."""

from __future__ import annotations

import json
import os
from pathlib import Path


def rank_cpus(local_rank: int, local_ranks: int, per_rank: int | None) -> list[int]:
    """Rank r of this host gets CPUs [r*T, (r+1)*T) of the allowed ones (wrapping around
    when there are more ranks than CPUs), T = per_rank or allowed // ranks on this host."""
    from xfbench.harness.threads import allowed_cpus

    cpus = allowed_cpus()
    per = min(per_rank or max(1, len(cpus) // max(local_ranks, 1)), len(cpus))
    return sorted({cpus[(local_rank * per + i) % len(cpus)] for i in range(per)})


def pin_to(cpus: list[int]) -> None:
    """Restrict this process to these CPUs, with as many threads; before importing a framework."""
    from xfbench.harness import threads

    os.sched_setaffinity(0, cpus)  # pin() chooses among the CPUs this thread may use
    threads.pin(len(cpus))


def write_result(path: str | None, result: dict) -> None:
    if not path:
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, out)


def failure(
    framework: str, device: str, world_size: int, reason: str, unavailable: bool = False
) -> dict:
    """unavailable: the devices asked for are not there (the suite skips rather than fails)."""
    return {
        "status": "failed",
        "reason": reason,
        "framework": framework,
        "device": device,
        "world_size": world_size,
        "rows": [],
        "unavailable": unavailable,
    }
