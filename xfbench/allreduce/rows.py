"""One row per (pattern, message size): the record the suite and the report read."""

from __future__ import annotations

import statistics

from xfbench.allreduce import DTYPE, ITEM_BYTES
from xfbench.allreduce.bandwidth import algbw, busbw
from xfbench.allreduce.check import verdict


def make_row(
    *,
    framework: str,
    backend: str,
    device: str,
    device_name: str,
    world_size: int,
    pattern: str,
    nbytes: int,
    round_seconds: list[float],
    warmup: int,
    max_abs_err: float,
    wrong: int,
    versions: dict,
) -> dict:
    """round_seconds: each timed operation, already the maximum over ranks."""
    seconds = statistics.median(round_seconds)
    correct, reason = verdict(max_abs_err, wrong)
    row = {
        "kind": "allreduce",
        "framework": framework,
        "backend": backend,
        "device": device,
        "device_name": device_name,
        "world_size": world_size,
        "pattern": pattern,
        "dtype": DTYPE,
        "bytes": nbytes,
        "count": nbytes // ITEM_BYTES,
        "status": "ok" if correct else "failed",
        "seconds": seconds,
        "algbw_gbps": algbw(nbytes, seconds) / 1e9,
        "busbw_gbps": busbw(nbytes, seconds, world_size) / 1e9,
        "correct": correct,
        "max_abs_err": max_abs_err,
        "wrong": wrong,
        "rounds": len(round_seconds),
        "warmup": warmup,
        "versions": versions,
        # every timed operation; the suite moves these into pytest-benchmark's stats
        "round_seconds": list(round_seconds),
    }
    if reason:
        row["reason"] = reason
    return row


def measure(
    c,
    pattern: str,
    nbytes: int,
    data,
    timing,
    warmup: int,
    fixed_rounds: int | None,
    meta: dict,
    before_timing=None,
) -> dict:
    """One pattern at one size, the same way in every worker: checked (which also compiles
    or allocates what it needs), warmed up, timed for the rounds the warm-up time asks
    for, then checked again. c is the worker's Collectives (check, time, the patterns)."""
    run = getattr(c, pattern)
    err1, wrong1 = c.check(run, data)
    if before_timing is not None:
        before_timing()
    warm = c.time(run, data, warmup)
    rounds = fixed_rounds or timing.rounds(max(warm))
    seconds = c.time(run, data, rounds)
    err2, wrong2 = c.check(run, data)
    return make_row(
        pattern=pattern,
        nbytes=nbytes,
        round_seconds=seconds,
        warmup=warmup,
        max_abs_err=max(err1, err2),
        wrong=max(wrong1, wrong2),
        **meta,
    )
