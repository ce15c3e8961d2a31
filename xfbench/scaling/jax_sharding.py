"""JAX data-parallel worker: one process, the batch sharded over W devices with jax.sharding.

    XLA_FLAGS=--xla_force_host_platform_device_count=W python -m xfbench.scaling.jax_sharding \\
        --network resnet56 --framework jax --workers W --batch 128 --out r.json

(scaling/launch.py builds this command.) A one-axis Mesh over W devices ("batch"), and the
JAX adapter's own training step (adapters/jax/workload.py make_train_step: forward, loss,
backward, clipping, SGD momentum) run per device under jax.shard_map inside one jit, the
state donated as the adapter does: each device computes that step on its own rows, so
BatchNorm normalises with the device's own batch statistics (as DDP and MirroredStrategy
do), and the gradients are averaged over the devices (jax.lax.pmean, an all-reduce) before
the clipping and the update, so the replicated state stays identical on every device.

BatchNorm running statistics: averaged over the devices (pmean) after each step. The update
is linear (r = 0.9 r + 0.1 s), so that is exactly the mean of per-device running statistics,
which is what TensorFlow reads from its per-replica ones; it keeps the state replicated (one
copy per device, like the weights) for one small all-reduce that XLA combines with the
gradients'. DDP copies rank 0's instead; the statistics are no trained weights and do not
change the training step, only evaluation.

On the CPU the W devices are host devices made by XLA's flag, which must be set before jax
is imported (the launcher does it; this module adds it when missing). XLA's CPU client takes
no thread count: its pools are sized from the CPU affinity, so this process is pinned to
W * T CPUs in all (T threads per worker).
"""

from __future__ import annotations

import math
import os
import re
import sys

from xfbench.adapters.jax import HOST_DEVICES_FLAG, host_devices_env
from xfbench.scaling import result as R
from xfbench.scaling.cell import WorkerTask, parse_args
from xfbench.scaling.protocol import Hooks, measure

PROG = "python -m xfbench.scaling.jax_sharding"
AXIS = "batch"  # the one mesh axis: the devices the batch is split over


def main(argv: list[str] | None = None) -> int:
    run = parse_args(argv, framework="jax", prog=PROG)
    cell = run.cell
    if cell.device == "cpu":
        if HOST_DEVICES_FLAG not in os.environ.get("XLA_FLAGS", ""):
            os.environ.update(host_devices_env(cell.workers, dict(os.environ)))
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


def _measure(run: WorkerTask) -> dict:
    return measure(run, ShardedSteps(run))


