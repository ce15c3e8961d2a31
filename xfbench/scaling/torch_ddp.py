"""PyTorch DistributedDataParallel worker: one process per worker, started by torchrun.

    python -m torch.distributed.run --nproc-per-node W --master-port PORT \\
        -m xfbench.scaling.torch_ddp --network resnet56 --framework torch --workers W --batch 128 --out r.json

(scaling/launch.py builds this command.) Gloo on the CPU, NCCL on CUDA with one GPU per
process (cuda:LOCAL_RANK). Each process builds the network with the PyTorch adapter's own
code (network, canonical weights, layout, loss, SGD: adapters/torch/workload.py, mode eager)
on the global synthetic batch, keeps its rows [r*b, (r+1)*b), and wraps the module in DDP,
which averages the gradients over the workers during backward.

BatchNorm normalises each worker's rows with that worker's batch statistics; DDP copies rank
0's running statistics to every rank at each forward (broadcast_buffers), and only the
trained weights are compared across replicas.

On the CPU, local rank r runs on CPUs [r*T, (r+1)*T) of the available ones (T threads per
worker), set before torch is imported so that its thread pools start there.

Several machines: the same module under torchrun's node options, e.g. on each of 2 nodes
    python -m torch.distributed.run --nnodes 2 --node-rank K --nproc-per-node 2 \\
        --rdzv-backend c10d --rdzv-endpoint HOST:29500 --rdzv-id xfbench \\
        -m xfbench.scaling.torch_ddp --workers 4 ...
(--workers is the world size, all nodes together; global rank 0 writes --out.)
"""

from __future__ import annotations

import os
import sys

from xfbench.scaling import result as R
from xfbench.scaling.cell import WorkerTask, parse_args
from xfbench.scaling.protocol import Hooks, measure

PROG = "python -m torch.distributed.run ... -m xfbench.scaling.torch_ddp"


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else None


def main(argv: list[str] | None = None) -> int:
    run = parse_args(argv, framework="torch", prog=PROG)
    cell = run.cell
    rank, world, local_rank = (_env_int("RANK"), _env_int("WORLD_SIZE"), _env_int("LOCAL_RANK"))
    if rank is None or world is None or local_rank is None:
        sys.stderr.write(
            f"{PROG}: error: start me through torchrun (python -m "
            "torch.distributed.run --nproc-per-node W ...), which sets RANK, "
            "WORLD_SIZE and LOCAL_RANK\n"
        )
        return 2
    if world != cell.workers:
        sys.stderr.write(
            f"{PROG}: error: --workers {cell.workers}, but torchrun started {world} processes\n"
        )
        return 2
    if cell.device == "cpu":
        # Before torch is imported: its OpenMP pool starts on these CPUs with T threads.
        R.pin(R.worker_cpus(local_rank, cell.threads_per_worker))
    try:
        out = _measure(run, rank, world, local_rank)
    except Exception as e:  # recorded, then re-raised so torchrun reports the failure too
        if rank == 0:
            R.write(run.out, R.failed(cell, f"{type(e).__name__}: {e}"))
        raise
    if rank == 0:
        R.write(run.out, out)
    return 0


