"""How often `xfbench compare` cries wolf, and how often it catches a real slowdown, each
measured on runs its noise model was not fitted on (a benchmark, not a test).

    # runs of one machine: the sweep below N times, each into its own folder; with
    # --slowdown, every timed step of one framework sleeps that share of its own duration
    python benchmarks/verdicts.py make --out results/verdicts/zen5 --runs 6
    python benchmarks/verdicts.py make --out results/verdicts/zen5-torch-slow10 --runs 3 \\
        --slowdown torch:0.1
    # a smaller sweep where a run of all 36 cells takes too long (a Zen 3: over 10 minutes)
    python benchmarks/verdicts.py make --out results/verdicts/zen3-b --runs 30 \\
        --sweep="--preset reference --threads 2 --skip-roofs --framework torch,onnxruntime \\
                 --model fcn5,alexnet,resnet56,lstm32 --task train,infer"

    # fit the noise model on some runs, measure its rates on others (and, with --write
    # FILE, keep the fitted model there: the package's prior is data/noise.json)
    python benchmarks/verdicts.py rates \\
        --fit zen4=xfbench/report/references/2026-11-26-amd-epyc-zen4-2c/run-1,...,run-3 \\
        --test zen5=benchmarks/runs/zen5/run-1,...,run-6 \\
        --slowed zen5:torch:0.1=benchmarks/runs/zen5-torch-slow10/run-1,...,run-3

    # the procedure frozen for sittings (separate machine starts, hours apart): a history of
    # ten runs or more of one sitting as --noise, judged on the runs of the other sittings,
    # each run in one comparison only (disjoint), one cell slowed 10, 20 and 30 % in turn
    python benchmarks/verdicts.py sittings \
        --history zen5-b=benchmarks/runs/zen5-b/run-1,...,run-10 \
        --test zen5-a=benchmarks/runs/zen5/run-1,...,run-6 --test zen5-c=...

    # both stages, emulated on a test sitting's runs: each three-against-three comparison's
    # cells it cannot tell judged again (compare --paired --stage 2) on pairs of the
    # sitting's other runs, each cell in as many pairs as it asks at --detect
    python benchmarks/verdicts.py stages --detect 0.2 --history ... --test ...

Rates (each against compare's default --fail-above, 5 %):
  false alarms   the share of same-machine comparisons compare fails (exit 1): n runs
                 against n others (n = 1, 2, 3; every split of disjoint runs), and the
                 false verdicts (regression or improvement) they gave
  detection      the share of the cells a slowdown touches that compare calls a
                 regression: scaled (one framework's medians and rounds in one of two runs
                 multiplied by 1.1 or 1.2: one against one, and three against three where a
                 machine has six runs) and real (runs made with --slowdown against the
                 machine's own runs)
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

# The sweep of one run (about 8 minutes on 2 cores): the reference preset's timing (6
# rounds) on networks of each family and kind of workload, every framework.
SWEEP = (
    "--preset reference --threads 2 --skip-roofs --framework torch,jax,onnxruntime,tensorflow "
    "--model fcn5,alexnet,resnet56,lstm32 --task train,infer",
    "--suite serving --scenario Offline --preset reference --threads 2 --skip-roofs "
    "--framework torch,onnxruntime --model resnet56",
    "--suite generation --preset reference --threads 2 --skip-roofs "
    "--framework torch,jax,onnxruntime --mode eager,jit,cpu --batch-size 1,8 --lengths 32/32",
)


def make(out: Path, n: int, slowdown: str | None, sweeps: tuple[str, ...] = SWEEP) -> None:
    env = {**os.environ, **({"XFBENCH_SLOWDOWN": slowdown} if slowdown else {})}
    out.mkdir(parents=True, exist_ok=True)
    (out / "sitting.json").write_text(
        json.dumps({**sitting(), "sweep": list(sweeps)}, indent=1) + "\n"
    )
    for i in range(1, n + 1):
        folder, started = out / f"run-{i}", time.monotonic()
        for sweep in sweeps:
            argv = [sys.executable, "-m", "xfbench.harness.cli", "run", *sweep.split()]
            subprocess.run([*argv, "--results", str(folder), "--quiet"], env=env, check=False)
        print(f"{folder}: {time.monotonic() - started:.0f} s", flush=True)


def sitting() -> dict:
    """What tells one sitting from another: the machine's start (the kernel's boot id), the
    hour, the CPU (brand, family and model, ISA: "AMD EPYC" alone names Zen 3 and Zen 5
    alike) and its cores, and the code that measured."""
    import datetime

    from xfbench import machine

    boot = Path("/proc/sys/kernel/random/boot_id")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()  # fmt: skip
    return {
        "boot_id": boot.read_text().strip() if boot.exists() else None,
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu": machine.cpu(),
        "cores": os.cpu_count(),
        "commit": commit,
    }


# -- the analysis --------------------------------------------------------------------


def load_runs(paths: list[str]) -> list[dict]:
    """Each run's cells, as compare reads them."""
    from xfbench.report import compare
    from xfbench.report.load import load

    return [compare._cells(load(p)) for p in paths]


