"""About how long a serving cell takes (`xfbench run --dry-run`): LoadGen's durations for
its scenario decide (the Server search's budget, else the minimum duration)."""

from __future__ import annotations

from xfbench.harness.estimate import BUILD_S
from xfbench.harness.presets import Preset


def seconds(cell, preset: Preset) -> float:
    from xfbench.serving.scenarios import TIMING

    timing = TIMING.get(preset.name, TIMING["paper"])
    return BUILD_S + (
        timing.search_budget_s if cell.scenario == "Server" else timing.min_duration_s
    )
