"""Presets: network sizes, batch sizes and how long each cell is timed."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    name: str
    scale: str          # "full" (the paper's networks) or "smoke" (tiny, for tests)
    warmup: int         # untimed steps after the first (compile) step
    min_rounds: int     # timed steps, at least
    max_rounds: int     # and at most
    budget_s: float     # timed steps fill about this many seconds within those bounds
    description: str

    def rounds(self, step_s: float) -> int:
        if step_s <= 0:
            return self.max_rounds
        return max(self.min_rounds, min(self.max_rounds, round(self.budget_s / step_s)))


PRESETS = {
    "paper": Preset("paper", "full", warmup=3, min_rounds=10, max_rounds=1000, budget_s=10.0,
                    description="the paper's networks and Table 7 batch sizes, 10 s of timed steps"),
    "quick": Preset("quick", "full", warmup=1, min_rounds=3, max_rounds=50, budget_s=1.0,
                    description="the paper's networks and batch sizes, a short timing budget"),
    "smoke": Preset("smoke", "smoke", warmup=1, min_rounds=3, max_rounds=50, budget_s=0.1,
                    description="tiny networks that run in seconds, to test the code paths"),
}
