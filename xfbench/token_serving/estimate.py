"""About how long a token-serving cell takes (`xfbench run --dry-run`): each bucket's
generations and check as a generation cell's, then LoadGen: 64 queries or the minimum
duration (SingleStream), the duration and a half (Offline), or the search's budget and the
confirmation's queries at half the throughput (Server)."""

from __future__ import annotations

from xfbench.generation.estimate import one_generation
from xfbench.harness.estimate import BUILD_S
from xfbench.harness.presets import Preset


def seconds(cell, preset: Preset) -> float:
    from xfbench.token_serving.measure import SERVER_QUERIES, SINGLESTREAM_QUERIES, timing
    from xfbench.token_serving.sut import batching

    plan = timing(preset.name)
    policy = batching(cell.scenario, cell.batch_size, ttft_bound_ms=0.0)
    total = BUILD_S
    for b in policy.buckets:
        one, check = one_generation(cell, b)
        total += check + (2 + preset.warmup) * one
    alone, _ = one_generation(cell, 1)
    largest, _ = one_generation(cell, policy.max_batch)
    if cell.scenario == "SingleStream":
        return total + max(plan.min_duration_s, SINGLESTREAM_QUERIES * alone)
    if cell.scenario == "Offline":
        return total + 1.65 * plan.min_duration_s
    return total + plan.search_budget_s + SERVER_QUERIES / (0.5 * policy.max_batch / largest)
