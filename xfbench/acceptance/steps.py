"""The steps of the acceptance run, as data: what each runs, in which part, for how long.

Every step is one child process: a pytest run of a suite (its --benchmark-json in the
output folder) or an `xfbench run` sweep (its cells in OUT/results, the runner's folder,
which `xfbench report` reads and which resumes where an earlier call stopped). Parts group
steps that fit one call of about ten minutes on an H100; `--part` picks them.

A suite declares its own steps and parts (plugin.Suite's `gpu_steps` and `gpu_parts`,
with the step's vocabulary in xfbench/harness/gpu_plan.py: Table 7's network suite's in
xfbench/networks/gpu_steps.py); here are the machine's steps (the probe, the roofs, the GPU
tests) and the order: the parts by their rank, the first part's steps by their `order`.

`--device cpu --preset smoke` gives the same steps at smoke sizes on the CPU: the GPU-only
cells skip with their reason, and the commands, their outputs and the summary are checked
(tests/test_acceptance.py).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from xfbench.harness.gpu_plan import PRESETS, TESTS, Context, Step, pytest_command
from xfbench.plugin import declared

# PARTS too, read once the suites are declared (__getattr__ below)
__all__ = ["BUDGET_S", "PRESETS", "Step", "chosen", "parts", "steps"]

# Each part fits one 15-minute GPU window: its caps, the probe's and RESERVE_S within
# BUDGET_S (tests/test_gpu_window.py). The parts run in the order of what they measure
# against the GPU goals (docs/gpus.md): the first window's headline figures, decoding,
# compiled training, Table 7's launch-bound column, then the rest. Each part's rank places
# it: these are the machine's; a suite ranks its own (gpu_parts).
# The raw GEMM at 8192 (CuPy against torch.matmul and JAX, 46 s on the H100) is the first
# part's; the GEMM's own part sweeps every shape and type.
OWN_PARTS = {
    "probe": -1,
    "first": 0,
    "checks": 150,
}
# The first part's steps run by their `order`, the figures a buyer reads first first: the
# device's roofs (0: does it deliver its datasheet), the raw GEMM (10), the headline
# networks' training (20), GPT-2's decoding (30), Table 7's column and JAX (40), then the
# GPU tests (50) and the equivalence checks (60). Caps from the H100's window (docs/gpus.md:
# measured there, then with a margin).
BUDGET_S = 540  # 9 minutes: a window's 15 less the machine's start, transfers, margin

# Figures the acceptance run must reach: CuPy's bf16 GEMM within 5 % of torch.matmul in
# the same run (xfbench/gemm/report.py, CUPY_OVER_TORCH_MIN); ResNet-50 against the
# published H100 range, which xfbench/published.toml holds and the report prints beside
# our cells.


def ranks() -> dict[str, int]:
    """Every part's rank: the machine's, and each suite's own."""
    found = dict(OWN_PARTS)
    for suite in declared().values():
        found.update(suite.gpu.parts if suite.gpu else {})
    return found


def parts() -> tuple[str, ...]:
    """The parts in the order a window runs them (the probe aside: every call runs it)."""
    return tuple(p for p, _ in sorted(ranks().items(), key=lambda kv: kv[1]) if p != "probe")


def __getattr__(name: str):
    if name == "PARTS":  # read once the suites are declared
        return parts()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def steps(device: str, preset: str, out: Path) -> list[Step]:
    """Every step, in the order it runs."""
    results = str(out / "results")
    sweep = ("--device", device, "--preset", preset, "--results", results)
    if device == "cpu":  # the CPU check: one thread count, not the sweep over them
        sweep += ("--threads", "1")
    c = Context(device=device, preset=preset, out=out, sweep=sweep)
    probe = Step(
        name="probe",
        part="probe",
        cap_s=16,  # 7-13 s on the H100's machines
        argv=(sys.executable, "-m", "xfbench.acceptance.probe", str(out / "probe.json")),
        what="the machine, and the versions and devices each framework sees",
        writes=(out / "probe.json",),
        cpu_cap_s=30,
    )
    every = [probe, _roofs_step(c), *_gpu_tests(out)]
    for suite in declared().values():
        every += suite.gpu.steps(c) if suite.gpu else []
    rank = ranks()
    every.sort(key=lambda step: (rank[step.part], step.order))  # stable: declared order next
    if device != "cpu":
        return every
    # The CPU's rehearsal of the first part (`--device cpu --preset smoke`, which CI runs)
    # under caps of its own (cpu_cap_s): three times each step's time on a 2-vCPU AMD EPYC
    # of family 25 (Zen 3, AVX2 only, the slowest CPU these runs have met), run alone, where
    # the GPU's cap is shorter. Under the GPU's caps its roofs (7 s of 10) and equivalence
    # checks (34 of 68) had timed out with other checks running beside them. The budget on
    # the CPU is the sum of its steps' caps (cli.py), so a slow CPU never runs out of it.
    return [replace(step, cap_s=max(step.cap_s, step.cpu_cap_s)) for step in every]


def _roofs_step(c: Context) -> Step:
    """The device's roofs, into the sweeps' folder (the report reads them there)."""
    roofs = ("--device", c.device) if c.device != "cpu" else ("--threads", "1")
    return Step(
        name="first-roofs",
        part="first",
        cap_s=10,
        argv=(
            sys.executable,
            "-m",
            "xfbench.roofline.roofs",
            *roofs,
            "--into",
            str(c.out / "results" / "roofs.json"),
        ),
        what="the device's roofs: device-to-device bandwidth and each type's matmul peak",
        cpu_cap_s=21,
    )


def _gpu_tests(out: Path) -> list[Step]:
    """The GPU tests: the first part's, after its measurements, and the checks part's
    (a suite's checks beside them)."""
    return [
        Step(
            name="first-gpu-tests",
            part="first",
            cap_s=48,
            argv=pytest_command(
                str(TESTS / "test_gpu.py"),
                "-m",
                "gpu",
                # Inductor's first compilations take minutes, and bf16 decoding is the
                # generation's: the checks part runs those, within the 38 s measured
                "-k",
                "not compiled and not bf16",
                f"--junitxml={out / 'gpu-tests.xml'}",
            ),
            what="the GPU tests (the gpu marker), but for the compiled modes and bf16 decoding",
            needs=(TESTS / "test_gpu.py",),
            order=50,
            cpu_cap_s=9,
        ),
        Step(
            name="gpu-tests",
            part="checks",
            cap_s=300,
            argv=pytest_command(
                str(TESTS / "test_gpu.py"),
                "-m",
                "gpu",
                f"--junitxml={out / 'gpu-tests.xml'}",
            ),
            what="the GPU tests (the gpu marker)",
            needs=(TESTS / "test_gpu.py",),
        ),
    ]


def chosen(all_steps: list[Step], parts: list[str], names: list[str] | None) -> list[Step]:
    """The probe, then the steps of the parts asked for, or those named (--steps), in
    run order: every call records the machine it ran on."""
    if names:
        return [s for s in all_steps if s.part == "probe" or s.name in names]
    return [s for s in all_steps if s.part == "probe" or s.part in parts]
