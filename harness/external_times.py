"""Durations measured outside the benchmark fixture, recorded as if it had timed them.

Workers in other processes (torchrun ranks, one JAX process over several devices)
time their own operations; their per-operation seconds go into pytest-benchmark's
stats so that the JSON's stats, its terminal table and --benchmark-compare mean
those times. Relies on pytest-benchmark 5.3's fixture internals (_make_stats,
_mode), which tests/test_allreduce.py checks.
"""
from __future__ import annotations


def record_external_times(benchmark, seconds: list[float]) -> None:
    """Add each duration (seconds, one operation each) as one round of the fixture's stats."""
    if not seconds:
        raise ValueError("no durations to record")
    if any(not (s >= 0) for s in seconds):
        raise ValueError(f"durations must be non-negative numbers: {seconds!r}")
    if benchmark._mode:
        raise RuntimeError(f"the benchmark fixture was already used ({benchmark._mode})")
    benchmark._mode = "record_external_times(...)"
    if benchmark.disabled:      # --benchmark-disable: nothing is recorded, as pedantic() does
        return
    stats = benchmark._make_stats(1)
    for s in seconds:
        stats.update(s)
