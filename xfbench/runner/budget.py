"""`xfbench run --minutes M`: a sweep planned to a time budget by timing fewer rounds a
cell, never fewer cells.

Before each process group, the rounds a cell for it and every group after it: the most,
from the preset's down to 1, whose estimated time fits what is left of the budget. The
estimate is the dry run's (harness/estimate.py: each cell's FLOPs at an assumed rate, its
build, first step, warm-ups and rounds), scaled by what the groups before took against
their own estimate (the first group takes it as it is: a GEMM peak foretold the networks'
time badly, a Zen 3 EPYC with 1.6 x the assumed per-thread peak taking 1.9 x the
estimate). Each cell's record keeps its rounds, and its
interval is as wide as they make it (3 rounds: 75 %, 2: 50 %, 1: none).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from xfbench.harness.estimate import network_seconds
from xfbench.harness.presets import PRESETS


def preset_with(preset_name: str, rounds: int):
    return replace(PRESETS[preset_name], min_rounds=rounds, max_rounds=rounds, budget_s=0.0,
                   time_cap_s=0.0)  # fmt: skip


def estimate(cells, preset_name: str, rounds: int) -> float:
    """The dry run's seconds for these network cells at this many rounds a cell."""
    preset = preset_with(preset_name, rounds)
    return sum(network_seconds(getattr(c, "cell", c), preset) for c in cells)


@dataclass
class Budget:
    seconds: float
    preset_name: str
    scale: float = 1.0  # the machine's time over the estimate's, as measured so far
    start: float = field(default_factory=time.monotonic)
    spent: float = 0.0  # by the groups done
    estimated: float = 0.0  # their estimate at the rounds they ran

    @property
    def most(self) -> int:
        return max(1, PRESETS[self.preset_name].max_rounds)

    def rounds(self, remaining: list[list]) -> int:
        """The rounds a cell for the next group, given the cells of it and every group
        after it: the most that fit what is left."""
        left = self.seconds - (time.monotonic() - self.start)
        cells = [c for group in remaining for c in group]
        for r in range(self.most, 0, -1):
            if self.scale * estimate(cells, self.preset_name, r) <= left:
                return r
        return 1

    def done(self, cells: list, rounds: int, seconds: float) -> None:
        """A group ended: its time against its estimate sets the scale for the rest."""
        self.spent += seconds
        self.estimated += estimate(cells, self.preset_name, rounds)
        if self.estimated > 0:
            self.scale = self.spent / self.estimated
