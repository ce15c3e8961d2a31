"""The command that starts one scaling cell's workers, and running it with a timeout.

    torch:      python -m torch.distributed.run --nproc-per-node W --master-port PORT
                    [torchrun node/rendezvous options] -m xfbench.scaling.torch_ddp ARGS
    jax:        python -m xfbench.scaling.jax_sharding ARGS   (CPU: XLA_FLAGS gets
                    --xla_force_host_platform_device_count=W, so one process has W devices)
    tensorflow: python -m xfbench.scaling.tensorflow_mirrored ARGS

ARGS is the workers' shared command line (scaling/cell.py). On the CPU the command's
environment names the CPUs the workers may spread over (XFBENCH_SCALING_CPUS), so a
launcher pinned to fewer CPUs (a pytest session pinned to --threads) still gives each
worker its own.

Several machines (torch): run the same command on every node with torchrun's options,
e.g. `python -m xfbench.scaling.launch --framework torch --network resnet56 --workers 4
--batch 128 --nnodes 2 --node-rank K --rdzv-endpoint HOST:29500 --out r.json`; each
node starts workers/nnodes processes, and the node holding global rank 0 writes the result
(with a c10d rendezvous torchrun assigns node ranks, so that can be any node).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from xfbench.adapters.jax import host_devices_env
from xfbench.command_line import seconds
from xfbench.errors import UsageError
from xfbench.harness import launch
from xfbench.harness.launch import LaunchError
from xfbench.harness.processes import free_port
from xfbench.harness.threads import THREAD_VARIABLES
from xfbench.scaling import SCALING_CPUS
from xfbench.scaling import result as R
from xfbench.scaling.cell import WORKERS, ScalingCell, cell_from, parser, to_argv


def _option(options: list[str], name: str) -> str | None:
    for i, opt in enumerate(options):
        if opt == name and i + 1 < len(options):
            return options[i + 1]
        if opt.startswith(name + "="):
            return opt.split("=", 1)[1]
    return None


def command(
    cell: ScalingCell,
    warmup: int,
    steps: int,
    out: str | os.PathLike,
    torchrun_options: list[str] | tuple[str, ...] = (),
    save_weights: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that run one cell; the workers write the worker JSON to out.

    torchrun_options (torch only) go to torchrun as they are: --nnodes, --node-rank,
    --rdzv-backend, --rdzv-endpoint, --rdzv-id, --master-addr, ... Without
    --rdzv-endpoint or --master-port a free loopback port is chosen."""
    cell.check()
    args = to_argv(cell, warmup, steps, str(out))
    if save_weights:
        args += ["--save-weights", str(save_weights)]
    env = launch.child_env({SCALING_CPUS.name: ",".join(map(str, R.available_cpus()))})
    options = list(torchrun_options)
    if cell.framework == "torch":
        # Each worker pins itself to its T CPUs before importing torch; set here too so
        # torchrun passes T on instead of its own default of 1.
        for var in THREAD_VARIABLES:
            env[var] = str(cell.threads_per_worker)
        nnodes = _option(options, "--nnodes")
        per_node = cell.workers
        if nnodes:
            n = int(nnodes.split(":")[-1])
            if cell.workers % n:
                raise UsageError(f"{cell.workers} workers do not split over {n} nodes")
            per_node = cell.workers // n
            if _option(options, "--rdzv-endpoint") and not _option(options, "--rdzv-backend"):
                options += ["--rdzv-backend", "c10d"]
            if _option(options, "--rdzv-endpoint") and not _option(options, "--rdzv-id"):
                options += ["--rdzv-id", f"xfbench-{cell.id}"]
        argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(per_node)]
        if not (_option(options, "--rdzv-endpoint") or _option(options, "--master-port")):
            argv += ["--master-port", str(free_port())]
        return argv + options + ["-m", WORKERS["torch"]] + args, env
    if options:
        raise UsageError(f"torchrun options are for torch; {cell.framework} runs in one process")
    if cell.framework == "jax" and cell.device == "cpu":
        env = host_devices_env(cell.workers, env)
    return [sys.executable, "-m", WORKERS[cell.framework]] + args, env


