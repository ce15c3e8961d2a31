"""What the GPU acceptance plan is made of, for the suites that declare their steps of it
(plugin.Suite's `gpu_steps` and `gpu_parts`) and for xfbench/acceptance/steps.py, which
puts them in order and runs them: a step (one child process: a pytest run of a suite or an
`xfbench run` sweep), the commands it runs, and what a suite builds its steps from."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import xfbench

SUITES = Path(xfbench.__file__).resolve().parent / "suites"
# The suite's own tests exist in a checkout only (they are not installed).
TESTS = Path(xfbench.__file__).resolve().parents[1] / "tests"

# The options through which a step's command names what it writes.
OUTPUT_OPTIONS = ("--benchmark-json", "--junitxml", "--results", "--into")

# The presets the plan runs at: the full sizes on a GPU (quick, paper), tiny ones for the
# CPU's rehearsal (smoke).
PRESETS = ("quick", "paper", "smoke")


@dataclass(frozen=True)
class Step:
    name: str
    part: str
    cap_s: int  # its own time-out; the run's budget may cut it shorter
    argv: tuple[str, ...]
    what: str  # one line for the summary
    needs: tuple[Path, ...] = field(default=())  # files that must exist (tests/ in a checkout)
    writes: tuple[Path, ...] = field(default=())  # outputs not named by an OUTPUT_OPTIONS
    # its place among its part's steps (acceptance/steps.py says what each place is for the
    # first part), before the order the suites are declared in
    order: int = 0
    # its cap in the CPU's rehearsal, where longer than cap_s (acceptance/steps.py)
    cpu_cap_s: int = 0

    @property
    def outputs(self) -> tuple[Path, ...]:
        """The files and folders the step writes: read off its command line, and writes."""
        found = list(self.writes)
        for i, arg in enumerate(self.argv):
            name, eq, value = arg.partition("=")
            if name in OUTPUT_OPTIONS:
                found.append(Path(value if eq else self.argv[i + 1]))
        return tuple(found)


@dataclass(frozen=True)
class Context:
    """What a suite's steps are built from: the device and preset of the run, its output
    folder, and the options every sweep of it takes (`first`: the first part's, which
    measure no roofs: its roofs step has, into the same folder)."""

    device: str
    preset: str
    out: Path
    sweep: tuple[str, ...]

    @property
    def first(self) -> tuple[str, ...]:
        return (*self.sweep, "--skip-roofs")

    def json(self, name: str) -> str:
        """The option that writes a pytest step's results as OUT/NAME.json."""
        return f"--benchmark-json={self.out / (name + '.json')}"


def pytest_command(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args)


def sweep_command(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "xfbench.harness.cli", "run", "--quiet", *args)
