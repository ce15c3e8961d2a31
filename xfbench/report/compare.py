"""`xfbench compare BASE NEW`: each cell of two runs, or two sets of runs, as a ratio of
times with its interval and a verdict; a summary line; exit 1 when a regression exceeds
--fail-above (a maintainer's CI), 2 on bad input.

BASE and NEW are each a runner folder or pytest-benchmark JSON file, or several joined by
commas (the runs of one side). A cell is the per-core score's (network, task, framework,
mode, precision, batch, and its thread count or device; report/score.py), one process:
training and inference cells, Offline serving (seconds per batch) and generation (seconds
per generation). Its time on a side is the geometric mean of that side's runs' medians,
and the ratio is NEW's over BASE's (above 1: slower).

How a cell is judged: the difference of the two sides' mean log medians, over its scale,
is Student's t with the degrees of freedom of the cell's kind of workload; the scale is
that kind's, measured from runs of one machine (report/noise.py, data/noise.json), shrunk
for several runs a side, or the cell's own spread over its runs where that is wider.
Every cell compared is one family of tests: a cell is a regression or an improvement only
where Benjamini-Hochberg at 5 % across all of them rejects "no change" (with nothing
changed, any false verdict at all then happens in at most 5 % of comparisons, where 85
cells judged one by one at 95 % would give about 4 each time). Otherwise it is within
noise where its own 95 % interval excludes a regression of --fail-above, and "cannot
tell" where it does not: the evidence cannot separate that threshold from the noise, and
the summary says how many runs a side would. Insufficient data: measured on one side only.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from xfbench import options
from xfbench.report import noise
from xfbench.report import runs as over

VERDICTS = ("regression", "improvement", "cannot tell", "within noise", "insufficient data")
DEFAULT_FAIL_ABOVE = 0.05
FAMILY_Q = 0.05  # Benjamini-Hochberg's level across the cells compared
LEVEL = 0.95  # each cell's own interval


@dataclass
class Verdict:
    cell: str
    network: str
    task: str
    base_s: float | None  # geometric mean over BASE's runs, seconds (per batch, or generation)
    new_s: float | None
    ratio: float | None  # new_s / base_s
    low: float | None  # the ratio's own 95 % interval
    high: float | None
    p: float | None  # two-sided, of "no change"
    verdict: str
    how: str  # what the interval rests on
    base_runs: int
    new_runs: int
    runs_needed: int | None = None  # a side, for the interval to exclude --fail-above


@dataclass
class Cell:
    network: str
    task: str
    medians: list[float]  # one per run that measured it
    rounds: list[list[float]]  # each run's timed rounds (may be empty)


def _cells(run) -> dict[str, Cell]:
    """A run's cells by name: every result the scores count (report/score.py), one process."""
    from xfbench.report.score import cell_key, scored_results, workload_name

    out: dict[str, Cell] = {}
    for r in scored_results(run):
        key = cell_key(r) if r.ok else None
        if key is None:
            continue
        lengths = r.scale.replace("full", "").strip(", ")  # a generation's: 128/128 tokens
        name = f"{workload_name(key, 'per-core')}{', ' + lengths if lengths else ''}"
        name += f", batch {r.batch_size}"
        if name not in out or r.median < out[name].medians[0]:
            out[name] = Cell(r.network, r.task, medians=[r.median], rounds=[r.rounds])
    return out


def side(runs_cells: list[dict[str, Cell]]) -> dict[str, Cell]:
    """Every cell of a side's runs (each run's cells, _cells), medians and rounds gathered."""
    out: dict[str, Cell] = {}
    for cells in runs_cells:
        for name, c in cells.items():
            if name in out:
                out[name] = Cell(
                    c.network, c.task, out[name].medians + c.medians, out[name].rounds + c.rounds
                )
            else:
                out[name] = c
    return out