def run(
    cell: ScalingCell,
    warmup: int,
    steps: int,
    out: str | os.PathLike | None = None,
    timeout: float = 600.0,
    torchrun_options=(),
    save_weights: str | None = None,
    cwd: str | os.PathLike | None = None,
) -> dict:
    """Run one cell and return its worker JSON (status "ok", or "failed" with the
    reason the workers gave). Raises LaunchError with the output's tail when the
    workers crashed or ran past timeout without writing one."""
    tmp = None
    if out is None:
        tmp = tempfile.TemporaryDirectory(prefix="xfbench-scaling-")
        out = Path(tmp.name) / "worker.json"
    out = Path(out)
    out.unlink(missing_ok=True)
    argv, env = command(
        cell=cell,
        warmup=warmup,
        steps=steps,
        out=out,
        torchrun_options=torchrun_options,
        save_weights=save_weights,
    )
    try:
        end = launch.run(argv, timeout, env=env, cwd=cwd)
        tail = end.tail
        if end.timed_out:
            raise LaunchError(f"{cell.id}: {launch.failure(end, timeout)[1]}", "timeout", tail)
        if out.exists():
            data = json.loads(out.read_text())
            if end.returncode and data.get("status") == "ok":
                data.update(status="failed", reason=f"workers {launch.failure(end, timeout)[1]}")
            if data.get("status") != "ok":
                data["output_tail"] = tail
            return data
        last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
        status, reason = launch.failure(end, timeout)
        raise LaunchError(
            f"{cell.id}: workers gave no result ({reason}): {last.strip()}", status, tail
        )
    finally:
        if tmp is not None:
            tmp.cleanup()


def main(argv: list[str] | None = None) -> int:
    """python -m xfbench.scaling.launch: run one cell (worker options, plus torchrun's node options
    and --timeout) and print its worker JSON, or only the command with --print-command."""
    p = parser("python -m xfbench.scaling.launch")
    p.add_argument("--timeout", default="3600", help="seconds (default 3600)")
    p.add_argument("--print-command", action="store_true")
    for opt in (
        "--nnodes",
        "--node-rank",
        "--rdzv-endpoint",
        "--rdzv-backend",
        "--rdzv-id",
        "--master-addr",
        "--master-port",
    ):
        p.add_argument(opt, default=None, help="passed to torchrun (torch only)")
    a = p.parse_args(argv)
    try:
        cell = cell_from(a)
        a.timeout = seconds("--timeout", a.timeout)
    except UsageError as e:
        p.error(str(e))
    options = []
    for name in (
        "nnodes",
        "node_rank",
        "rdzv_endpoint",
        "rdzv_backend",
        "rdzv_id",
        "master_addr",
        "master_port",
    ):
        if getattr(a, name) is not None:
            options += ["--" + name.replace("_", "-"), str(getattr(a, name))]
    try:
        argv_, env = command(
            cell=cell,
            warmup=a.warmup,
            steps=a.steps,
            out=a.out,
            torchrun_options=options,
            save_weights=a.save_weights,
        )
    except UsageError as e:
        p.error(str(e))
    if a.print_command:
        print(" ".join(argv_))
        return 0
    if a.nnodes not in (None, "1"):
        # Several machines: the node that holds global rank 0 writes --out. With a c10d
        # rendezvous (--rdzv-endpoint) torchrun assigns node ranks itself, so that may
        # be any node; with --master-addr/--master-port it is --node-rank 0.
        Path(a.out).unlink(missing_ok=True)
        code = subprocess.run(argv_, env=env, timeout=a.timeout).returncode
        if Path(a.out).exists():
            print(Path(a.out).read_text())
        else:
            print(f"no result on this node (global rank 0 ran on another node); exit {code}")
        return code
    try:
        data = run(
            cell=cell,
            warmup=a.warmup,
            steps=a.steps,
            out=a.out,
            timeout=a.timeout,
            torchrun_options=options,
            save_weights=a.save_weights,
        )
    except LaunchError as e:
        sys.stderr.write(f"{e.tail}\n{e}\n")
        return 1
    print(json.dumps(data, indent=1))
    return 0 if data.get("status") == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
