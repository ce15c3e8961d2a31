"""Every environment variable xfbench reads, declared once: each is a Variable here, or in
the package of the suite that reads it (declared with `declare`), and docs/running.md's
table of them is made from ENVIRONMENT (tests/test_options.py). A value xfbench does not
know is refused in one line (check_environment) rather than quietly read as the default."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from xfbench.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class Variable:
    """An environment variable xfbench reads. values: the ones it knows (anything else is
    refused in one line rather than quietly read as the default); () takes any text."""

    name: str
    values: tuple[str, ...] = ()
    meaning: str
    who: str = "you"  # "you": set by the user; "xfbench": set for its own children
    # reads the value further, UsageError in one line where it cannot (a list of CPUs)
    check: Callable[[Variable], object] | None = None

    def read(self) -> str | None:
        value = os.environ.get(self.name)
        if value is None or value == "":
            return None
        if self.values and value not in self.values:
            raise UsageError(
                f"{self.name}={value!r} is not a value xfbench knows; valid: "
                f"{', '.join(self.values)}, or leave it unset"
            )
        return value


# Each variable once, by name; code reads or sets it through its Variable (`CELL_DIR.name`).
CACHE = Variable(
    name="XFBENCH_CACHE",
    meaning="the folder of the canonical ONNX files (default ~/.cache/xfbench/onnx)",
)

MALLOC = Variable(
    name="XFBENCH_MALLOC",
    values=("keep", "default"),
    meaning="`keep` (the default): glibc keeps freed memory for reuse, every framework "
    "alike; `default`: glibc's own settings",
)

FAULT = Variable(
    name="XFBENCH_FAULT",
    meaning="tests only: `<task>-<cell-id>:ACTION`, comma-separated, ACTION `kill`, "
    "`sleep` or `raise`: that cell kills its process, hangs or raises; `test#N:kill` or "
    "`test#N:sleep`: so does the session's N-th test as it starts; `written:kill`: the "
    "process is killed once its --benchmark-json or --junitxml first holds a test",
)

SLOWDOWN = Variable(
    name="XFBENCH_SLOWDOWN",
    meaning="benchmarks of xfbench compare's detection only: `FRAMEWORK:SHARE`, e.g. "
    "torch:0.2: each timed step (or run of a generator) of that framework's cells is "
    "followed by a sleep of SHARE times its own duration, a real slowdown of known size "
    "(benchmarks/verdicts.py)",
)

REQUIRE_BROWSER = Variable(
    name="XFBENCH_REQUIRE_BROWSER",
    values=("1",),
    meaning="tests only: `1` fails the report's browser test where Chromium is absent "
    "(.ci/run sets it) instead of skipping it",
)

CELL_DIR = Variable(
    name="XFBENCH_CELL_DIR",
    meaning="the results folder a runner's child writes its cells into",
    who="xfbench",
)

JOB = Variable(
    name="XFBENCH_JOB",
    meaning="the job file a runner's child runs: its suite, its cells, and the settings they "
    "are measured with (runner.group)",
    who="xfbench",
)

MARKER = Variable(
    name="XFBENCH_MARKER",
    meaning="the file a runner's child names the cell in flight in",
    who="xfbench",
)

COPY = Variable(
    name="XFBENCH_COPY",
    meaning="`INDEX/COUNT/WAIT_S`: this runner's child is one of COUNT copies of its cells "
    "run at once (--copies), each waiting up to WAIT_S seconds for the others",
    who="xfbench",
)

COPY_DIR = Variable(
    name="XFBENCH_COPY_DIR",
    meaning="the folder where the copies of --copies meet before and after each cell's "
    "timed rounds",
    who="xfbench",
)

# xfbench's own variables; ENVIRONMENT adds those the suites declare as they are imported.
OWN: tuple[Variable, ...] = (
    CACHE,
    MALLOC,
    FAULT,
    SLOWDOWN,
    REQUIRE_BROWSER,
    CELL_DIR,
    JOB,
    MARKER,
    COPY,
    COPY_DIR,
)
ENVIRONMENT: list[Variable] = list(OWN)


def declare(variable: Variable) -> Variable:
    """A variable a suite reads, in ENVIRONMENT (so checked, and in the docs)."""
    if all(v.name != variable.name for v in ENVIRONMENT):
        ENVIRONMENT.append(variable)
    return variable


def by_name() -> dict[str, Variable]:
    return {v.name: v for v in ENVIRONMENT}


FAULT_ACTIONS = ("kill", "sleep", "raise")


def faults() -> dict[str, str]:
    """XFBENCH_FAULT as {cell key: action}; UsageError for an entry it cannot read."""
    out = {}
    for entry in (FAULT.read() or "").split(","):
        if not entry.strip():
            continue
        cell, _, action = entry.strip().rpartition(":")
        if not cell or action not in FAULT_ACTIONS:
            raise UsageError(
                f"XFBENCH_FAULT entry {entry!r} is not <task>-<cell-id>:{'|'.join(FAULT_ACTIONS)}"
            )
        out[cell] = action
    return out


def slowed(framework: str, step):
    """step, slowed by XFBENCH_SLOWDOWN's share where it names this framework: each call
    then sleeps that share of its own duration, so the slowdown is of the step's size and
    goes through the same timers and noise as the step itself."""
    value = SLOWDOWN.read()
    if not value:
        return step
    name, _, share = value.partition(":")
    try:
        share_f = float(share)
    except ValueError:
        share_f = -1.0
    if not name or not 0 < share_f < 10:
        raise UsageError(f"{SLOWDOWN.name}={value!r} is not FRAMEWORK:SHARE, e.g. torch:0.2")
    if name != framework:
        return step

    def step_slowed(*args, **kwargs):
        t0 = time.perf_counter()
        out = step(*args, **kwargs)
        time.sleep(share_f * (time.perf_counter() - t0))
        return out

    return step_slowed


def cpu_list(variable: Variable) -> list[int] | None:
    """An environment variable holding CPU numbers, comma-separated, or None when unset."""
    text = variable.read()
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() for p in parts):
        raise UsageError(f"{variable.name}={text!r}: write CPU numbers, comma-separated, e.g. 0,1")
    return sorted({int(p) for p in parts})


def check_environment() -> None:
    """Every xfbench variable that is set holds a value xfbench knows (UsageError: one line)."""
    for variable in ENVIRONMENT:
        variable.read()
        if variable.check:
            variable.check(variable)
    faults()


def environment_table() -> str:
    """docs/running.md's table of the environment variables xfbench reads: its own, then
    the suites' by name (whatever order their packages were imported in)."""
    lines = ["| variable | values | set by |", "|---|---|---|"]
    declared = sorted((v for v in ENVIRONMENT if v not in OWN), key=lambda v: v.name)
    for v in (*OWN, *declared):
        lines.append(f"| `{v.name}` | {v.meaning} | {v.who} |")
    return "\n".join(lines)