def _measure(run: WorkerTask, rank: int, world: int, local_rank: int) -> dict:
    import torch
    import torch.distributed as dist

    from xfbench.adapters.torch import ADAPTER

    cell = run.cell
    cuda = cell.device == "cuda"
    if cuda:
        if not torch.cuda.is_available():
            raise RuntimeError("device cuda asked for, but torch sees no CUDA GPU")
        local_world = _env_int("LOCAL_WORLD_SIZE") or 1
        if torch.cuda.device_count() < local_world:
            raise RuntimeError(
                f"{local_world} workers on this node need one GPU each; "
                f"torch sees {torch.cuda.device_count()}"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        threads = {}
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        threads = ADAPTER.configure_threads(cell.threads_per_worker)
    try:
        hooks = DDPSteps(
            run, rank=rank, world=world, local_rank=local_rank, device=device, threads=threads
        )
        return measure(run, hooks)
    finally:
        dist.destroy_process_group()


class DDPSteps(Hooks):
    """The PyTorch adapter's step on this rank's rows, its module wrapped in DDP."""

    mode = "eager"
    # no_sync() runs the normal step's kernels: nothing to compile first.
    warm_local_step = False
    comm_comparison = (
        f"1 - median(step under DDP no_sync(), no gradient all-reduce) / median(normal "
        f"step), {R.COMM_PAIRS} interleaved pairs of extra steps after the timed ones, slowest "
        "worker per step; the all-reduce time not hidden behind backward"
    )

    def __init__(
        self, run: WorkerTask, *, rank: int, world: int, local_rank: int, device, threads: dict
    ):
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        from xfbench.adapters.base import Cell
        from xfbench.adapters.torch import ADAPTER
        from xfbench.adapters.torch.workload import TorchWorkload
        from xfbench.models import get_spec, initial_weights

        cell = run.cell
        self.torch, self.dist = torch, dist
        self.rank, self.world, self.local_rank, self.device = rank, world, local_rank, device
        self.cuda = cell.device == "cuda"
        self.spec = spec = get_spec(cell.network, cell.scale)
        b = cell.per_worker_batch
        # The adapter's own cell, on the global batch: this worker then keeps its rows.
        one = Cell(
            network=cell.network,
            framework="torch",
            mode="eager",
            precision=cell.precision,
            device=str(device),
            threads=cell.threads_per_worker,
            batch_size=cell.global_batch,
            task="train",
            data="resident",
            scale=cell.scale,
        )
        work = TorchWorkload(spec, one, initial_weights(spec, 0))
        rows = slice(rank * b, (rank + 1) * b)
        if spec.time_major:  # the LSTM's (T, N): the batch is the second dimension
            work.x_host, work.y_host = work.x_host[:, rows], work.y_host[:, rows]
        else:
            work.x_host, work.y_host = work.x_host[rows], work.y_host[rows]
        work.x_host, work.y_host = work.x_host.contiguous(), work.y_host.contiguous()
        work.x, work.y = work._to_device()
        self.module = work.net
        self.ddp = DDP(self.module, device_ids=[local_rank] if self.cuda else None)
        work.net = self.ddp  # the adapter's step now runs forward and backward through DDP
        self.work = work

        self.backend = "nccl" if self.cuda else "gloo"
        self.device_name = torch.cuda.get_device_name(device) if self.cuda else "cpu"
        self.versions = ADAPTER.versions()
        self.threads_config = threads
        self.layout = work.layout

    def barrier(self) -> None:
        if self.cuda:
            self.dist.barrier(device_ids=[self.local_rank])
        else:
            self.dist.barrier()

    def step(self, local: bool = False) -> None:
        if not local:
            self.work.step()  # the adapter's step returns once the device has finished
            return
        with self.ddp.no_sync():  # gradients stay local: no all-reduce in backward
            self.work.step()

    def loss(self) -> float:
        return self.work.loss()

    def _all_reduce(self, values: list[float], op):
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=op)
        return t

    def slowest(self, seconds: list[float]) -> list[float]:
        # Steps start together at a barrier: the slowest worker's time is the step's.
        return self._all_reduce(seconds, self.dist.ReduceOp.MAX).tolist()

    def mean(self, values: list[float]) -> list[float]:
        return (self._all_reduce(values, self.dist.ReduceOp.SUM) / self.world).tolist()

    def replica_difference(self) -> tuple[float, float]:
        torch, dist = self.torch, self.dist
        flat = torch.cat([p.detach().reshape(-1) for p in self.module.parameters()])
        ref = flat.clone()
        dist.broadcast(ref, 0)
        diff = (flat - ref).abs().max()
        dist.all_reduce(diff, op=dist.ReduceOp.MAX)
        return float(diff), float(ref.abs().max())

    def save_weights(self, path: str) -> None:
        if self.rank == 0:
            import numpy as np

            from xfbench.adapters.torch import weights as W

            np.savez(path, **W.from_module(self.spec, self.module))

    def cpus(self) -> list[list[int]]:
        """Each rank's CPUs, in rank order (the pinning as it really was)."""
        out = [None] * self.world
        self.dist.all_gather_object(out, sorted(os.sched_getaffinity(0)))
        return out


if __name__ == "__main__":
    sys.exit(main())