def _geo(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _own_se(base: Cell, new: Cell) -> float | None:
    """The difference of mean log medians' standard error from the cell's own runs, where
    each side has two or more."""
    if len(base.medians) < 2 or len(new.medians) < 2:
        return None
    var = 0.0
    for side in (base.medians, new.medians):
        logs = [math.log(x) for x in side]
        m = sum(logs) / len(logs)
        var += sum((x - m) ** 2 for x in logs) / (len(logs) - 1) / len(logs)
    return math.sqrt(var)


def _missing(name: str, base: Cell | None, new: Cell | None) -> Verdict:
    here = new or base
    return Verdict(
        cell=name,
        network=here.network,
        task=here.task,
        base_s=_geo(base.medians) if base else None,
        new_s=_geo(new.medians) if new else None,
        ratio=None,
        low=None,
        high=None,
        p=None,
        verdict="insufficient data",
        how=f"not measured in {'BASE' if base is None else 'NEW'}",
        base_runs=len(base.medians) if base else 0,
        new_runs=len(new.medians) if new else 0,
    )


def _model(models: dict, task: str, network: str) -> noise.Noise:
    return noise.model_for(models, task, network)


def judge(name: str, base: Cell | None, new: Cell | None, models: dict) -> Verdict:
    """One cell's ratio, its own interval and its p-value of "no change"; its verdict is
    decided with the other cells' (decide)."""
    from scipy.stats import t

    if base is None or new is None:
        return _missing(name, base, new)
    model = _model(models, new.task, new.network)
    nb, nn = len(base.medians), len(new.medians)
    se, how = model.se(nb, nn), f"{model.of} noise, t({model.df:.1f}) x {model.scale:.3f}"
    own = _own_se(base, new)
    if own is not None and own > se:
        se, how = own, f"its own spread over {nb} and {nn} runs (wider than {model.of}'s)"
    d = math.log(_geo(new.medians) / _geo(base.medians))
    half = float(t.ppf(0.5 + LEVEL / 2, model.df)) * se
    return Verdict(
        cell=name,
        network=new.network,
        task=new.task,
        base_s=_geo(base.medians),
        new_s=_geo(new.medians),
        ratio=math.exp(d),
        low=math.exp(d - half),
        high=math.exp(d + half),
        p=float(2 * t.sf(abs(d) / se, model.df)) if se > 0 else float(d == 0),
        verdict="",
        how=how,
        base_runs=nb,
        new_runs=nn,
    )


def rejected(p_values: list[float], q: float = FAMILY_Q) -> list[bool]:
    """Benjamini-Hochberg at level q: which of the hypotheses are rejected."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m, last = len(p_values), -1
    for rank, i in enumerate(order, start=1):
        if p_values[i] <= rank * q / m:
            last = rank
    out = [False] * m
    for rank, i in enumerate(order, start=1):
        out[i] = rank <= last
    return out


def runs_needed(v: Verdict, models: dict, fail_above: float) -> int:
    """Runs a side for a cell's 95 % interval, with nothing changed, to exclude a
    regression of fail_above (from the kind's measured noise)."""
    from scipy.stats import t

    model = _model(models, v.task, v.network)
    k = float(t.ppf(0.5 + LEVEL / 2, model.df)) * model.scale / math.log(1 + fail_above)
    return max(2, math.ceil(k * k))


def decide(verdicts: list[Verdict], fail_above: float, models: dict) -> None:
    """Each compared cell's verdict, the cells taken together (Benjamini-Hochberg)."""
    judged = [v for v in verdicts if v.ratio is not None]
    for v, changed in zip(judged, rejected([v.p for v in judged])):
        if changed:
            v.verdict = "regression" if v.ratio > 1 else "improvement"
        elif v.high < 1 + fail_above:
            v.verdict = "within noise"
        else:
            v.verdict = "cannot tell"
            v.runs_needed = runs_needed(v, models, fail_above)


def compare(base_runs, new_runs, fail_above: float = DEFAULT_FAIL_ABOVE, models=None):
    """Every cell's Verdict, regressions first."""
    return compare_cells(
        side([_cells(r) for r in base_runs]),
        side([_cells(r) for r in new_runs]),
        fail_above,
        models,
    )


def compare_cells(base: dict, new: dict, fail_above: float = DEFAULT_FAIL_ABOVE, models=None):
    """compare() of two sides' cells (side())."""
    models = models or noise.load()
    order = {v: i for i, v in enumerate(VERDICTS)}
    found = [
        judge(name, base.get(name), new.get(name), models) for name in sorted(set(base) | set(new))
    ]
    decide(found, fail_above, models)
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
    headers = ["cell", "BASE s", "NEW s", "time", "its 95 % interval", "verdict", "noise from"]
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
    judged = sum(1 for v in verdicts if v.ratio is not None)
    text += (
        f"; false verdicts expected were nothing changed: at most {FAMILY_Q:g} in all "
        f"(Benjamini-Hochberg at {FAMILY_Q:.0%} across {judged} cells; one by one at "
        f"{LEVEL:.0%}: {judged * (1 - LEVEL):.1f})"
    )
    unsure = [v for v in verdicts if v.verdict == "cannot tell"]
    if unsure:
        most = max(v.runs_needed for v in unsure)
        least = min(v.runs_needed for v in unsure)
        text += (
            f"; {len(unsure)} cells cannot tell a {fail_above:.0%} regression from their "
            f"noise: {least}{'' if least == most else f' to {most}'} runs a side would"
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
        "its ratio of times, 95 % interval and verdict; exit 1 when a regression exceeds "
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
        options.output_path("--json", args.json)
        options.output_path("--bmf", args.bmf)
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
    verdicts = compare(base_runs, new_runs, fail_above)
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
