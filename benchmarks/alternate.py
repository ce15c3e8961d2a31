"""BASE and NEW runs of one sitting, alternated, for `xfbench compare` (a benchmark helper).

A VM's speed drifts over minutes (a neighbour starts, a host rebalances): runs of BASE made
in the morning and of NEW in the afternoon differ by that drift too, and compare cannot tell
it from a change. Made in one sitting, alternated pair by pair (B N, then N B, ...), a
linear drift cancels over each two pairs and a slower one mostly cancels.

    # two checkouts, each with its own .venv: 3 runs a side, then compare them
    python benchmarks/alternate.py --out results/ab --pairs 3 \\
        --base ../xfbench-base/.venv/bin/xfbench --new .venv/bin/xfbench \\
        --sweep="--preset reference --threads 2 --framework torch,jax --model fcn5,resnet56"
    xfbench compare results/ab/base/run-1,results/ab/base/run-2,results/ab/base/run-3 \\
        results/ab/new/run-1,results/ab/new/run-2,results/ab/new/run-3

    # one checkout against itself, NEW's PyTorch steps slowed 20 % (XFBENCH_SLOWDOWN):
    # what compare's false alarms and detection are in alternated runs
    python benchmarks/alternate.py --out results/ab-torch20 --pairs 3 \\
        --new-slowdown torch:0.2 --sweep="--preset reference --threads 2 --model fcn5"

Each --sweep is one `xfbench run`'s arguments; a run is every sweep into one folder
(base/run-<i> or new/run-<i>). A run that fails is said and the others go on.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

THIS_CHECKOUT = [sys.executable, "-m", "xfbench.harness.cli"]


def order(pairs: int) -> list[tuple[str, int]]:
    """(side, run number) in the order run: B N, N B, B N, ... so that each side is first
    as often as the other (an ABBA design: a linear drift cancels over two pairs)."""
    out = []
    for i in range(1, pairs + 1):
        sides = ("base", "new") if i % 2 else ("new", "base")
        out += [(side, i) for side in sides]
    return out


def one_run(command: list[str], sweeps: list[str], folder: Path, env: dict) -> bool:
    """Every sweep into one folder; True where each exited 0."""
    ok = True
    for sweep in sweeps:
        argv = [*command, "run", *shlex.split(sweep), "--results", str(folder), "--quiet"]
        ok &= subprocess.run(argv, env=env, check=False).returncode == 0
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="base/ and new/ go here")
    p.add_argument("--pairs", type=int, default=3, help="runs a side (default 3)")
    p.add_argument("--sweep", action="append", required=True, help="one xfbench run's arguments")
    p.add_argument("--base", help="BASE's xfbench command (default: this checkout's)")
    p.add_argument("--new", help="NEW's xfbench command (default: this checkout's)")
    p.add_argument("--new-slowdown", help="FRAMEWORK:SHARE: NEW's steps of it slowed that much")
    args = p.parse_args(argv)
    if args.pairs < 1:
        p.error("--pairs must be 1 or more")
    commands = {
        side: shlex.split(given) if given else THIS_CHECKOUT
        for side, given in (("base", args.base), ("new", args.new))
    }
    slowed = {"XFBENCH_SLOWDOWN": args.new_slowdown} if args.new_slowdown else {}
    envs = {"base": dict(os.environ), "new": {**os.environ, **slowed}}
    failed = []
    for side, i in order(args.pairs):
        folder, started = args.out / side / f"run-{i}", time.monotonic()
        if not one_run(commands[side], args.sweep, folder, envs[side]):
            failed.append(str(folder))
        print(f"{folder}: {time.monotonic() - started:.0f} s", flush=True)
    for side in ("base", "new"):
        print(f"{side.upper()}: " + ",".join(str(args.out / side / f"run-{i}")
                                              for i in range(1, args.pairs + 1)))  # fmt: skip
    if failed:
        print(f"a sweep failed in {len(failed)} run(s): {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
