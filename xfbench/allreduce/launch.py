"""Start a worker as a subprocess and read its result: the suite's (and a runner's) way in.

torch: torchrun with one process per rank on this machine, over loopback:
    python -m torch.distributed.run --nproc-per-node W --master-addr 127.0.0.1 --master-port P
        -m xfbench.allreduce.torch_collectives --device ... --sizes ... --out ...
jax: one process over W devices:
    python -m xfbench.allreduce.jax_psum --world-size W --device ... --sizes ... --out ...
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from xfbench.adapters.jax import host_devices_env
from xfbench.allreduce import WORKERS
from xfbench.harness import launch
from xfbench.harness.launch import LaunchError
from xfbench.harness.processes import free_port

TAIL_CHARS = 4000


def command(
    framework: str,
    device: str,
    world_size: int,
    sizes: list[int],
    preset: str,
    out: str,
    threads_per_rank: int | None = None,
    rounds: int | None = None,
    torchrun_options: tuple[str, ...] = (),
) -> tuple[list[str], dict]:
    args = [
        "--device",
        device,
        "--sizes",
        ",".join(str(s) for s in sizes),
        "--preset",
        preset,
        "--out",
        str(out),
    ]
    if threads_per_rank:
        args += ["--threads-per-rank", str(threads_per_rank)]
    if rounds:
        args += ["--rounds", str(rounds)]
    env = launch.child_env()
    if framework == "torch":
        launcher = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            str(world_size),
        ]
        if not any(o.startswith(("--rdzv", "--master", "--nnodes")) for o in torchrun_options):
            launcher += ["--master-addr", "127.0.0.1", "--master-port", str(free_port())]
        return launcher + list(torchrun_options) + ["-m", WORKERS["torch"]] + args, env
    if framework == "jax":
        if device == "cpu":
            env = host_devices_env(world_size, env)
        return [
            sys.executable,
            "-m",
            WORKERS["jax"],
            "--world-size",
            str(world_size),
        ] + args, env
    raise ValueError(f"no all-reduce worker for {framework!r}")


def run(
    framework: str,
    device: str,
    world_size: int,
    sizes: list[int],
    preset: str,
    timeout: float,
    threads_per_rank: int | None = None,
    rounds: int | None = None,
    cpus: list[int] | None = None,
) -> tuple[dict, str]:
    """(the worker's result JSON, its output). Raises LaunchError when there is no result.
    cpus: the CPUs the worker's ranks share out (default: those of this process)."""
    with tempfile.TemporaryDirectory(prefix="xfbench-allreduce-") as tmp:
        out = Path(tmp) / "result.json"
        argv, env = command(
            framework=framework,
            device=device,
            world_size=world_size,
            sizes=sizes,
            preset=preset,
            out=str(out),
            threads_per_rank=threads_per_rank,
            rounds=rounds,
        )
        end = launch.run(argv, timeout, env=env, cpus=cpus)
        output = end.output
        if end.timed_out:
            raise LaunchError(
                f"{framework} all-reduce over {world_size} ranks: "
                f"{launch.failure(end, timeout)[1]}\n{output[-TAIL_CHARS:]}",
                "timeout",
                output[-TAIL_CHARS:],
            )
        if not out.exists():
            raise LaunchError(
                f"{framework} all-reduce over {world_size} ranks gave no result "
                f"({launch.failure(end, timeout)[1]})\n{output[-TAIL_CHARS:]}",
                tail=output[-TAIL_CHARS:],
            )
        return json.loads(out.read_text()), output