def log_ratios(cells: list[dict]) -> dict[tuple[str, str], list[float]]:
    """Every cell's log ratio between every pair of the runs, by (kind, family)."""
    from xfbench.report import noise

    return noise.log_ratios(cells)


def slowed_cells(cells: dict, framework: str, factor: float) -> dict:
    """A run's cells with one framework's medians and rounds factor times as long."""
    from xfbench.report.compare import Cell

    return {
        name: Cell(c.network, c.task, [m * factor for m in c.medians],
                   [[x * factor for x in r] for r in c.rounds], c.accelerator, c.failed)
        if framework_of(name) == framework else c
        for name, c in cells.items()
    }  # fmt: skip


def outcome(base: list[dict], new: list[dict], models: dict, fail_above: float = 0.05):
    """compare's verdicts of two sides (each a list of runs' cells), and whether it fails
    (exit 1), as a user runs it without --noise: the fitted models as its prior."""
    from xfbench.report import compare

    noises = compare.Noises(prior=models)
    verdicts, _ = compare.compare_cells(compare.side(base), compare.side(new), fail_above, noises)
    return verdicts, compare.exit_code(verdicts, fail_above, cannot_tell_ok=True) == 1


def false_alarms(runs: list[dict], models: dict) -> dict:
    """Same-machine comparisons, n runs against n others: 1v1 (both orders), 2v2 and 3v3
    (every split of disjoint runs), each its rates."""
    index = range(len(runs))
    out = {}
    for n in (1, 2, 3):
        comparisons = [
            (list(base), list(new))
            for base in itertools.combinations(index, n)
            for new in itertools.combinations([i for i in index if i not in base], n)
        ]
        if not comparisons:
            continue
        failed = wrong = cells = unsure = 0
        for base, new in comparisons:
            verdicts, fails = outcome([runs[i] for i in base], [runs[i] for i in new], models)
            failed += fails
            wrong += sum(v.verdict in ("regression", "improvement") for v in verdicts)
            unsure += sum(v.verdict == "cannot tell" for v in verdicts)
            cells += sum(v.ratio is not None for v in verdicts)
        out[f"{n} a side"] = {
            "comparisons": len(comparisons),
            "failed": failed,
            "false_verdicts": wrong,
            "cannot_tell": unsure,
            "cells": cells,
        }
    return out


