"""`xfbench compare BASE NEW`: each cell of two runs, or two sets of runs, as a ratio of
times with its interval and a verdict; a summary line; exit 1 when a regression exceeds
--fail-above (a maintainer's CI), 2 on bad input.

BASE and NEW are each a runner folder or pytest-benchmark JSON file, or several joined by
commas (the runs of one side). A cell is the per-core score's (network, task, framework,
mode, precision, batch, and its thread count or device; report/score.py), one process;
generation cells compare their end-to-end generation time. Its time on a side is the
geometric mean of that side's runs' medians, and the ratio is NEW's over BASE's (above 1:
slower).

The interval: with two runs or more on each side, Welch's t-interval on the difference of
the runs' log medians (report/runs.py). With a single run on a side, the run-to-run noise
floor of the cell's kind of workload (runs.NOISE_FLOOR, measured) around the ratio,
widened to the two medians' own intervals where their rounds say more. Verdicts:
regression (the whole interval above 1), improvement (below 1), within noise (it holds
1), insufficient data (the cell ran on one side only, or failed there).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from xfbench import options
from xfbench.report import runs as over

VERDICTS = ("regression", "improvement", "within noise", "insufficient data")
DEFAULT_FAIL_ABOVE = 0.05


@dataclass
class Verdict:
    cell: str
    network: str
    base_s: float | None  # geometric mean over BASE's runs, seconds (per batch, or generation)
    new_s: float | None
    ratio: float | None  # new_s / base_s
    low: float | None
    high: float | None
    verdict: str
    how: str  # what the interval rests on
    base_runs: int
    new_runs: int


@dataclass
class Cell:
    network: str
    medians: list[float]  # one per run that measured it
    rounds: list[list[float]]  # each run's timed rounds (may be empty)


def _cells(run) -> dict[str, Cell]:
    """A run's cells by name: the network cells (one process) and the generation cells."""
    from xfbench.report.score import cell_key, workload_name

    out: dict[str, Cell] = {}
    for r in run.results:
        key = cell_key(r) if r.ok else None
        if key is None:
            continue
        name = f"{workload_name(key, 'per-core')}, batch {r.batch_size}"
        if name not in out or r.median < out[name].medians[0]:
            out[name] = Cell(network=r.network, medians=[r.median], rounds=[r.rounds])
    for g in run.generation:
        if g.get("status", "ok") != "ok" or not isinstance(g.get("e2e_s"), (int, float)):
            continue
        where = g["device"] if g["device"] != "cpu" else f"{g['threads']} threads"
        name = (
            f"gpt2 generate {g['prompt_tokens']}/{g['new_tokens']}, {g['framework']} "
            f"{g['mode']} {g['precision']}, {where}, batch {g['batch_size']}"
        )
        out[name] = Cell(network="gpt2", medians=[g["e2e_s"]], rounds=[[]])
    return out


def _side(runs) -> dict[str, Cell]:
    """Every cell of a side's runs, each run's median and rounds gathered."""
    out: dict[str, Cell] = {}
    for run in runs:
        for name, c in _cells(run).items():
            if name in out:
                out[name].medians += c.medians
                out[name].rounds += c.rounds
            else:
                out[name] = c
    return out