class ShardedSteps(Hooks):
    """The JAX adapter's step over a one-axis mesh of W devices, in this one process."""

    mode = "jit"
    comm_comparison = (
        f"1 - median(step compiled without the gradient pmean, each device updating with "
        f"its own gradient) / median(normal step), {R.COMM_PAIRS} interleaved pairs of "
        "extra steps after the timed ones, the replica check and the saved weights; the "
        "all-reduce time XLA does not hide (it may overlap the all-reduce with backward or "
        "fuse it), as DDP's no_sync share"
    )

    def __init__(self, run: WorkerTask):
        import jax
        import numpy as np
        from jax.sharding import Mesh, NamedSharding
        from jax.sharding import PartitionSpec as P

        from xfbench.adapters.base import Cell
        from xfbench.adapters.jax import ADAPTER
        from xfbench.adapters.jax.workload import JaxWorkload
        from xfbench.models import get_spec, initial_weights

        cell = run.cell
        kind = {"cpu": "cpu", "cuda": "cuda"}[cell.device]
        try:
            devices = jax.devices(kind)
        except RuntimeError as e:
            raise RuntimeError(f"JAX sees no {kind} device: {str(e).splitlines()[0]}") from None
        if len(devices) < cell.workers:
            hint = f" (is {HOST_DEVICES_FLAG} in XLA_FLAGS?)" if kind == "cpu" else ""
            raise RuntimeError(
                f"{cell.workers} workers need {cell.workers} {kind} devices; JAX "
                f"sees {len(devices)}{hint}"
            )
        self.jax, self.devices = jax, devices[: cell.workers]
        spec = get_spec(cell.network, cell.scale)
        self.threads_config = (
            ADAPTER.configure_threads(cell.threads_per_worker * cell.workers)
            if kind == "cpu"
            else {}
        )

        # The adapter's own one-device cell on the global batch: its state and batch, in the
        # layouts its network computes in, are then spread over the mesh.
        one = Cell(
            network=cell.network,
            framework="jax",
            mode="jit",
            precision=cell.precision,
            device=f"{kind}:0" if kind != "cpu" else "cpu",
            threads=cell.threads_per_worker,
            batch_size=cell.global_batch,
            task="train",
            data="resident",
            scale=cell.scale,
        )
        work = JaxWorkload(spec, one, initial_weights(spec, 0))
        mesh = Mesh(np.array(self.devices), (AXIS,))
        replicated = NamedSharding(mesh, P())
        rows = NamedSharding(mesh, batch_spec(spec))
        self.state = jax.device_put(work.state, replicated)
        self.x, self.y = jax.device_put(work.x_host, rows), jax.device_put(work.y_host, rows)
        work.state = work.x = work.y = None  # the one-device copies are not used again
        self.work = work

        # The same step without the gradient average, for comm_share: compiled here, before
        # anything is timed, and run only after the timed steps and the replica check.
        self.local = None
        if cell.workers > 1:
            with jax.default_matmul_precision(work.matmul_precision):
                self.local = (
                    data_parallel_step(
                        spec,
                        work.dtype,
                        work.loss_scaling,
                        mesh,
                        average_gradients=False,
                        attention=work.attention,
                    )
                    .lower(self.state, self.x, self.y)
                    .compile()
                )
        self.program = data_parallel_step(
            spec, work.dtype, work.loss_scaling, mesh, attention=work.attention
        )
        self.compiled = self._loss = None

        what = "host device" if kind == "cpu" else "GPU"
        self.replicas_here = cell.workers
        self.backend = f"XLA all-reduce over {cell.workers} {what}" + (
            "s" if cell.workers > 1 else ""
        )
        self.device_name = self.devices[0].device_kind
        self.versions = ADAPTER.versions()
        self.layout = work.info["layout"]

    def compile(self) -> None:
        jax = self.jax
        with jax.default_matmul_precision(self.work.matmul_precision):
            self.compiled = self.program.lower(self.state, self.x, self.y).compile()
        params = jax.tree.leaves(self.state["params"])
        self.sharding = _check_sharded(
            self.compiled, self.x, self.devices, sum(leaf.size for leaf in params)
        )
        if self.local is not None:
            self.sharding["all_reduced_values_without_gradient_average"] = all_reduced_values(
                self.local.as_text()
            )[1]

    def step(self, local: bool = False) -> None:
        program = self.local if local else self.compiled
        self.state, self._loss = program(self.state, self.x, self.y)
        self.jax.block_until_ready((self.state, self._loss))

    def loss(self) -> float:
        return float(self._loss)

    def _params(self) -> list:
        return self.jax.tree.leaves(self.state["params"])

    def replica_difference(self) -> tuple[float, float]:
        import numpy as np

        max_diff, scale = 0.0, 0.0
        for leaf in self._params():
            copies = [np.asarray(s.data) for s in leaf.addressable_shards]
            scale = max(scale, float(np.abs(copies[0]).max()))
            max_diff = max([max_diff] + [float(np.abs(c - copies[0]).max()) for c in copies[1:]])
        return max_diff, scale

    def replicated(self) -> bool:
        return all(leaf.sharding.is_fully_replicated for leaf in self._params())

    def save_weights(self, path: str) -> None:
        import numpy as np

        self.work.state = self.state
        np.savez(path, **self.work.weights())

    def extra(self) -> dict:
        return {"sharding": self.sharding}


