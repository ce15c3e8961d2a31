"""`xfbench run --minutes M`: a sweep planned to a time budget by timing fewer rounds a
cell, never fewer cells.

Before each process group, the rounds a cell for it and every group after it: the most,
from the preset's down to 1, whose estimated time fits what is left of the budget. The
estimate is the dry run's (harness/estimate.py: each cell's FLOPs at an assumed rate, its
build, first step, warm-ups and rounds), scaled by what the groups before took against
their own estimate: a framework's own groups where it has had one, else all groups so far
(the first group takes the estimate as it is: a GEMM peak foretold the networks' time
badly). Frameworks differ: on a 2-core Zen 3 EPYC, PyTorch's groups took 1.0 x their
estimate and JAX's 1.7-2.4 x (its XLA compilations). Each cell's record keeps its rounds,
and its interval is as wide as they make it (3 rounds: 75 %, 2: 50 %, 1: none). The
floor is one round a cell: a budget below what that takes is overrun, and said so.
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


def framework_of(cell) -> str:
    return getattr(getattr(cell, "cell", cell), "framework", "")


@dataclass
class Budget:
    seconds: float
    preset_name: str
    start: float = field(default_factory=lambda: time.monotonic())
    # by framework: [seconds its groups took, their estimate at the rounds they ran]
    taken: dict[str, list[float]] = field(default_factory=dict)

    @property
    def most(self) -> int:
        return max(1, PRESETS[self.preset_name].max_rounds)

    @property
    def scale(self) -> float:
        """All groups so far: their time over their estimate (1 before the first)."""
        spent = sum(t[0] for t in self.taken.values())
        estimated = sum(t[1] for t in self.taken.values())
        return spent / estimated if estimated > 0 else 1.0

    def scale_of(self, framework: str) -> float:
        spent, estimated = self.taken.get(framework, (0.0, 0.0))
        return spent / estimated if estimated > 0 else self.scale

    @property
    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.start)

    def needed(self, remaining: list[list], rounds: int) -> float:
        """The seconds these groups' cells are foretold to take at this many rounds."""
        by_framework: dict[str, list] = {}
        for c in (c for group in remaining for c in group):
            by_framework.setdefault(framework_of(c), []).append(c)
        return sum(self.scale_of(f) * estimate(cells, self.preset_name, rounds)
                   for f, cells in by_framework.items())  # fmt: skip

    def rounds(self, remaining: list[list]) -> int:
        """The rounds a cell for the next group, given the cells of it and every group
        after it: the most that fit what is left (1 where none does)."""
        left = self.left
        return next((r for r in range(self.most, 1, -1) if self.needed(remaining, r) <= left), 1)

    def done(self, cells: list, rounds: int, seconds: float) -> None:
        """A group ended: its time against its estimate sets its framework's scale."""
        for framework in {framework_of(c) for c in cells}:
            mine = [c for c in cells if framework_of(c) == framework]
            share = len(mine) / len(cells)
            kept = self.taken.setdefault(framework, [0.0, 0.0])
            kept[0] += seconds * share
            kept[1] += estimate(mine, self.preset_name, rounds)
