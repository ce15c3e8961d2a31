"""BASE and NEW runs of one sitting, made in pairs, for `xfbench compare` (a benchmark helper).

A VM's speed drifts over minutes (a neighbour starts, a host rebalances): runs of BASE made
in the morning and of NEW in the afternoon differ by that drift too, and compare cannot tell
it from a change. Made in one sitting, in pairs ordered B N, N B (B N N B repeated), a linear
drift cancels over every two pairs, which is why the pairs come in twos; the pairing is
written to OUT/pairs.json and compare uses it (--paired): each cell's differences within
pairs, where a drift between pairs does not reach.

    # two checkouts, each with its own .venv: 4 pairs, then compare them
    python benchmarks/alternate.py --out results/ab --pairs 4 \\
        --base ../xfbench-base/.venv/bin/xfbench --new .venv/bin/xfbench \\
        --sweep="--preset reference --threads 2 --framework torch,jax --model fcn5,resnet56"

    # the second stage: only the cells a first compare --json could not tell, each in as
    # many pairs as it said (compare --stage 2 --paired then judges them; 1 % of the 5 %)
    python benchmarks/alternate.py --out results/ab2 --only-undecided verdicts.json \\
        --base ../xfbench-base/.venv/bin/xfbench --new .venv/bin/xfbench \\
        --sweep="--preset reference --skip-roofs"

    # one checkout against itself, NEW's PyTorch steps slowed 20 % (XFBENCH_SLOWDOWN)
    python benchmarks/alternate.py --out results/ab-torch20 --pairs 4 \\
        --new-slowdown torch:0.2 --sweep="--preset reference --threads 2 --model fcn5"

Each --sweep is one `xfbench run`'s arguments (with --only-undecided, arguments every cell's
run takes besides its own selection); a run is every sweep into one folder (base/run-<i> or
new/run-<i>). With --only-undecided, pair i holds the cells that asked for i pairs or more:
each cell its own count, made even, so a quiet cell does not pay for a noisy one's. A run
that fails is said and the others go on. It ends with the compare command to run, and the
minutes the runs took.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

THIS_CHECKOUT = [sys.executable, "-m", "xfbench.harness.cli"]
MOST_PAIRS = 50  # compare says "more than 50" beyond


def order(pairs: int) -> list[tuple[str, int]]:
    """(side, pair) in the order run: B N, N B, B N, N B, ...: over each two pairs both
    sides sit at the same mean position, so a linear drift cancels (pairs is even)."""
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


# A cell's suite, by its record's task: the network suite's tasks need no --suite.
SUITE_OF_TASK = {"serve-offline": ["--suite", "serving", "--scenario", "Offline"],
                 "generate": ["--suite", "generation"]}  # fmt: skip


def cell_sweep(select: dict) -> str:
    """The `xfbench run` arguments that measure exactly one cell of compare --json (its
    `select`: the record's network, task, framework, mode, precision, batch, threads or
    device, and a generation's lengths)."""
    task = select["task"]
    argv = SUITE_OF_TASK.get(task, ["--task", task])
    argv += ["--model", select["network"], "--framework", select["framework"],
             "--mode", select["mode"], "--precision", select["precision"],
             "--batch-size", str(select["batch_size"])]  # fmt: skip
    device = select.get("device") or "cpu"
    if device == "cpu":
        argv += ["--threads", str(select["threads"])]
    else:
        argv += ["--device", device]
    lengths = (select.get("scale") or "").replace("full", "").strip(", ").split(" ")[0]
    if lengths:  # a generation's "128/128 tokens"
        argv += ["--lengths", lengths]
    return shlex.join(argv)


def undecided(path: Path) -> list[tuple[str, int]]:
    """The cells compare --json could not tell, each as one sweep and the pairs it asked
    (made even): ValueError where there are none."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["verdict"] == "cannot tell"]
    if not cells:
        raise ValueError(f"{path}: no cell compare could not tell")
    # compare gives every cell it cannot tell its pairs (None: more than it counts)
    asked = [c.get("runs_needed") or MOST_PAIRS for c in cells]
    return [(cell_sweep(c["select"]), n + n % 2) for c, n in zip(cells, asked)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="base/, new/ and pairs.json go here")
    p.add_argument("--pairs", type=int, help="pairs of runs, an even number (default 4)")
    p.add_argument("--sweep", action="append", default=[], help="one xfbench run's arguments")
    p.add_argument("--only-undecided", type=Path, metavar="JSON",
                   help="compare --json's file: run only the cells it could not tell")  # fmt: skip
    p.add_argument("--base", help="BASE's xfbench command (default: this checkout's)")
    p.add_argument("--new", help="NEW's xfbench command (default: this checkout's)")
    p.add_argument("--new-slowdown", help="FRAMEWORK:SHARE: NEW's steps of it slowed that much")
    args = p.parse_args(argv)
    pairs = args.pairs
    if pairs is not None and (pairs < 2 or pairs % 2):
        p.error("--pairs must be an even number, 2 or more: B N N B cancels a drift over two")
    if args.only_undecided:
        try:
            cells = undecided(args.only_undecided)
        except (OSError, ValueError, KeyError, TypeError) as e:
            p.error(f"--only-undecided: {e}")
        common = " ".join(args.sweep)
        # --pairs, where given, for every cell
        sweeps = [(f"{cell} {common}".strip(), pairs or asked) for cell, asked in cells]
    elif args.sweep:
        sweeps = [(sweep, pairs or 4) for sweep in args.sweep]
    else:
        p.error("give --sweep, or --only-undecided")
    pairs = max(n for _, n in sweeps)
    commands = {
        side: shlex.split(given) if given else THIS_CHECKOUT
        for side, given in (("base", args.base), ("new", args.new))
    }
    slowed = {"XFBENCH_SLOWDOWN": args.new_slowdown} if args.new_slowdown else {}
    envs = {"base": dict(os.environ), "new": {**os.environ, **slowed}}
    failed, made, began = [], [], time.monotonic()
    print(f"{2 * sum(n for _, n in sweeps)} runs of a sweep planned: {len(sweeps)} sweep(s), "
          f"{pairs} pairs at most", flush=True)  # fmt: skip
    for side, i in order(pairs):
        folder, started = args.out / side / f"run-{i}", time.monotonic()
        these = [sweep for sweep, n in sweeps if n >= i]
        if not one_run(commands[side], these, folder, envs[side]):
            failed.append(str(folder))
        made.append({"pair": i, "side": side, "run": str(folder),
                     "started_s": round(started - began, 1)})  # fmt: skip
        print(f"{folder}: {time.monotonic() - started:.0f} s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pairs.json").write_text(json.dumps({"pairs": pairs, "runs": made}, indent=1))
    runs = {s: ",".join(str(args.out / s / f"run-{i}") for i in range(1, pairs + 1))
            for s in ("base", "new")}  # fmt: skip
    print(f"BASE: {runs['base']}\nNEW: {runs['new']}")
    stage = " --stage 2" if args.only_undecided else ""
    print(f"xfbench compare {runs['base']} {runs['new']} --paired{stage}")
    minutes = (time.monotonic() - began) / 60
    print(f"{2 * sum(n for _, n in sweeps)} runs of a sweep: {minutes:.1f} min")
    if failed:
        print(f"a sweep failed in {len(failed)} run(s): {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