def batch_spec(spec):
    """How the batch and labels split over the mesh: time-major sequences (T, N) on their
    second dimension, everything else on the first."""
    from jax.sharding import PartitionSpec as P

    return P(None, AXIS) if spec.time_major else P(AXIS)


def data_parallel_step(
    spec, dtype, loss_scaling: bool, mesh, average_gradients: bool = True, attention="xla"
):
    """The jitted step (state, x, y) -> (state, loss) over the one-axis mesh: the JAX
    adapter's training step per device on its rows (jax.shard_map), its gradients averaged
    over the devices (make_train_step's data_axis), the BatchNorm running statistics and
    the loss averaged too, so that the state leaves replicated; the state is donated.

    average_gradients=False: the same step without the gradients' average (comm_share's
    comparison). Each device then updates its copy with its own gradient, so the "replicated"
    state it returns differs between devices: shard_map's replication check is off for it."""
    import jax
    from jax.sharding import PartitionSpec as P

    from xfbench.adapters.jax.workload import make_train_step

    adapter_step = make_train_step(
        spec,
        dtype,
        loss_scaling,
        data_axis=AXIS,
        average_gradients=average_gradients,
        attention=attention,  # the implementation the one-device workload chose
    )

    def per_device(state, x, y):
        new, loss = adapter_step(state, x, y)  # gradients already averaged over AXIS
        new["stats"] = jax.lax.pmean(new["stats"], AXIS)
        return new, jax.lax.pmean(loss, AXIS)  # the mean of equal shares: the global loss

    rows = batch_spec(spec)
    return jax.jit(
        jax.shard_map(
            per_device,
            mesh=mesh,
            in_specs=(P(), rows, rows),
            out_specs=(P(), P()),
            check_vma=average_gradients,
        ),
        donate_argnums=0,
    )


# An all-reduce in compiled HLO (XLA's CPU client: all-reduce; GPUs: the async
# all-reduce-start) and the shapes it returns: "%x = (f32[3,4]{1,0}, f32[]) all-reduce(...".
ALL_REDUCE = re.compile(r"=\s*(.*?)\s+all-reduce(?:-start)?\(")
SHAPE = re.compile(r"\b[a-z]+[0-9]*\[([0-9,]*)\]")


def all_reduced_values(hlo: str) -> tuple[int, int]:
    """(all-reduce ops, values they reduce) in compiled HLO text."""
    ops = values = 0
    for line in hlo.splitlines():
        found = ALL_REDUCE.search(line)
        if found:
            ops += 1
            for dims in SHAPE.findall(found.group(1)):
                values += math.prod(int(d) for d in dims.split(",") if d)
    return ops, values


def _check_sharded(compiled, x, devices, param_count: int) -> dict:
    """Prove the program is data-parallel over the W devices: the batch lives in W pieces
    on W devices, the compiled step takes it so, and (W > 1) all-reduces at least one
    value per parameter over them (the gradients)."""
    w = len(devices)
    batch_in = compiled.input_shardings[0][1]
    pieces = {tuple((s.start, s.stop) for s in shard.index) for shard in x.addressable_shards}
    ops, values = all_reduced_values(compiled.as_text())
    found = {
        "mesh_devices": w,
        "batch_devices": len(x.sharding.device_set),
        "batch_pieces": len(pieces),
        "compiled_batch_sharding": str(batch_in),
        "all_reduces_in_step": ops,
        "all_reduced_values": values,
        "param_count": param_count,
    }
    if x.sharding.device_set != set(devices) or len(pieces) != w:
        raise RuntimeError(f"the batch is not split over the {w} devices: {found}")
    if batch_in.device_set != set(devices) or (w > 1 and batch_in.is_fully_replicated):
        raise RuntimeError(f"the compiled step does not take the batch split: {found}")
    if w > 1 and values < param_count:
        raise RuntimeError(
            f"the compiled step does not all-reduce the gradients over the devices: {found}"
        )
    return found


if __name__ == "__main__":
    sys.exit(main())
