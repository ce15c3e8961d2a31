"""How long a sweep's process groups should take, from the preset and the cells alone:
`xfbench run --dry-run` prints it, measuring and writing nothing. Each suite declares how
long one of its cells takes (plugin.Suite.seconds, in its own package, from the rates of
xfbench/harness/estimate.py); a suite that declares none (the all-reduce sweep) is "?"."""

from __future__ import annotations

from xfbench.harness.presets import PRESETS
from xfbench.plugin import declared


def cell_seconds(cell, preset_name: str) -> float | None:
    """About how long one cell takes, or None where its suite says nothing."""
    for suite in declared().values():
        seconds = suite.sweep.seconds if suite.sweep else None
        if seconds and suite.cell_type is not None and type(cell) is suite.cell_type:
            return seconds(cell, PRESETS[preset_name])
    return None


def group_seconds(cells, preset_name: str) -> float | None:
    """The sum over a group's cells; None when any cell's is not known."""
    times = [cell_seconds(getattr(c, "cell", c), preset_name) for c in cells]
    return None if any(t is None for t in times) else sum(times)
