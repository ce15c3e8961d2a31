"""The one measuring sequence of the scaling workers, and the hooks it runs them through.

Each worker (torch_ddp.py, jax_sharding.py, tensorflow_mirrored.py) builds its framework's
data-parallel training step as a Hooks object and hands it to measure(), which every
process of the run goes through alike:

1. the first step, timed as compile_s together with Hooks.compile() before it;
2. the warm-up steps;
3. the timed steps, the CPU meter around them; per step the slowest worker's time;
4. the replica check, then --save-weights;
5. comm_share: interleaved pairs of the normal step and the step without the gradient
   all-reduce, last, since the latter lets the replicas drift apart;

and returns the worker JSON: result.header's fields, the keys every worker writes, the
framework's own (Hooks.extra), and cpus. No framework is imported here.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

from xfbench.harness.threads import CpuMeter
from xfbench.scaling import result as R
from xfbench.scaling.cell import WorkerTask


class Hooks:
    """What differs between the frameworks. A worker sets the attributes and gives step,
    loss, replica_difference and save_weights; the other defaults suit one process that
    runs every replica itself."""

    backend: str  # how the gradients are all-reduced
    device_name: str
    versions: dict[str, str]
    threads_config: dict
    layout: str
    mode: str  # the adapter mode the step runs in
    replicas_here = 1  # replicas this process runs: its CPU time is shared out among them
    barrier_first_steps = True  # a barrier before the first and warm-up steps too
    # Run the step without the all-reduce once, untimed, before its pairs (its compile).
    warm_local_step = True
    # comm_share_how: what the step without the all-reduce is, and how it was timed.
    comm_comparison = ""

    def compile(self) -> None:
        """Work timed into compile_s just before the first step (an ahead-of-time compile)."""

    def barrier(self) -> None:
        """Return once every worker has reached it (each timed step starts at one)."""

    def step(self, local: bool = False) -> None:
        """One training step, returning once the device has finished it. local: the same
        step without the gradient all-reduce (comm_share's comparison, workers > 1)."""
        raise NotImplementedError

    def loss(self) -> float:
        """This process's loss of the last step."""
        raise NotImplementedError

    def slowest(self, seconds: list[float]) -> list[float]:
        """Each step's time as the slowest worker saw it."""
        return seconds

    def mean(self, values: list[float]) -> list[float]:
        """Each value's mean over the run's processes."""
        return values

    def replica_difference(self) -> tuple[float, float]:
        """(largest |difference| between a replica's trained weights and the first
        replica's, over all workers; largest |weight|)."""
        raise NotImplementedError

    def replicated(self) -> bool:
        """Whether the weights are kept as one whole copy per replica at all."""
        return True

    def save_weights(self, path: str) -> None:
        """Write the canonical weights (.npz) from one process."""
        raise NotImplementedError

    def cpus(self) -> list | None:
        """The CPUs the run is pinned to (asked on the CPU only)."""
        return sorted(os.sched_getaffinity(0))

    def extra(self) -> dict[str, Any]:
        """The framework's own keys of the worker JSON."""
        return {}


def measure(
    run: WorkerTask, hooks: Hooks, clock: Callable[[], float] = time.perf_counter
) -> dict[str, Any]:
    """Run the sequence (module docstring) and return the worker JSON."""
    cell = run.cell
    cpu = cell.device == "cpu"

    def timed(local: bool = False, barrier: bool = True) -> float:
        if barrier:
            hooks.barrier()  # outside the time: the step starts when every worker is there
        t0 = clock()
        hooks.step(local)
        return clock() - t0

    if hooks.barrier_first_steps:
        hooks.barrier()
    t0 = clock()
    hooks.compile()
    hooks.step()
    compile_s = clock() - t0
    for _ in range(run.warmup):
        timed(barrier=hooks.barrier_first_steps)
    with CpuMeter() as meter:
        seconds = [timed() for _ in range(run.steps)]
    seconds = hooks.slowest(seconds)
    # Read before comm_share's steps: the loss of the last timed step.
    used, loss = hooks.mean([meter.threads_used / hooks.replicas_here, hooks.loss()])

    max_diff, scale = hooks.replica_difference()
    agree = (
        bool(math.isfinite(max_diff) and max_diff <= R.REPLICA_RTOL * scale) and hooks.replicated()
    )
    if run.save_weights:
        hooks.save_weights(run.save_weights)
    comm_share, how = _comm_share(hooks, timed, cell.workers)

    out = R.header(cell, hooks.backend, hooks.device_name, hooks.versions)
    out.update(
        {
            **R.step_summary(seconds),
            "compile_s": compile_s,
            "warmup_steps": run.warmup,
            "comm_share": comm_share,
            "comm_share_how": how,
            "replicas_agree": agree,
            "replicas_max_diff": max_diff,
            "loss": loss,
            "threads_used": round(used, 2) if cpu else None,
            "threads_config": hooks.threads_config,
            "layout": hooks.layout,
            "mode": hooks.mode,
            **hooks.extra(),
            "cpus": hooks.cpus() if cpu else None,
        }
    )
    if not agree:
        out.update(
            status="failed",
            reason=f"replicas disagree after the timed steps: weights differ by up to "
            f"{max_diff:.3g}",
        )
    return out


def _comm_share(hooks: Hooks, timed, workers: int) -> tuple[float | None, str]:
    """(share, how): the step time the gradient all-reduce adds, from interleaved pairs of
    the normal step and the step without it; per step the slowest worker's time."""
    if workers == 1:
        return None, "one worker: nothing to communicate"
    if hooks.warm_local_step:
        timed(local=True)
    normal, alone = [], []
    for _ in range(R.COMM_PAIRS):  # interleaved, so drift in the machine hits both alike
        normal.append(timed())
        alone.append(timed(local=True))
    both = hooks.slowest(normal + alone)  # one exchange between the workers for both
    share, clipped = R.comm_share(both[: R.COMM_PAIRS], both[R.COMM_PAIRS :])
    how = hooks.comm_comparison + (
        "; clipped at 0 (the difference was within noise)" if clipped else ""
    )
    return share, how
