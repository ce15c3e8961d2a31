"""Durations measured outside the benchmark fixture, given to it as its rounds.

Some measurements cannot run inside pytest's process (data-parallel workers are
processes of their own); their per-step times still belong in pytest-benchmark's
stats, so that the JSON's stats, its table and --benchmark-compare mean the step time.
"""

from __future__ import annotations

from collections.abc import Iterable


def record_durations(benchmark, seconds: Iterable[float], mode: str = "external durations"):
    """Make `seconds` the fixture's rounds (one iteration each) and return its stats, or
    None when benchmarks are disabled. pytest-benchmark 5.3: `_make_stats(1)` registers a
    stats object with the session, `update(s)` adds one round; every statistic (median,
    iqr, ops, ...) is then computed by pytest-benchmark itself."""
    seconds = [float(s) for s in seconds]
    if not seconds:
        raise ValueError("no durations to record")
    if benchmark._mode:
        raise RuntimeError(f"the benchmark fixture was already used ({benchmark._mode})")
    benchmark._mode = mode  # used: no "fixture was not used" warning, no second use
    if benchmark.disabled:
        return None
    stats = benchmark._make_stats(1)
    for s in seconds:
        stats.update(s)
    return stats
