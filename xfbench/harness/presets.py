"""Presets: network sizes, batch sizes and how long each cell is timed."""

from __future__ import annotations

from dataclasses import dataclass

from xfbench.adapters.base import TASKS
from xfbench.models.networks import PAPER_NETWORKS


@dataclass(frozen=True)
class Preset:
    name: str
    scale: str  # "full" (the paper's networks) or "smoke" (tiny, for tests)
    warmup: int  # untimed steps after the first (compile) step
    min_rounds: int  # timed steps, at least
    max_rounds: int  # and at most
    budget_s: float  # timed steps fill about this many seconds within those bounds
    description: str
    # What `xfbench run` does when --task, --mode or --cell-timeout are not given.
    tasks: tuple[str, ...] = TASKS
    # True: run one mode per framework, its table7_mode (xfbench.frameworks); a framework
    # without one (or lacking that mode here) runs its first mode that runs on the device.
    # False: every mode.
    one_mode: bool = False
    cell_timeout_s: float = 1800.0
    # Adaptive rounds: above the budget's, as many as the warm-up steps' spread says the
    # median's 95 % interval needs to be within the target (harness.stats), up to this
    # many seconds of timed steps (0: the budget alone decides).
    time_cap_s: float = 0.0
    # The networks run when --model is not given (None: every network).
    networks: tuple[str, ...] | None = None

    def rounds(self, step_s: float, pilot=(), target: float | None = None) -> tuple[int, str]:
        """Timed rounds for a step of step_s seconds, and what chose them."""
        from xfbench.harness.stats import TARGET, rounds_for

        if step_s <= 0:
            return self.max_rounds, "max_rounds"
        budget = max(self.min_rounds, min(self.max_rounds, round(self.budget_s / step_s)))
        need = rounds_for(list(pilot), target or TARGET) if self.time_cap_s else None
        if need is None or need <= budget:
            return budget, "budget"
        cap = max(budget, min(self.max_rounds, int(self.time_cap_s / step_s)))
        return (need, "ci target") if need <= cap else (cap, "time cap")


PRESETS = {
    "paper": Preset(
        "paper",
        "full",
        warmup=3,
        min_rounds=10,
        max_rounds=1000,
        budget_s=10.0,
        description="the paper's networks and Table 7 batch sizes, 10 s of timed steps, "
        "more (up to 60 s) until the median's 95 % interval is within the target",
        cell_timeout_s=3600.0,
        time_cap_s=60.0,
    ),
    "quick": Preset(
        "quick",
        "full",
        warmup=2,
        min_rounds=3,
        max_rounds=50,
        budget_s=1.0,
        description="the paper's networks and batch sizes, a short timing budget "
        "(up to 5 s for the median's interval target)",
        cell_timeout_s=900.0,
        time_cap_s=5.0,
    ),
    "smoke": Preset(
        "smoke",
        "smoke",
        warmup=1,
        min_rounds=3,
        max_rounds=50,
        budget_s=0.1,
        description="tiny networks that run in seconds, to test the code paths",
        cell_timeout_s=120.0,
    ),
    # The CPU sweep of the README. Training FLOPs per step at Table 7's batches add up to
    # about 1.1 TFLOP over the nine networks; at 50-100 GFLOP/s per thread that is 11-22 s
    # per pass at one thread. Five steps per cell (compile, one warm-up, three timed) at 1 and
    # 2 threads. One warm-up is enough: measured with one, the first timed round of none of
    # the 27 one-thread cells was slower than the other two beyond their spread (docs/
    # running.md), now that freed memory stays mapped (harness/memory.py): the second
    # warm-up had been for TensorFlow's heap. Inference and the slower modes would triple it.
    "table7": Preset(
        "table7",
        "full",
        warmup=1,
        min_rounds=3,
        max_rounds=3,
        budget_s=0.0,
        description="Table 7's CPU columns: the paper's networks and batch sizes, "
        "training only, one mode per framework (its usual training path; docs/running.md), "
        "1 warm-up and 3 timed steps",
        tasks=("train",),
        one_mode=True,
        cell_timeout_s=900.0,
        networks=PAPER_NETWORKS,
    ),
    # table7's cells with rounds enough for an interval: 10 give every median a 95 %
    # interval (order statistics need 6; 10 reach 97.9 %) and the scores' bootstrap more
    # than three values per cell to draw from; 2 warm-ups. About 2.5 x table7's time.
    # What changes between runs is in no run's rounds (docs/reports.md): run it twice.
    "procurement": Preset(
        "procurement",
        "full",
        warmup=2,
        min_rounds=10,
        max_rounds=10,
        budget_s=0.0,
        description="Table 7's CPU columns as table7, with 2 warm-up and 10 timed steps a "
        "cell: every median's 95 % interval, for the scores (docs/reports.md)",
        tasks=("train",),
        one_mode=True,
        cell_timeout_s=1800.0,
        networks=PAPER_NETWORKS,
    ),
    # The checked-in reference's preset: every workload a score compares, at rounds enough
    # for every median's interval (6, harness.stats) and no more: the nine networks and the
    # two transformers trained and inferred, one mode per framework, 1 warm-up (enough for
    # table7, docs/running.md). The reference also runs the serving suite's Offline scenario
    # and the generation suite at this preset (docs/reports.md gives the commands); each
    # times 6 rounds. About 20 minutes a run on 2 Zen 4 cores at 2 threads.
    "reference": Preset(
        "reference",
        "full",
        warmup=1,
        min_rounds=6,
        max_rounds=6,
        budget_s=0.0,
        description="the checked-in reference's cells: every network trained and inferred, "
        "one mode per framework, 1 warm-up and 6 timed steps, the fewest that give every "
        "median a 95 % interval (docs/reports.md)",
        one_mode=True,
        cell_timeout_s=900.0,
    ),
}


def markdown_table() -> str:
    """docs/measurement.md's presets table, made from PRESETS."""
    lines = [
        "| preset | what it is | networks | warm-up steps | timed steps | cell time-out |",
        "|---|---|---|---|---|---|",
    ]
    for p in PRESETS.values():
        networks = "the small test sizes" if p.scale == "smoke" else "full size"
        networks += ", " + ("Shi's nine" if p.networks else "every network")
        if p.min_rounds == p.max_rounds:
            timed = f"exactly {p.min_rounds}"
        else:
            timed = f"{p.min_rounds} to {p.max_rounds}, filling {p.budget_s:g} s"
            timed += f"; adaptive up to {p.time_cap_s:g} s" if p.time_cap_s else ""
        name = f"`{p.name}`" + (" (default)" if p.name == "paper" else "")
        lines.append(
            f"| {name} | {p.description} | {networks} | {p.warmup} | {timed} | "
            f"{p.cell_timeout_s:g} s |"
        )
    return "\n".join(lines)
