"""One row per (pattern, message size): the record the suite and the report read."""
from __future__ import annotations

import statistics

from allreduce import DTYPE, ITEM_BYTES
from allreduce.bandwidth import algbw, busbw
from allreduce.check import verdict


def make_row(*, framework: str, backend: str, device: str, device_name: str, world_size: int,
             pattern: str, nbytes: int, round_seconds: list[float], warmup: int,
             max_abs_err: float, wrong: int, versions: dict) -> dict:
    """round_seconds: each timed operation, already the maximum over ranks."""
    seconds = statistics.median(round_seconds)
    correct, reason = verdict(max_abs_err, wrong)
    row = {"kind": "allreduce", "framework": framework, "backend": backend, "device": device,
           "device_name": device_name, "world_size": world_size, "pattern": pattern,
           "dtype": DTYPE, "bytes": nbytes, "count": nbytes // ITEM_BYTES,
           "status": "ok" if correct else "failed",
           "seconds": seconds,
           "algbw_gbps": algbw(nbytes, seconds) / 1e9,
           "busbw_gbps": busbw(nbytes, seconds, world_size) / 1e9,
           "correct": correct, "max_abs_err": max_abs_err, "wrong": wrong,
           "rounds": len(round_seconds), "warmup": warmup, "versions": versions,
           # every timed operation; the suite moves these into pytest-benchmark's stats
           "round_seconds": list(round_seconds)}
    if reason:
        row["reason"] = reason
    return row
