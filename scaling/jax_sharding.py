"""JAX data-parallel worker: one process, the batch sharded over W devices with jax.sharding.

    XLA_FLAGS=--xla_force_host_platform_device_count=W python -m scaling.jax_sharding \\
        --network resnet56 --framework jax --workers W --batch 128 --out r.json

(scaling/launch.py builds this command.) A one-axis Mesh over W devices ("batch"): the
training state (parameters, momentum, BatchNorm statistics) is replicated on every device,
the batch and labels are split along the batch dimension, and the JAX adapter's own training
step (adapters/jax/workload.py make_train_step: forward, loss, backward, SGD momentum) is
jitted with those shardings. XLA's SPMD partitioner then runs each device on its rows and
inserts the all-reduces of the gradients (and of the batch statistics: BatchNorm here
normalises over the global batch, as the one-device step does, where DDP normalises per
worker).

On the CPU the W devices are host devices made by XLA's flag, which must be set before jax
is imported (the launcher does it; this module adds it when missing). XLA's CPU client takes
no thread count: its pools are sized from the CPU affinity, so this process is pinned to
W * T CPUs in all (T threads per worker).
"""
from __future__ import annotations

import os
import sys
import time

from scaling import result as R
from scaling.cell import Run, parse_args

PROG = "python -m scaling.jax_sharding"
HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def main(argv: list[str] | None = None) -> int:
    run = parse_args(argv, framework="jax", prog=PROG)
    cell = run.cell
    if cell.device == "cpu":
        flags = os.environ.get("XLA_FLAGS", "")
        if HOST_DEVICES_FLAG not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} {HOST_DEVICES_FLAG}={cell.workers}".strip()
        # Before jax is imported: XLA sizes its CPU thread pools from this affinity.
        try:
            R.pin(R.worker_cpus(0, cell.threads_per_worker, cell.workers))
        except RuntimeError as e:
            R.write(run.out, R.failed(cell, str(e)))
            return 0
    try:
        out = _measure(run)
    except Exception as e:
        R.write(run.out, R.failed(cell, f"{type(e).__name__}: {e}"))
        raise
    R.write(run.out, out)
    return 0