def _geo(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _rounds_interval(c: Cell) -> tuple[float, float] | None:
    """A single run's median interval from its rounds (harness.stats), if it has rounds."""
    from xfbench.harness.stats import median_ci

    if len(c.rounds) != 1 or len(c.rounds[0]) < 2:
        return None
    low, high, _ = median_ci(c.rounds[0])
    return low, high


def judge(name: str, base: Cell | None, new: Cell | None) -> Verdict:
    """One cell's ratio, interval and verdict."""
    if base is None or new is None:
        missing = "BASE" if base is None else "NEW"
        here = new or base
        return Verdict(
            cell=name,
            network=here.network,
            base_s=_geo(base.medians) if base else None,
            new_s=_geo(new.medians) if new else None,
            ratio=None,
            low=None,
            high=None,
            verdict="insufficient data",
            how=f"not measured in {missing}",
            base_runs=len(base.medians) if base else 0,
            new_runs=len(new.medians) if new else 0,
        )
    b, n = _geo(base.medians), _geo(new.medians)
    ratio = n / b
    found = over.ratio_over_runs(base.medians, new.medians)
    if found is not None:
        _, low, high = found
        how = over.METHOD.replace("log values", "log medians, Welch")
    else:
        f = over.floor(new.network)
        low, high = ratio / (1 + f), ratio * (1 + f)
        how = f"the noise floor, +-{f:.0%} (a single run on a side)"
        rb, rn = _rounds_interval(base), _rounds_interval(new)
        if rb and rn:  # the medians' own intervals, where wider than the floor
            low, high = min(low, rn[0] / rb[1]), max(high, rn[1] / rb[0])
    verdict = "regression" if low > 1 else "improvement" if high < 1 else "within noise"
    return Verdict(
        cell=name,
        network=new.network,
        base_s=b,
        new_s=n,
        ratio=ratio,
        low=low,
        high=high,
        verdict=verdict,
        how=how,
        base_runs=len(base.medians),
        new_runs=len(new.medians),
    )


def compare(base_runs, new_runs) -> list[Verdict]:
    base, new = _side(base_runs), _side(new_runs)
    order = {v: i for i, v in enumerate(VERDICTS)}
    found = [judge(name, base.get(name), new.get(name)) for name in sorted(set(base) | set(new))]
    return sorted(found, key=lambda v: (order[v.verdict], -(v.ratio or 0), v.cell))


def overall(base_runs, new_runs) -> over.OverRuns | None:
    """NEW's time over BASE's across the cells both sides measured in every run: each
    run's geometric mean over those cells, then the ratio over runs (None with a single
    run on a side, or no such cell)."""
    sides = [[_cells(r) for r in runs] for runs in (base_runs, new_runs)]
    shared = set.intersection(*(set(c) for side in sides for c in side)) if sides[0] else set()
    if not shared:
        return None
    means = [[_geo([c[k].medians[0] for k in shared]) for c in side] for side in sides]
    found = over.ratio_over_runs(means[0], means[1])
    if found is None:
        return None
    ratio, low, high = found
    return over.OverRuns(value=ratio, low=low, high=high, runs=len(shared), spread=0.0)


def _pct(x: float) -> str:
    return f"{(x - 1) * 100:+.1f} %"


def table(verdicts: list[Verdict]) -> str:
    from tabulate import tabulate

    rows = [
        [
            v.cell,
            f"{v.base_s:.4g}" if v.base_s else "",
            f"{v.new_s:.4g}" if v.new_s else "",
            _pct(v.ratio) if v.ratio else "",
            f"{_pct(v.low)} to {_pct(v.high)}" if v.low else "",
            v.verdict,
            v.how,
        ]
        for v in verdicts
    ]
    headers = ["cell", "BASE s", "NEW s", "time", "95 % interval", "verdict", "interval from"]
    return tabulate(rows, headers=headers, disable_numparse=True)


def summary(verdicts: list[Verdict], total: over.OverRuns | None, fail_above: float) -> str:
    counts = {v: sum(1 for x in verdicts if x.verdict == v) for v in VERDICTS}
    said = ", ".join(f"{n} {v}" for v, n in counts.items())
    worst = next((v for v in verdicts if v.verdict == "regression"), None)
    text = f"{len(verdicts)} cells: {said}"
    if worst:
        text += f"; worst: {worst.cell} {_pct(worst.ratio)}"
    if total is not None:
        text += (
            f"; NEW's time over BASE's across the {total.runs} cells every run measured: "
            f"x{total.value:.3f} (95 % CI {total.low:.3f}-{total.high:.3f})"
        )
    failing = [v for v in verdicts if v.verdict == "regression" and v.ratio - 1 > fail_above]
    if failing:
        text += f"; {len(failing)} regression(s) beyond {fail_above:.0%}: failing"
    return text


def bmf(verdicts: list[Verdict]) -> dict:
    """Bencher Metric Format: each cell's NEW time as a latency in nanoseconds, and the
    ratio to BASE with its interval (measure "ratio-to-base")."""
    out = {}
    for v in verdicts:
        if v.new_s is None:
            continue
        measures = {"latency": {"value": v.new_s * 1e9}}
        if v.ratio is not None:
            measures["ratio-to-base"] = {
                "value": v.ratio,
                "lower_value": v.low,
                "upper_value": v.high,
            }
        out[v.cell] = measures
    return out


def _fraction(value: str) -> float:
    text = value.strip()
    share = text.endswith("%")
    number = options.number("--fail-above", text.rstrip("%"), low_inclusive=True)
    return number / 100 if share else number


def parser() -> options.ArgumentParser:
    p = options.ArgumentParser(
        prog="xfbench compare",
        description="Each cell of NEW against BASE (runs, or several joined by commas): "
        "its ratio of times, 95 %% interval and verdict; exit 1 when a regression exceeds "
        "--fail-above.",
    )
    p.add_argument("base", metavar="BASE", help="runner folders or JSON files, comma-separated")
    p.add_argument("new", metavar="NEW", help="likewise")
    p.add_argument(
        "--fail-above",
        default=f"{DEFAULT_FAIL_ABOVE:.0%}",
        help="a regression slower than this fails (exit 1): 5%% or 0.05 (default: 5%%)",
    )
    p.add_argument("--json", metavar="FILE", help="also write the verdicts as JSON")
    p.add_argument("--bmf", metavar="FILE", help="also write Bencher Metric Format JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    from xfbench.errors import UsageError
    from xfbench.report.load import LoadError, load_many

    args = options.parse_command_line(parser(), argv)
    if isinstance(args, int):
        return args
    try:
        fail_above = _fraction(args.fail_above)
        sides = [[p for p in value.split(",") if p] for value in (args.base, args.new)]
        if not all(sides):
            raise UsageError("BASE and NEW each name at least one run")
    except UsageError as e:
        print(f"xfbench compare: {e}", file=sys.stderr)
        return 2
    try:
        base_runs, new_runs = ([r for p in side for r in load_many(p)] for side in sides)
    except LoadError as e:
        print(f"xfbench compare: {e}", file=sys.stderr)
        return 2
    verdicts = compare(base_runs, new_runs)
    if not verdicts:
        print("xfbench compare: no cell measured in BASE or NEW", file=sys.stderr)
        return 2
    total = overall(base_runs, new_runs)
    print(table(verdicts))
    print()
    line = summary(verdicts, total, fail_above)
    print(line)
    for path, doc in ((args.json, None), (args.bmf, bmf(verdicts))):
        if path:
            doc = doc or {
                "summary": line,
                "fail_above": fail_above,
                "base": sides[0],
                "new": sides[1],
                "cells": [asdict(v) for v in verdicts],
            }
            Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    failing = any(v.verdict == "regression" and v.ratio - 1 > fail_above for v in verdicts)
    return 1 if failing else 0
