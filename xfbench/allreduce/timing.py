"""How long each message size is timed, per preset.

nccl-tests times 20 iterations after 5 warm-up ones by default; the paper preset
keeps that as its floor and adds rounds for small sizes until a time budget is
spent, so that the median of microsecond operations is stable. Every rank must
run the same number of rounds (each round is a collective), so the rounds are
computed from the warm-up time already agreed across ranks (its maximum).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Timing:
    warmup: int
    min_rounds: int
    max_rounds: int
    budget_s: float  # seconds of timed operations per size and pattern, within the bounds

    def rounds(self, op_seconds: float) -> int:
        if op_seconds <= 0:
            return self.max_rounds
        return max(self.min_rounds, min(self.max_rounds, round(self.budget_s / op_seconds)))

    def as_dict(self) -> dict:
        return asdict(self)


TIMINGS = {
    "paper": Timing(warmup=5, min_rounds=20, max_rounds=1000, budget_s=1.0),
    "table7": Timing(warmup=5, min_rounds=20, max_rounds=1000, budget_s=1.0),
    "procurement": Timing(warmup=5, min_rounds=20, max_rounds=1000, budget_s=1.0),
    "reference": Timing(warmup=5, min_rounds=20, max_rounds=1000, budget_s=1.0),
    "quick": Timing(warmup=2, min_rounds=5, max_rounds=100, budget_s=0.2),
    "smoke": Timing(warmup=1, min_rounds=3, max_rounds=10, budget_s=0.02),
}
