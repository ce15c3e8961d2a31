"""About how long a scaling cell takes (`xfbench run --dry-run`): all its workers' first
step, warm-ups and rounds, the global batch's FLOPs over every worker's threads."""

from __future__ import annotations

from xfbench.harness.estimate import ASSUMED_GFLOPS_PER_THREAD, BUILD_S
from xfbench.harness.presets import Preset


def seconds(cell, preset: Preset) -> float:
    from xfbench.models import get_spec

    spec = get_spec(cell.network, cell.scale)
    rate = ASSUMED_GFLOPS_PER_THREAD * 1e9 * cell.threads_per_worker * cell.workers
    step = spec.flops("train", cell.global_batch) / rate
    return 3 * BUILD_S + (1 + preset.warmup + preset.min_rounds) * step
