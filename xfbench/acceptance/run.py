"""Running the steps: each a child under its own time-out, all under one budget.

A step gets min(its cap, what is left of the budget less RESERVE_S for the summary and
the archive); a step for which less than MIN_STEP_S is left is skipped and says so. A
step that fails, times out or is killed is recorded and the next one starts: nothing
stops the run, not even a failure of what runs after each step (the summary, the pack). Each step's output goes to OUT/logs/<step>.log; its tail is printed when
it did not pass, and kept in OUT/steps.json.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from xfbench.acceptance.steps import Step
from xfbench.harness import launch

RESERVE_S = 30  # kept back for the summary, the report and the archive
MIN_STEP_S = 20
TAIL_LINES = 15  # shorter than a failure record's: the summary shows it


@dataclass
class Outcome:
    step: str
    status: str  # passed, failed, timeout, oom, killed, skipped, interrupted
    seconds: float
    reason: str = ""  # one line
    timeout_s: float | None = None
    log_tail: str = ""  # the last lines of its output, when it did not pass


def run_steps(
    steps: list[Step],
    budget_s: float,
    out: Path,
    say=print,
    clock=time.monotonic,
    after=lambda outcomes: None,
) -> list[Outcome]:
    """Run the steps in order, calling after(outcomes so far) when each ends; an interrupt
    (Ctrl-C) ends the step in flight, records it as interrupted and leaves the rest,
    returning what was done."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    start = clock()
    outcomes = []
    interrupted = False
    for step in steps:
        if interrupted:
            break
        left = budget_s - (clock() - start) - RESERVE_S
        outcome = _not_run(step, left)
        if outcome is None:
            timeout = min(step.cap_s, left)
            say(f"=== {step.name} ({step.what}; time-out {timeout:.0f} s)")
            say("$ " + " ".join(step.argv))
            t0 = clock()
            try:
                outcome = _run(step, timeout, logs / f"{step.name}.log", clock)
            except KeyboardInterrupt:  # launch.wait has killed the step's process group
                outcome = Outcome(
                    step=step.name,
                    status="interrupted",
                    seconds=clock() - t0,
                    reason="Ctrl-C",
                    timeout_s=timeout,
                )
                interrupted = True
        outcomes.append(outcome)
        say(f"=== {step.name}: {outcome.status}, {outcome.seconds:.0f} s {outcome.reason}")
        if outcome.log_tail:
            say(outcome.log_tail)
        # each outcome with the command it ran (a reference made of it plans its cells so)
        done = [{**asdict(o), "argv": list(s.argv)} for o, s in zip(outcomes, steps)]
        (out / "steps.json").write_text(json.dumps(done, indent=1))
        try:
            after(outcomes)
        except Exception as e:  # the summary or the pack: never a reason to stop the steps
            say(f"=== after {step.name}: {type(e).__name__}: {e}; the next step runs")
    return outcomes


def _not_run(step: Step, left: float) -> Outcome | None:
    """The outcome of a step that cannot start (what it needs is missing, too little of the
    budget is left), or None."""
    missing = [str(p) for p in step.needs if not p.exists()]
    if missing:
        return Outcome(step.name, "skipped", 0.0, f"needs {', '.join(missing)}")
    if left < MIN_STEP_S:
        return Outcome(step.name, "skipped", 0.0, f"only {max(left, 0):.0f} s of the budget left")
    return None


def _run(step: Step, timeout: float, log: Path, clock) -> Outcome:
    t0 = clock()
    before = launch.oom_kills()
    with log.open("w") as f:
        end = launch.wait(launch.start(step.argv, stdout=f), timeout, oom_before=before)
    seconds = clock() - t0
    if end.returncode == 0 and not end.timed_out:
        return Outcome(step.name, "passed", seconds, timeout_s=timeout)
    status, reason = launch.failure(end, timeout)
    tail = launch.tail(log.read_text(errors="replace"), TAIL_LINES)
    return Outcome(
        step=step.name,
        status=status,
        seconds=seconds,
        reason=reason,
        timeout_s=timeout,
        log_tail=tail,
    )