def caught(base: list[dict], new: list[dict], framework: str, models: dict) -> dict:
    """Per kind of workload, and "all": [cells of the framework called regression, called
    cannot tell, cells of it]."""
    from xfbench.report import noise

    verdicts, _ = outcome(base, new, models)
    out: dict[str, list[int]] = {"all": [0, 0, 0]}
    for v in verdicts:
        if v.ratio is None or framework_of(v.cell) != framework:
            continue
        for key in ("all", noise.kind_of(v.task, v.network)[0]):
            tally = out.setdefault(key, [0, 0, 0])
            tally[0] += v.verdict == "regression"
            tally[1] += v.verdict == "cannot tell"
            tally[2] += 1
    return out


def add(into: dict, found: dict) -> dict:
    for key, tally in found.items():
        into[key] = [a + b for a, b in zip(into.get(key, [0, 0, 0]), tally)]
    return into


def framework_of(cell: str) -> str:
    from xfbench.frameworks import display

    names = {display(f): f for f in ("torch", "jax", "onnxruntime", "tensorflow")}
    return next((f for shown, f in names.items() if f", {shown} " in cell), "")


def detection(runs: list[dict], models: dict, framework: str) -> dict:
    """Scaled slowdowns of one framework: 20 % one run against one, 10 % and 20 % three
    against three (disjoint runs)."""
    out = {}
    for factor, per_side in ((1.2, 1), (1.1, 3), (1.2, 3)):
        if len(runs) < 2 * per_side:
            continue
        tallies: dict = {}
        for base in itertools.combinations(range(len(runs)), per_side):
            rest = [i for i in range(len(runs)) if i not in base]
            for new in itertools.combinations(rest, per_side):
                slowed = [slowed_cells(runs[i], framework, factor) for i in new]
                add(tallies, caught([runs[i] for i in base], slowed, framework, models))
        out[f"+{round((factor - 1) * 100)} %, {per_side} a side"] = tallies
    return out


