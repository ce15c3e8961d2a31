"""torch.distributed all-reduce, reduce-then-broadcast and a parameter server, timed
over message sizes.

One process per rank, started by torchrun (which sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR...):

    python -m torch.distributed.run --nproc-per-node 2 -m xfbench.allreduce.torch_collectives \
        --device cpu --sizes 1KB:1MB --out allreduce.json

CPU: Gloo, each rank pinned to its own CPUs before torch is imported. CUDA: NCCL,
one GPU per rank (LOCAL_RANK). The patterns (allreduce.PATTERNS):
  allreduce         dist.all_reduce
  reduce_broadcast  dist.reduce to rank 0, then dist.broadcast from it: the library's
                    collectives, which pipeline both along a ring or tree (Gloo: ring
                    reduce-scatter then gather, binomial-tree broadcast; NCCL: rings)
  parameter_server  the literal pattern with point-to-point operations: rank 0
                    receives every other rank's buffer, adds each one in as it arrives,
                    and sends the sum back to every rank, so its link carries 2(n-1)S
For every size and pattern: the result is checked
(each rank gives rank+1, every rank must hold n(n+1)/2), then warm-up operations,
then timed ones, each between a barrier and the device having finished it, the
slowest rank's time kept; then checked again. Rank 0 prints nccl-tests-style
tables and writes the JSON.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

from xfbench.allreduce import FRAMEWORK_PATTERNS, ITEM_BYTES
from xfbench.allreduce.check import expected_sum, fill_value
from xfbench.allreduce.rows import measure
from xfbench.allreduce.table import sweep_tables
from xfbench.allreduce.timing import TIMINGS
from xfbench.allreduce.worker_args import fault, parser
from xfbench.allreduce.worker_common import failure, pin_to, rank_cpus, write_result

PROG = "python -m torch.distributed.run --nproc-per-node N -m xfbench.allreduce.torch_collectives"
PATTERNS = FRAMEWORK_PATTERNS["torch"]
# Receive buffers rank 0 keeps in flight on a GPU: with the suite's cap of 1/8 of a GPU
# per buffer, its own buffer and these stay within half the GPU however many ranks
# send. On the CPU every peer gets one (the cap is 1/8 of each rank's share of RAM).
RECV_BUFFERS_CUDA = 3


class Collectives:
    def __init__(self, device: str):
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.device = device
        self.wrong = fault() == "max"
        self.op = dist.ReduceOp.MAX if self.wrong else dist.ReduceOp.SUM
        self._buffers = []

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def allreduce(self, t):
        self.dist.all_reduce(t, op=self.op)

    def reduce_broadcast(self, t):
        # Everything to rank 0, the sum back from rank 0, through the library's own
        # collectives (pipelined: not what a parameter server does; see parameter_server).
        self.dist.reduce(t, dst=0, op=self.op)
        self.dist.broadcast(t, src=0)

    def receive_buffers(self, t) -> list:
        """Rank 0's receive buffers for buffers like t, allocated once per size (before
        it is timed, by the correctness check), as a server allocates its own."""
        want = min(self.world - 1, RECV_BUFFERS_CUDA if self.device.type == "cuda" else self.world)
        if len(self._buffers) != want or (self._buffers and self._buffers[0].shape != t.shape):
            self.drop_buffers()  # the previous size's go first
            self._buffers = [self.torch.empty_like(t) for _ in range(want)]
        return self._buffers

    def drop_buffers(self):
        self._buffers = []

    def parameter_server(self, t):
        """Rank 0 is the server: every worker pushes its buffer to it at once; it adds the
        pushes into its own buffer in rank order (later ones landing meanwhile) and then
        sends the sum back to every worker at once. Each push lands in a receive buffer of
        its own, as in a real server (ps-lite, TensorFlow's accumulators): a shared buffer
        would take the pushes one after another and idle the workers in turn. On a GPU at
        most RECV_BUFFERS_CUDA are in flight, a buffer taking the next push once added."""
        dist = self.dist
        if self.rank != 0:
            dist.send(t, dst=0)
            dist.recv(t, src=0)
            return
        peers = list(range(1, self.world))
        if not peers:
            return
        waiting = iter(peers)
        pending = []  # (work, buffer), oldest first
        for buf in self.receive_buffers(t):
            pending.append((dist.irecv(buf, src=next(waiting)), buf))
        while pending:
            work, buf = pending.pop(0)
            work.wait()  # NCCL: the current stream waits; the add is queued behind
            if self.wrong:
                self.torch.maximum(t, buf, out=t)
            else:
                t.add_(buf)
            src = next(waiting, None)
            if src is not None:  # NCCL orders the receive after the add on this stream
                pending.append((dist.irecv(buf, src=src), buf))
        sends = [dist.P2POp(dist.isend, t, peer) for peer in peers]
        for work in dist.batch_isend_irecv(sends):
            work.wait()

    def _over_ranks(self, values: list[float], op) -> list[float]:
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=op)
        return t.tolist()

    def check(self, run, buf) -> tuple[float, int]:
        """(max_abs_err over ranks, wrong elements summed over ranks) of one operation."""
        buf.fill_(fill_value(self.rank))
        run(buf)
        self.sync()
        diff = buf.sub_(expected_sum(self.world)).abs_()
        wrong = int(self.torch.count_nonzero(diff).item())
        err = float(diff.max().item()) if diff.numel() else 0.0
        if err != err:  # NaN: max over ranks would lose it
            err = float("inf")
        (err,) = self._over_ranks([err], self.dist.ReduceOp.MAX)
        (wrong,) = self._over_ranks([float(wrong)], self.dist.ReduceOp.SUM)
        return err, int(wrong)

    def time(self, run, buf, rounds: int) -> list[float]:
        """Seconds of each operation, the slowest rank's."""
        times = []
        for _ in range(rounds):
            self.dist.barrier()
            self.sync()
            t0 = time.perf_counter()
            run(buf)
            self.sync()
            times.append(time.perf_counter() - t0)
        return self._over_ranks(times, self.dist.ReduceOp.MAX)


def sweep(
    c: Collectives, sizes: list[int], timing, warmup: int, fixed_rounds: int | None, meta: dict
) -> list[dict]:
    rows = []
    for nbytes in sizes:
        buf = c.torch.empty(nbytes // ITEM_BYTES, dtype=c.torch.float32, device=c.device)
        for pattern in PATTERNS:
            # Zeros while timing (in place): sums of zeros stay zero, however many rounds.
            rows.append(
                measure(
                    c=c,
                    pattern=pattern,
                    nbytes=nbytes,
                    data=buf,
                    timing=timing,
                    warmup=warmup,
                    fixed_rounds=fixed_rounds,
                    meta=meta,
                    before_timing=buf.zero_,
                )
            )
        del buf
        c.drop_buffers()
    return rows


def main(argv=None) -> int:
    args = parser(PROG).parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    cpus = rank_cpus(local_rank, local_world, args.threads_per_rank)
    if args.device == "cpu":
        pin_to(cpus)
    import torch
    import torch.distributed as dist

    if args.device == "cuda":
        if not torch.cuda.is_available() or torch.cuda.device_count() <= local_rank:
            reason = (
                f"rank {rank} needs GPU {local_rank}, but torch sees "
                f"{torch.cuda.device_count() if torch.cuda.is_available() else 0} GPUs"
            )
            print(reason, file=sys.stderr)
            if rank == 0:
                write_result(args.out, failure("torch", "cuda", world, reason, unavailable=True))
            return 1
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
        dist.init_process_group(backend, device_id=device)
        device_name = torch.cuda.get_device_name(device)
        versions = {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        }
    else:
        device = torch.device("cpu")
        torch.set_num_threads(len(cpus))
        backend = "gloo"
        dist.init_process_group(backend)
        from xfbench.machine import cpu_model

        device_name = cpu_model()
        versions = {"torch": torch.__version__}

    timing = TIMINGS[args.preset]
    warmup = max(1, args.warmup if args.warmup is not None else timing.warmup)
    meta = {
        "framework": "torch",
        "backend": backend,
        "device": args.device,
        "device_name": device_name,
        "world_size": world,
        "versions": versions,
    }
    status = 0
    try:
        rows = sweep(
            c=Collectives(device),
            sizes=args.sizes,
            timing=timing,
            warmup=warmup,
            fixed_rounds=args.rounds,
            meta=meta,
        )
        result = {
            "status": "ok",
            **meta,
            "timing": {**timing.as_dict(), "warmup": warmup},
            "threads_per_rank": len(cpus) if args.device == "cpu" else None,
            "rows": rows,
        }
    except Exception as e:
        traceback.print_exc()
        result = failure(
            "torch",
            args.device,
            world,
            f"rank {rank}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
        )
        status = 1
    if rank == 0:
        if result["rows"]:
            print(sweep_tables(result["rows"]), flush=True)
        write_result(args.out, result)
    if status == 0:
        dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
