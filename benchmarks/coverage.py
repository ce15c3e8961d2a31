"""How often xfbench's intervals cover what they claim to (a benchmark, not a test).

Runs one small sweep N times (`xfbench run`, each into its own folder), or reads runs
already made (--runs-from), and counts, for each kind of interval the suite prints, how
often it covers the value all N runs pooled give:

  cell        a cell's median, 95 % order-statistics interval over its timed rounds
              (harness/stats.median_ci), against the median of the cell's rounds of all runs
  run score   one run's machine score against the reference, bootstrap interval over the
              rounds (report/score.py), against the score of all runs pooled
  over runs   the t-interval over GROUP runs' scores (report/runs.py), every GROUP of the
              N runs, against the same pooled score

A label of 95 % means 95 of 100 such intervals cover. The counts are not independent
(the cells of one run share its machine state; the groups share runs): the Wilson
interval printed beside each coverage treats them as if they were, so read it as a lower
bound on the uncertainty.

    python benchmarks/coverage.py --runs 10 --out results/coverage
    python benchmarks/coverage.py --runs-from results/coverage/run-*     # analyse again
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

# the sweep rerun: one framework, small and large networks of each kind, both tasks
SWEEP = (
    "--preset reference --framework torch --model fcn5,alexnet,resnet56,lstm32 "
    "--task train,infer --threads 2 --skip-roofs"
)


def run_sweeps(n: int, out: Path, sweep: str) -> list[Path]:
    folders = []
    for i in range(1, n + 1):
        folder = out / f"run-{i}"
        started = time.monotonic()
        argv = [sys.executable, "-m", "xfbench.harness.cli", "run", *sweep.split()]
        proc = subprocess.run([*argv, "--results", str(folder), "--quiet"], check=False)
        print(f"run {i}: exit {proc.returncode}, {time.monotonic() - started:.0f} s", flush=True)
        folders.append(folder)
    return folders


def wilson(hits: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    z, p = 1.959964, hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _cell(r) -> tuple:
    return (r.task, r.network, r.framework, r.mode, r.precision, r.threads, r.batch_size)


def cell_coverage(runs) -> dict:
    from xfbench.harness.stats import median_ci

    rounds: dict[tuple, list[float]] = {}
    for run in runs:
        for r in run.results:
            if r.ok and r.rounds:
                rounds.setdefault(_cell(r), []).extend(r.rounds)
    hits = total = 0
    labels, misses = [], []
    for run in runs:
        for r in run.results:
            if not (r.ok and len(r.rounds) > 1):
                continue
            low, high, label = median_ci(r.rounds)
            pooled = statistics.median(rounds[_cell(r)])
            total += 1
            labels.append(label)
            if low <= pooled <= high:
                hits += 1
            else:  # how far outside, as a share of the pooled median
                misses.append(min(abs(pooled - low), abs(pooled - high)) / pooled)
    return {
        "kind": "cell",
        "label": statistics.mean(labels) if labels else None,
        "checked": total,
        "covered": hits,
        "median_miss": statistics.median(misses) if misses else 0.0,
    }


def score_coverage(runs, reference, group: int) -> list[dict]:
    from xfbench.report import score
    from xfbench.report.load import pooled
    from xfbench.report.runs import over_runs

    truth = score.score(pooled(runs, "pooled", ""), reference).machine.value
    each = [score.score(run, reference).machine for run in runs]
    hits = sum(1 for s in each if s.low <= truth <= s.high)
    groups = list(itertools.combinations([s.value for s in each], group))
    over = [over_runs(list(g)) for g in groups]
    covered = sum(1 for o in over if o.low <= truth <= o.high)
    return [
        {
            "kind": "run score",
            "label": score.LEVEL,
            "checked": len(each),
            "covered": hits,
            "truth": truth,
            "values": [s.value for s in each],
            "widths": [s.high / s.low - 1 for s in each],
        },
        {
            "kind": f"over {group} runs",
            "label": score.LEVEL,
            "checked": len(over),
            "covered": covered,
            "truth": truth,
            "widths": [o.high / o.low - 1 for o in over],
            "independent_groups": len(runs) // group,
        },
    ]


def table(rows: list[dict]) -> str:
    lines = [
        "| interval | label | checked | covering | coverage (95 % Wilson) | median width |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        low, high = wilson(r["covered"], r["checked"])
        share = r["covered"] / r["checked"] if r["checked"] else float("nan")
        width = f"{statistics.median(r['widths']):.1%}" if r.get("widths") else "-"
        label = f"{r['label']:.1%}" if r["label"] is not None else "-"
        lines.append(
            f"| {r['kind']} | {label} | {r['checked']} | {r['covered']} | "
            f"{share:.1%} ({low:.0%}-{high:.0%}) | {width} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10, help="how many times to run the sweep")
    p.add_argument("--out", default="results/coverage", help="folder for the runs")
    p.add_argument("--sweep", default=SWEEP, help=f"xfbench run's options (default: {SWEEP})")
    p.add_argument("--runs-from", nargs="+", help="analyse these runner folders instead")
    p.add_argument("--reference", help="the reference of the scores (default: xfbench's)")
    p.add_argument("--group", type=int, default=3, help="runs per interval over runs")
    args = p.parse_args(argv)
    from xfbench.report import score
    from xfbench.report.load import load

    folders = [Path(f) for f in args.runs_from or run_sweeps(args.runs, Path(args.out), args.sweep)]
    runs = [load(f) for f in folders]
    if len(runs) < args.group + 1:
        print(f"coverage: {len(runs)} runs; at least {args.group + 1} are needed", file=sys.stderr)
        return 2
    if args.reference:
        reference = score.load_reference(args.reference)
    else:
        best = score.best_reference(runs[0])
        if best is None:
            print("coverage: no checked-in reference shares a workload", file=sys.stderr)
            return 2
        reference = next(
            r for r in map(score.load_reference, score.references()) if r.name == best.reference
        )
    rows = [cell_coverage(runs), *score_coverage(runs, reference, args.group)]
    print(f"{len(runs)} runs of {runs[0].machine['label']}, scored against {reference.name}")
    print(table(rows))
    out = Path(args.out if not args.runs_from else folders[0].parent) / "coverage.json"
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