def single_cells(runs: list[dict], models: dict, factor: float = 1.2, per_side: int = 3) -> dict:
    """One cell slowed at a time, per_side runs against per_side others: per kind, and
    "all", [times it was called a regression, tries]."""
    from xfbench.report import compare, noise

    out: dict[str, list[int]] = {}
    index = range(len(runs))
    for base in itertools.combinations(index, per_side):
        for new in itertools.combinations([i for i in index if i not in base], per_side):
            names = set.intersection(*(set(runs[i]) for i in (*base, *new)))
            for name in sorted(names):
                slowed = []
                for i in new:
                    c = runs[i][name]
                    if not c.medians:
                        break
                    changed = compare.Cell(c.network, c.task, [m * factor for m in c.medians],
                                           c.rounds, c.accelerator)  # fmt: skip
                    slowed.append({**runs[i], name: changed})
                else:
                    verdicts, _ = outcome([runs[i] for i in base], slowed, models)
                    v = next(v for v in verdicts if v.cell == name)
                    for key in ("all", noise.kind_of(v.task, v.network)[0]):
                        tally = out.setdefault(key, [0, 0])
                        tally[0] += v.verdict == "regression"
                        tally[1] += 1
    return out


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import beta

    low = float(beta.ppf(0.025, k, n - k + 1)) if k else 0.0
    high = float(beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return low, high


def disjoint(runs: list, per_side: int) -> list[tuple[list, list]]:
    """Comparisons of per_side runs against per_side others, each run in one only: the runs
    taken in order, in groups of 2 x per_side (BASE the first half)."""
    size = 2 * per_side
    return [(runs[i : i + per_side], runs[i + per_side : i + size])
            for i in range(0, len(runs) - size + 1, size)]  # fmt: skip


def history_noises(groups: list[str]):
    """compare --noise of the one --history group's runs, as `xfbench noise` writes it."""
    from xfbench.report import compare, family, noise

    [(name, paths)] = parse_groups(groups).items()
    past = load_runs(paths)
    models = noise.fit_all(noise.log_ratios(past))
    noises = compare.Noises(prior=noise.load(), history=models, history_name=name,
                            history_cells=noise.cell_spreads(past),
                            runs=noise.history(paths, past))  # fmt: skip
    print(f"== history: {name}, {len(past)} runs (A/A: {len(past) >= family.HISTORY_RUNS})")
    return noises


def sittings(args) -> None:
    """The frozen procedure: --history's runs as compare --noise (A/A critical values where
    they are ten or more), judged on each --test sitting's runs in disjoint comparisons:
    false alarms (exit 1 with nothing changed), and one cell slowed 10, 20 and 30 % (every
    cell in turn, its NEW medians scaled): caught, beside the power compare stated for it."""
    from xfbench.report import compare, family

    noises = history_noises(args.history)
    for test, test_paths in parse_groups(args.test).items():
        runs = load_runs(test_paths)
        for per_side in (1, 3):
            pairs = disjoint(runs, per_side)
            if not pairs:
                continue
            failed = 0
            undecided = []
            for base, new in pairs:
                verdicts, _ = compare.compare_cells(compare.side(base), compare.side(new), 0.05, noises)  # fmt: skip
                failed += compare.exit_code(verdicts, 0.05, cannot_tell_ok=True) == 1
                undecided += [v.runs_needed for v in verdicts if v.verdict == "cannot tell"]
            low, high = clopper_pearson(failed, len(pairs))
            print(f"  {test}, {per_side} a side: false alarms {failed} of {len(pairs)} "
                  f"({low:.1%}-{high:.1%}); {second_stage(undecided)} in all")  # fmt: skip
            for factor in (1.1, 1.2, 1.3):
                asked: list = []
                by_cell: dict[str, list] = {}  # cell: [caught, tries, stated powers]
                for base, new in pairs:
                    for cell in sorted(set.intersection(*(set(r) for r in base + new))):
                        if not all(r[cell].medians for r in base + new):
                            continue
                        slowed = [{**r, cell: replace(r[cell], medians=[m * factor for m in r[cell].medians])}  # fmt: skip
                                  for r in new]  # fmt: skip
                        verdicts, _ = compare.compare_cells(compare.side(base), compare.side(slowed), 0.05, noises)  # fmt: skip
                        v = next(v for v in verdicts if v.cell == cell)
                        if v.verdict == "cannot tell":  # the pairs a second stage asks
                            asked.append(v.runs_needed)
                        crit = family.max_t(noises.runs, sorted(noises.runs.logs), per_side, per_side,
                                            alpha=compare.STAGE_ALPHA[1], moderation=compare.moderation)  # fmt: skip
                        said = crit.power(cell, math.log(factor)) if noises.calibrates(cell) else None  # fmt: skip
                        mine = by_cell.setdefault(cell, [0, 0, []])
                        mine[0] += v.verdict == "regression"
                        mine[1] += 1
                        mine[2].append(said if said is not None else float("nan"))
                caught = sum(c for c, _, _ in by_cell.values())
                tries = sum(t for _, t, _ in by_cell.values())
                stated = [x for _, _, s in by_cell.values() for x in s]
                low, high = clopper_pearson(caught, tries)
                said = [x for x in stated if x == x]
                mean_said = sum(said) / len(said) if said else float("nan")
                print(f"    one cell +{factor - 1:.0%}: caught {caught} of {tries} "
                      f"({low:.1%}-{high:.1%}), stated {mean_said:.1%}; {second_stage(asked)}")  # fmt: skip
                print(f"      {cell_by_cell(by_cell)}")


def cell_by_cell(by_cell: dict[str, list]) -> str:
    """Stated power against detection, each cell on its own (the goal: within 10 points on
    average): the mean over cells of |mean stated - share caught|, in points, the cells
    where they differ most, and how many tries each cell had (few tries: a wide share)."""
    gaps = {}
    for cell, (caught, tries, stated) in by_cell.items():
        said = [x for x in stated if x == x]
        if said and tries:
            gaps[cell] = (100 * (sum(said) / len(said) - caught / tries), tries)
    if not gaps:
        return "cell by cell: no stated power to check"
    mean = sum(abs(g) for g, _ in gaps.values()) / len(gaps)
    low, high = min(t for _, t in gaps.values()), max(t for _, t in gaps.values())
    worst = sorted(gaps, key=lambda c: -abs(gaps[c][0]))[:2]
    return (f"cell by cell: stated - caught {mean:.1f} points on average over {len(gaps)} "
            f"cells ({low if low == high else f'{low}-{high}'} tries a cell); most: "
            + ", ".join(f"{c} {gaps[c][0]:+.0f}" for c in worst))  # fmt: skip


def spare_pairs(n: int, used: range) -> list[tuple[int, int]]:
    """(BASE, NEW) run indices for a second stage from the runs a comparison did not use:
    consecutive runs of each stretch outside it, two at a time, the sides ordered B N, N B,
    ... as alternate.py orders them."""
    out: list[tuple[int, int]] = []
    stretch: list[int] = []
    for i in [*range(n), None]:
        if i is not None and i not in used:
            stretch.append(i)
            continue
        for a, b in zip(stretch[::2], stretch[1::2]):
            out.append((a, b) if len(out) % 2 == 0 else (b, a))
        stretch = []
    return out


def _scaled(run: dict, cell: str | None, factor: float) -> dict:
    if cell is None or cell not in run or not run[cell].medians:
        return run
    return {**run, cell: replace(run[cell], medians=[m * factor for m in run[cell].medians])}


def stage_two_pairs(runs: list[dict], pool: list[tuple[int, int]], undecided: dict,
                    cell: str | None, factor: float) -> list[tuple[dict, dict]]:  # fmt: skip
    """The pool's pairs of runs as a second stage of the `undecided` cells (name -> pairs
    asked, None: more than compare counts) makes them: each cell in as many pairs as it
    asked (made even, as alternate.py runs them), `cell` slowed by `factor` in NEW."""
    from xfbench.report import compare

    pairs = []
    for k, (b, n) in enumerate(pool):
        keep = {c for c, asked in undecided.items()
                if k < (asked + asked % 2 if asked else compare.MOST_RUNS)}  # fmt: skip
        pairs.append(({c: runs[b][c] for c in keep if c in runs[b]},
                      _scaled({c: runs[n][c] for c in keep if c in runs[n]}, cell, factor)))  # fmt: skip
    return pairs


def second_stage_of(runs: list[dict], pool: list[tuple[int, int]], undecided: dict,
                    cell: str | None, factor: float, noises, detect: float):  # fmt: skip
    """compare --paired --stage 2 of the `undecided` cells on the pool's pairs
    (stage_two_pairs): its verdicts and exit code."""
    from xfbench.report import compare

    pairs = stage_two_pairs(runs, pool, undecided, cell, factor)
    verdicts, _ = compare.compare_cells(compare.side([b for b, _ in pairs]),
                                        compare.side([n for _, n in pairs]), 0.05, noises,
                                        stage=2, pairs=pairs, detect=detect)  # fmt: skip
    return verdicts, compare.exit_code(verdicts, 0.05, cannot_tell_ok=True)


def stages(args) -> None:
    """Both stages on each --test sitting's runs: every disjoint comparison of three runs
    against three, judged as `sittings` judges them but with --detect sizing the second
    stage; the cells it cannot tell judged again on pairs of the sitting's other runs
    (spare_pairs: as many as it holds, made even), each cell in as many pairs as it asked,
    or all the pool holds where it asked more (said: "short"). With nothing changed, a
    false alarm is an exit 1 in either stage; with one cell slowed (every cell in turn),
    caught is a regression in either."""
    from statistics import median_high

    from xfbench.report import compare

    noises = history_noises(args.history)
    detect = args.detect
    for test, test_paths in parse_groups(args.test).items():
        runs = load_runs(test_paths)
        for start in range(0, len(runs) - 5, 6):
            base, new = runs[start : start + 3], runs[start + 3 : start + 6]
            pool = spare_pairs(len(runs), range(start, start + 6))
            pool = pool[: len(pool) - len(pool) % 2]
            where = f"{test} runs {start + 1}-{start + 6}, {len(pool)} spare pairs"
            if not pool:
                print(f"  {where}: no second stage to emulate")
                continue
            verdicts, _ = compare.compare_cells(compare.side(base), compare.side(new), 0.05,
                                                noises, detect=detect)  # fmt: skip
            first = compare.exit_code(verdicts, 0.05, cannot_tell_ok=True) == 1
            undecided = {v.cell: v.runs_needed for v in verdicts if v.verdict == "cannot tell"}
            asked = [n + n % 2 for n in undecided.values() if n is not None]
            beyond = sum(n is None for n in undecided.values())
            second = second_stage_of(runs, pool, undecided, None, 1.0, noises, detect)[1] == 1
            print(f"  {where}: nothing changed: stage 1 {'fails' if first else 'passes'}, "
                  f"stage 2 {'fails' if second else 'passes'}; {len(undecided)} cannot tell, "
                  f"asking {median_high(asked) if asked else '-'} pairs (median; "
                  f"{min(asked, default='-')}-{max(asked, default='-')}), {beyond} more than "
                  f"{compare.MOST_RUNS}: {2 * sum(asked)} runs of a cell in all")  # fmt: skip
            for factor in args.factor:
                one = two = tries = short = 0
                missed = []  # (cell, why) neither stage caught
                for cell in sorted(set.intersection(*(set(r) for r in base + new))):
                    if not all(r[cell].medians for r in base + new):
                        continue
                    slowed = [_scaled(r, cell, factor) for r in new]
                    found, _ = compare.compare_cells(compare.side(base), compare.side(slowed),
                                                     0.05, noises, detect=detect)  # fmt: skip
                    v = next(v for v in found if v.cell == cell)
                    tries += 1
                    if v.verdict == "regression":
                        one += 1
                    elif v.verdict == "cannot tell":
                        left = {x.cell: x.runs_needed for x in found if x.verdict == "cannot tell"}
                        need = left[cell]
                        short += need is None or need + need % 2 > len(pool)
                        again, _ = second_stage_of(runs, pool, left, cell, factor, noises, detect)
                        if next(x for x in again if x.cell == cell).verdict == "regression":
                            two += 1
                        else:
                            wanted = need + need % 2 if need else f"more than {compare.MOST_RUNS}"
                            missed.append((cell, f"{wanted} pairs asked of {len(pool)}"))
                    else:
                        missed.append((cell, f"stage 1 said {v.verdict}"))
                low, high = clopper_pearson(one + two, tries)
                print(f"    one cell +{factor - 1:.0%}: stage 1 caught {one} of {tries}, stage "
                      f"2 {two} of the {tries - one} left ({short} asked more than the "
                      f"{len(pool)} spare pairs): both {one + two} of {tries} "
                      f"({low:.1%}-{high:.1%})")  # fmt: skip
                for cell, why in missed:
                    print(f"      missed: {cell}, {why}")


def second_stage(asked: list) -> str:
    """What the second stage would ask of the cells the first could not tell: the pairs of
    fresh runs each needs (compare's runs_needed), median and range, and how many need more
    than compare looks for (MOST_RUNS: runs_needed None)."""
    from statistics import median_high

    from xfbench.report.compare import MOST_RUNS

    if not asked:
        return "none cannot tell"
    known = sorted(n for n in asked if n is not None)
    found = f"{len(asked)} cannot tell"
    if known:
        found += f", second stage {median_high(known)} pairs (median; {known[0]}-{known[-1]})"
    beyond = len(asked) - len(known)
    return found + (f", {beyond} need more than {MOST_RUNS}" if beyond else "")


def parse_groups(values: list[str]) -> dict[str, list[str]]:
    out = {}
    for value in values:
        name, _, paths = value.partition("=")
        out[name] = [p for p in paths.split(",") if p]
    return out


def rates(args) -> None:
    """The models fitted on --fit's runs; the rates on --test's runs (none of them fitted
    on), and the planted slowdowns of --slowed against their machine's --test runs."""
    from xfbench.report import noise

    fit = {k: load_runs(v) for k, v in parse_groups(args.fit).items()}
    samples: dict = {}
    for runs in fit.values():
        for key, values in log_ratios(runs).items():
            samples.setdefault(key, []).extend(values)
    models = noise.fit_all(samples)
    print(f"== fitted on {', '.join(f'{k} ({len(v)} runs)' for k, v in fit.items())}")
    for key, m in sorted(models.items()):
        print(f"  {key:28s} scale {m.scale:.4f}  df {m.df:5.1f}  ({m.pairs} log ratios)")
    for name, paths in parse_groups(args.test).items():
        runs = load_runs(paths)
        print(f"== tested on {name} ({len(runs)} runs)")
        for side, rate in false_alarms(runs, models).items():
            print(f"  false alarms, {side}: {rate}")
        for where, found in detection(runs, models, "torch").items():
            print(f"  detection, scaled torch {where}: (regression, cannot tell, cells) {found}")
        if len(runs) >= 6:
            found = single_cells(runs, models)
            print(f"  detection, one cell +20 % at a time, 3 a side: (regression, tries) {found}")
        for spec, slowed_paths in parse_groups(args.slowed).items():
            machine, framework, share = spec.split(":")
            if machine != name:
                continue
            slowed = load_runs(slowed_paths)
            n = len(slowed)
            found = caught(runs[:n], slowed, framework, models)
            print(f"  detection, real {framework} +{float(share):.0%}, {n} a side: {found}")
    if args.write:
        source = {k: [str(p) for p in v] for k, v in parse_groups(args.fit).items()}
        noise.write(models, {"runs": source, "by": "benchmarks/verdicts.py rates --write"},
                    args.write)  # fmt: skip
        print(f"wrote {args.write}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--runs", type=int, default=6)
    m.add_argument("--slowdown")
    m.add_argument("--sweep", action="append", default=[],
                   help="xfbench run's options for one run (repeatable; default: the 36-cell sweep)")  # fmt: skip
    r = sub.add_parser("rates")
    r.add_argument("--fit", action="append", default=[], help="NAME=RUN,RUN,...: fitted on")
    r.add_argument("--test", action="append", default=[], help="NAME=RUN,...: tested on")
    r.add_argument("--slowed", action="append", default=[], help="NAME:FRAMEWORK:SHARE=RUN,...")
    st = sub.add_parser("sittings")
    st.add_argument("--history", action="append", default=[], help="NAME=RUN,...: --noise")
    st.add_argument("--test", action="append", default=[], help="NAME=RUN,...: other sittings")
    sg = sub.add_parser("stages")
    sg.add_argument("--history", action="append", default=[], help="NAME=RUN,...: --noise")
    sg.add_argument("--test", action="append", default=[], help="NAME=RUN,...: other sittings")
    sg.add_argument("--detect", type=float, default=0.2, help="compare --detect (default 0.2)")
    sg.add_argument("--factor", type=float, action="append", default=[],
                    help="one cell slowed this many times (default 1.2)")  # fmt: skip
    r.add_argument(
        "--write",
        type=Path,
        help="keep the fitted models in this noise file "
        "(the package's prior is xfbench/report/data/noise.json)",
    )
    args = p.parse_args()
    if args.what == "make":
        make(args.out, args.runs, args.slowdown, tuple(args.sweep) or SWEEP)
    elif args.what == "sittings":
        sittings(args)
    elif args.what == "stages":
        args.factor = args.factor or [1.2]
        stages(args)
    else:
        rates(args)


if __name__ == "__main__":
    main()
