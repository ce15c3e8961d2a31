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
import time

from xfbench.scaling import result as R
from xfbench.scaling.cell import Run, parse_args

PROG = "python -m torch.distributed.run ... -m xfbench.scaling.torch_ddp"
COMM_PAIRS = R.COMM_PAIRS  # (normal, no_sync) step pairs after the timed steps, for comm_share


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


def _measure(run: Run, rank: int, world: int, local_rank: int) -> dict:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from xfbench.adapters.base import Cell
    from xfbench.adapters.torch import ADAPTER
    from xfbench.adapters.torch import weights as W
    from xfbench.adapters.torch.workload import TorchWorkload
    from xfbench.harness.threads import CpuMeter
    from xfbench.models import get_spec, initial_weights

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
        spec = get_spec(cell.network, cell.scale)
        b = cell.per_worker_batch
        # The adapter's own cell, on the global batch: this worker then keeps its rows.
        one = Cell(
            cell.network,
            "torch",
            "eager",
            cell.precision,
            str(device),
            cell.threads_per_worker,
            cell.global_batch,
            "train",
            "resident",
            cell.scale,
        )
        work = TorchWorkload(spec, one, initial_weights(spec, 0))
        rows = slice(rank * b, (rank + 1) * b)
        if spec.sequence:  # time-major (T, N): the batch is the second dimension
            work.x_host, work.y_host = work.x_host[:, rows], work.y_host[:, rows]
        else:
            work.x_host, work.y_host = work.x_host[rows], work.y_host[rows]
        work.x_host, work.y_host = work.x_host.contiguous(), work.y_host.contiguous()
        work.x, work.y = work._to_device()
        module = work.net
        ddp = DDP(module, device_ids=[local_rank] if cuda else None)
        work.net = ddp  # the adapter's step now runs forward and backward through DDP

        def barrier():
            dist.barrier(device_ids=[local_rank]) if cuda else dist.barrier()

        def timed(step) -> float:
            barrier()
            t0 = time.perf_counter()
            step()  # the adapter's step returns once the device has finished
            return time.perf_counter() - t0

        compile_s = timed(work.step)
        for _ in range(run.warmup):
            timed(work.step)
        with CpuMeter() as meter:
            local = [timed(work.step) for _ in range(run.steps)]
        steps = _max_over_workers(torch, dist, local, device)

        flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()])
        ref = flat.clone()
        dist.broadcast(ref, 0)
        diff = (flat - ref).abs().max()
        scale = ref.abs().max()
        dist.all_reduce(diff, op=dist.ReduceOp.MAX)
        max_diff = float(diff)
        agree = max_diff <= R.REPLICA_RTOL * float(scale)
        loss = torch.tensor([work.loss()], dtype=torch.float64, device=device)
        dist.all_reduce(loss)
        used = torch.tensor([meter.threads_used], dtype=torch.float64, device=device)
        dist.all_reduce(used)
        if run.save_weights and rank == 0:
            import numpy as np

            np.savez(run.save_weights, **W.from_module(spec, module))

        comm_share, how = _comm_share(torch, dist, ddp, work, timed, world, device)
        out = R.header(
            cell,
            "nccl" if cuda else "gloo",
            torch.cuda.get_device_name(device) if cuda else "cpu",
            ADAPTER.versions(),
        )
        out.update(
            {
                **R.step_summary(steps),
                "compile_s": compile_s,
                "warmup_steps": run.warmup,
                "comm_share": comm_share,
                "comm_share_how": how,
                "replicas_agree": agree,
                "replicas_max_diff": max_diff,
                "loss": float(loss) / world,
                "threads_used": None if cuda else round(float(used) / world, 2),
                "threads_config": threads,
                "layout": work.layout,
                "mode": "eager",
                "cpus": _gather_cpus(dist, world) if not cuda else None,
            }
        )
        if not agree:
            out.update(
                status="failed",
                reason=f"replicas disagree after the timed steps: "
                f"weights differ by up to {max_diff:.3g}",
            )
        return out
    finally:
        dist.destroy_process_group()


def _gather_cpus(dist, world: int) -> list[list[int]]:
    """Each rank's CPUs, in rank order (the pinning as it really was)."""
    out = [None] * world
    dist.all_gather_object(out, sorted(os.sched_getaffinity(0)))
    return out


def _max_over_workers(torch, dist, seconds: list[float], device) -> list[float]:
    """Each step's time as the slowest worker saw it (steps start together at a barrier)."""
    t = torch.tensor(seconds, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def _comm_share(torch, dist, ddp, work, timed, world: int, device):
    if world == 1:
        return None, "one worker: nothing to communicate"
    normal, local = [], []

    def local_step():
        with ddp.no_sync():  # gradients stay local: no all-reduce in backward
            work.step()

    for _ in range(COMM_PAIRS):  # interleaved, so drift in the machine hits both alike
        normal.append(timed(work.step))
        local.append(timed(local_step))
    normal = _max_over_workers(torch, dist, normal, device)
    local = _max_over_workers(torch, dist, local, device)
    share, clipped = R.comm_share(normal, local)
    how = (
        f"1 - median(step under DDP no_sync(), no gradient all-reduce) / median(normal "
        f"step), {COMM_PAIRS} interleaved pairs of extra steps after the timed ones, slowest "
        "worker per step; the all-reduce time not hidden behind backward"
        + ("; clipped at 0 (the difference was within noise)" if clipped else "")
    )
    return share, how


if __name__ == "__main__":
    sys.exit(main())