def _measure(run: Run) -> dict:
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from adapters.base import Cell
    from adapters.jax import ADAPTER
    from adapters.jax.workload import JaxWorkload, make_train_step
    from harness.threads import CpuMeter
    from models import get_spec, initial_weights

    cell = run.cell
    kind = {"cpu": "cpu", "cuda": "cuda"}[cell.device]
    try:
        devices = jax.devices(kind)
    except RuntimeError as e:
        raise RuntimeError(f"JAX sees no {kind} device: {str(e).splitlines()[0]}") from None
    if len(devices) < cell.workers:
        hint = f" (is {HOST_DEVICES_FLAG} in XLA_FLAGS?)" if kind == "cpu" else ""
        raise RuntimeError(f"{cell.workers} workers need {cell.workers} {kind} devices; JAX "
                           f"sees {len(devices)}{hint}")
    devices = devices[:cell.workers]
    spec = get_spec(cell.network, cell.scale)
    threads = ADAPTER.configure_threads(cell.threads_per_worker * cell.workers) \
        if kind == "cpu" else {}

    # The adapter's own one-device cell on the global batch: its state and batch, in the
    # layouts its network computes in, are then spread over the mesh.
    one = Cell(cell.network, "jax", "jit", cell.precision, f"{kind}:0" if kind != "cpu" else "cpu",
               cell.threads_per_worker, cell.global_batch, "train", "resident", cell.scale)
    work = JaxWorkload(spec, one, initial_weights(spec, 0))
    mesh = Mesh(np.array(devices), ("batch",))
    replicated = NamedSharding(mesh, P())
    # Time-major sequences (T, N) split on their second dimension, everything else on the first.
    rows = NamedSharding(mesh, P(None, "batch") if spec.sequence else P("batch"))
    state = jax.device_put(work.state, replicated)
    x, y = jax.device_put(work.x_host, rows), jax.device_put(work.y_host, rows)
    work.state = work.x = work.y = None   # the one-device copies are not used again

    step = jax.jit(make_train_step(spec, work.dtype, work.loss_scaling),
                   in_shardings=(replicated, rows, rows), out_shardings=(replicated, replicated),
                   donate_argnums=0)
    t0 = time.perf_counter()
    with jax.default_matmul_precision(work.matmul_precision):
        compiled = step.lower(state, x, y).compile()
    sharding = _check_sharded(compiled, x, devices)

    def timed() -> float:
        nonlocal state
        t0 = time.perf_counter()
        state, loss_ = compiled(state, x, y)
        jax.block_until_ready((state, loss_))
        timed.loss = loss_
        return time.perf_counter() - t0

    timed()
    compile_s = time.perf_counter() - t0
    for _ in range(run.warmup):
        timed()
    with CpuMeter() as meter:
        steps = [timed() for _ in range(run.steps)]

    max_diff, scale = 0.0, 0.0
    for leaf in jax.tree.leaves(state["params"]):
        copies = [np.asarray(s.data) for s in leaf.addressable_shards]
        scale = max(scale, float(np.abs(copies[0]).max()))
        max_diff = max([max_diff] + [float(np.abs(c - copies[0]).max()) for c in copies[1:]])
    agree = max_diff <= R.REPLICA_RTOL * scale and all(
        leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(state["params"]))
    work.state = state
    if run.save_weights:
        np.savez(run.save_weights, **work.weights())

    what = "host device" if kind == "cpu" else "GPU"
    out = R.header(cell, f"XLA all-reduce over {cell.workers} {what}"
                         + ("s" if cell.workers > 1 else ""),
                   devices[0].device_kind, ADAPTER.versions())
    out.update({
        **R.step_summary(steps), "compile_s": compile_s, "warmup_steps": run.warmup,
        "comm_share": None,
        "comm_share_how": "not exposed: the gradient all-reduces are fused into the one "
                          "compiled step, and no variant without them computes the same step "
                          "(per-collective times need a profiler trace)",
        "replicas_agree": agree, "replicas_max_diff": max_diff,
        # The loss is the mean over the global batch: the mean of the workers' equal shares.
        "loss": float(timed.loss),
        "threads_used": round(meter.threads_used / cell.workers, 2) if kind == "cpu" else None,
        "threads_config": threads, "layout": work.info["layout"], "mode": "jit",
        "sharding": sharding,
        "cpus": sorted(os.sched_getaffinity(0)) if kind == "cpu" else None,
    })
    if not agree:
        out.update(status="failed", reason=f"replicas disagree after the timed steps: weights "
                                           f"differ by up to {max_diff:.3g}")
    return out


def _check_sharded(compiled, x, devices) -> dict:
    """Prove the program is data-parallel over the W devices: the batch lives in W pieces
    on W devices, the compiled step takes it so, and (W > 1) reduces over them."""
    w = len(devices)
    batch_in = compiled.input_shardings[0][1]
    pieces = {tuple((s.start, s.stop) for s in shard.index) for shard in x.addressable_shards}
    hlo = compiled.as_text()
    found = {
        "mesh_devices": w,
        "batch_devices": len(x.sharding.device_set),
        "batch_pieces": len(pieces),
        "compiled_batch_sharding": str(batch_in),
        "all_reduces_in_step": hlo.count("all-reduce("),
    }
    if x.sharding.device_set != set(devices) or len(pieces) != w:
        raise RuntimeError(f"the batch is not split over the {w} devices: {found}")
    if batch_in.device_set != set(devices) or (w > 1 and batch_in.is_fully_replicated):
        raise RuntimeError(f"the compiled step does not take the batch split: {found}")
    if w > 1 and found["all_reduces_in_step"] == 0:
        raise RuntimeError(f"the compiled step has no all-reduce over the devices: {found}")
    return found


if __name__ == "__main__":
    sys.exit(main())
