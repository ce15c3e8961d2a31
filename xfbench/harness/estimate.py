"""How long a cell should take, from the preset and the cell alone: the rates every suite's
estimate assumes (each suite declares its own `seconds`, plugin.Suite; `xfbench run
--dry-run` prints their sums, measuring and writing nothing).

A cell's step is its FLOPs (the spec's) at an assumed rate: ASSUMED_GFLOPS_PER_THREAD on
the CPU (fp32 matrix code reaches 40-110 GFLOP/s a core on the machines this suite was
built on; docs/measurement.md), and ASSUMED_SHARE of a GPU's datasheet peak; BUILD_S to
build the network. The real time differs by the machine, often 2-5 times: an estimate to
plan with, not a number.
"""

from __future__ import annotations

from xfbench.harness.presets import Preset

ASSUMED_GFLOPS_PER_THREAD = 50.0
ASSUMED_SHARE = 0.3
BUILD_S = 2.0
# a decode step at small batch reads every weight: 10-35 GB/s over 2 threads of a Zen 4
# EPYC, by framework (docs/generation.md)
ASSUMED_GBPS_PER_THREAD = 8.0


def rate(cell) -> float:
    """Assumed FLOP/s of the cell's device."""
    if cell.device == "cpu":
        return ASSUMED_GFLOPS_PER_THREAD * 1e9 * max(1, getattr(cell, "threads", 1))
    from xfbench import machine
    from xfbench.published import peak_tflops

    names = [g.get("name") for g in machine.describe().get("gpus") or []]
    peak = peak_tflops(names[0] if names else None, cell.precision) or 20.0
    return ASSUMED_SHARE * peak * 1e12


def network_seconds(cell, preset: Preset) -> float:
    """A train or infer cell: its first step, the warm-ups and the rounds its budget gives."""
    from xfbench.models import get_spec

    spec = get_spec(cell.network, cell.scale, cell.tokens)
    step = spec.flops(cell.task, cell.batch_size) / rate(cell)
    rounds, _ = preset.rounds(step)
    return BUILD_S + (1 + preset.warmup + rounds) * step
