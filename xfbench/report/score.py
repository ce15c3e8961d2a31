"""`xfbench score RESULTS`: two numbers for a machine against a reference result set, each
with its 95 % interval.

- The **machine score** compares each machine at its best. A workload is (task, network,
  framework, precision class: fp32, or mixed for bf16/fp16/tf32; the serving suite's
  Offline throughput is the task "serve-offline", xfbench/serving/report.py); each run's best
  configuration of it is its lowest seconds per sample over thread counts, devices, modes,
  batch sizes and copies (`xfbench run --copies`), and the workload's ratio is the
  reference's best over this run's. The framework stays in the workload: a machine is
  credited for its hardware, not for running a framework the reference did not.
- The **per-core score** compares equal columns only: the same cell (network, framework,
  mode, precision, batch) at the same thread count or on the same device, one process. On
  two CPUs with equal thread counts it compares the speed of that many cores.

Either is a weighted geometric mean of the ratios (above 1: faster than the reference).
Each network weighs the same however many workloads it has (their log ratios are averaged
first). The interval is a bootstrap over the timed rounds both runs recorded: each
resample draws every cell's rounds again with replacement (each copy's, for a multi-copy
cell), takes their medians, picks each workload's best again and recomputes the score;
the 2.5th and 97.5th percentiles of BOOTSTRAP resamples bound it. It covers the noise
within each run, not a difference between runs that no round saw (another boot, another
placement in memory): docs/reports.md gives the run-to-run spread measured on one machine.

The reference is a runner folder checked in under REFERENCES (the one sharing the most
workloads with RESULTS, unless --reference names one). Failed cells of RESULTS are
counted and named: a machine that fails cells must not score well by leaving them out.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xfbench import command_line
from xfbench.report.load import same_cell

# Inside the package, so an installed wheel has them too (package data).
REFERENCES = Path(__file__).resolve().parent / "references"
WEIGHTS = "each network equal (its workloads' log ratios averaged first)"
LEVEL = 0.95
BOOTSTRAP = 2000
SEED = 0  # the same resamples every time: the same RESULTS give the same interval
METHOD = f"bootstrap over each cell's timed rounds ({BOOTSTRAP} resamples, basic interval)"
PRECISION_CLASS = {"fp32": "fp32", "tf32": "mixed", "bf16": "mixed", "fp16": "mixed"}
WIDEST = 3  # workloads named as widening the interval most
MIN_OVERLAP = 0.8  # of a multi-copy cell's timed windows, to be scored
# Rounds below which no interval of a cell's median reaches 95 % (harness.stats)
ENOUGH_ROUNDS = 6


@dataclass(kw_only=True)
class Winner:
    """One workload of a score: each run's best configuration and the ratio."""

    workload: str  # "ResNet-50 train, PyTorch, fp32"
    network: str
    here: str  # the winning configuration in RESULTS ("torch compile, 2 threads")
    there: str  # and in the reference
    ratio: float  # the reference's seconds per sample over RESULTS'
    variance_share: float = 0.0  # of the log score's bootstrap variance
    accelerator_here: bool = False
    accelerator_there: bool = False


@dataclass(kw_only=True)
class Score:
    kind: str  # "machine" or "per-core"
    value: float | None  # None when no workload is shared
    low: float | None = None
    high: float | None = None
    workloads: int = 0  # compared
    networks: int = 0
    winners: list[Winner] = field(default_factory=list)
    widest: list[Winner] = field(default_factory=list)
    min_rounds: int = 0  # the fewest timed rounds of any cell behind the score
    unrounded: int = 0  # cells behind the score whose rounds were not recorded

    @property
    def within_noise(self) -> bool:
        return self.low is not None and self.low <= 1 <= self.high

    @property
    def differ_in_kind(self) -> bool:
        """Every winner of RESULTS on an accelerator and of the reference on the CPU, or
        the other way round."""
        here = {w.accelerator_here for w in self.winners}
        there = {w.accelerator_there for w in self.winners}
        return len(here) == 1 and len(there) == 1 and here != there


@dataclass(kw_only=True)
class Scores:
    machine: Score
    per_core: Score
    failed: int  # of RESULTS' cells
    total: int
    failed_names: list[str]
    reference: str
    apart: list[str] = field(default_factory=list)  # multi-copy cells left out: not together
    energy: float | None = None  # per-core mean of samples per kJ, where both measured it
    energy_cells: int = 0

    @property
    def cells(self) -> int:
        """How much RESULTS shares with the reference: to choose among references."""
        return self.machine.workloads


# -- what a cell is worth: seconds per sample, from each copy's rounds ------------------


@dataclass(kw_only=True)
class Candidate:
    result: object  # report.load.Result
    rounds: list[list[float]]  # each copy's timed rounds (one list for one process)
    batch: int

    def seconds_per_sample(self, medians: list) -> np.ndarray | float:
        """1 / the copies' aggregate samples per second, from each copy's median."""
        return 1.0 / sum(self.batch / m for m in medians)

    @property
    def value(self) -> float:
        return float(self.seconds_per_sample([float(np.median(r)) for r in self.rounds]))

    def resampled(self, rng: np.random.Generator, n: int) -> np.ndarray:
        medians = []
        for rounds in self.rounds:
            data = np.asarray(rounds, dtype=float)
            draws = rng.integers(0, len(data), size=(n, len(data)))
            medians.append(np.median(data[draws], axis=1))
        return self.seconds_per_sample(medians)


def together(r) -> bool:
    """Whether a multi-copy cell's copies were timed at once (one process: True). Copies
    that did not meet, or whose timed rounds overlapped less than MIN_OVERLAP, add up
    medians measured on a half-idle machine: never scored."""
    if r.copies == 1:
        return True
    overlap = r.info.get("copies_overlap")
    return r.info.get("copies_together") is True and (
        isinstance(overlap, int | float) and overlap >= MIN_OVERLAP
    )


def candidate(r) -> Candidate | None:
    if not r.ok or r.median <= 0 or r.batch_size <= 0 or not together(r):
        return None
    rounds = r.copy_rounds or [r.rounds or [r.median]]
    return Candidate(result=r, rounds=rounds, batch=r.batch_size)


def configuration(r) -> str:
    """How a cell ran, in words: framework, mode, precision, where, copies, batch."""
    from xfbench.frameworks import display

    where = r.device_name if r.accelerator else f"{r.threads} thread{'s' * (r.threads != 1)}"
    if r.copies > 1:
        where = f"{r.copies} copies x {where}"
    return f"{display(r.framework)} {r.mode} {r.precision}, {where}, batch {r.batch_size}"


def workload_key(r) -> tuple | None:
    """The machine score's workload of a cell (None: not scored)."""
    cls = PRECISION_CLASS.get(r.precision)
    if cls is None:
        return None
    # A transformer's sequence length is part of what is compared: a 1024-token sample is
    # not a 128-token one (accelerators and CPUs run different lengths by default).
    scale = r.scale + (f", {r.tokens} tokens" if r.tokens else "")
    return (r.task, r.network, scale, r.data, r.framework, cls)


def cell_key(r) -> tuple | None:
    """The per-core score's cell, of any suite's scored result: (what ran, how, where), in
    one process; where is ("cpu", threads) or ("acc", device name)."""
    if r.copies > 1:
        return None
    where = ("acc", r.device_name) if r.accelerator else ("cpu", r.threads)
    return (
        (r.task, r.network, r.batch_size, r.scale),
        (r.framework, r.mode, r.precision, r.data),
        where,
    )


def workload_name(key: tuple, kind: str) -> str:
    """A workload or cell key in words."""
    from xfbench.frameworks import display

    if kind == "machine":
        task, network, scale, data, framework, cls = key
        extra = "".join(f", {x}" for x in (scale, data) if x not in ("full", "resident"))
        return f"{network} {task}, {display(framework)}, {cls}{extra}"
    (task, network, batch, _), (framework, mode, precision, _), (kind_, where) = key
    where = f"{where} threads" if kind_ == "cpu" else where
    return f"{network} {task}, {display(framework)} {mode} {precision}, {where}"


def scored_results(run) -> list:
    """Every result of a run the scores count, timed or failed, as each suite scores its
    records (report/suites.py, Hooks.scored: train and infer cells, Offline serving, token
    generation), each a workload of its own."""
    from xfbench.report import suites

    return [r for suite in suites.declared() if suite.hooks.scored for r in suite.hooks.scored(run)]


def _winner(workload: str, a: Candidate, b: Candidate) -> Winner:
    """A workload's best configuration here (a) and in the reference (b)."""
    return Winner(
        workload=workload,
        network=a.result.network,
        here=configuration(a.result),
        there=configuration(b.result),
        ratio=b.value / a.value,
        accelerator_here=a.result.accelerator,
        accelerator_there=b.result.accelerator,
    )


def _bootstrap_interval(weights, logs, draws, winners: list[Winner]) -> tuple[float, ...]:
    """The score and its interval from the workloads' log ratios (logs: (workloads,)) and
    their resamples (draws: (workloads, B)); each winner's share of the variance set."""
    log_value = float(weights @ logs)
    value = math.exp(log_value)
    # The basic (reflected) bootstrap interval, in logs: each resample re-picks the best
    # configuration, and a minimum of noisy medians sits below the one observed as the
    # observed sits below the truth; reflecting about the estimate undoes that shift.
    tail = (1 - LEVEL) / 2 * 100
    q_low, q_high = np.percentile(weights @ draws, [tail, 100 - tail])
    low, high = math.exp(2 * log_value - q_high), math.exp(2 * log_value - q_low)
    # what widens it: each workload's share of the log score's variance (its own
    # variance, weighted; the workloads' rounds are drawn independently)
    parts = weights**2 * draws.var(axis=1)
    total = parts.sum()
    for w, p in zip(winners, parts, strict=True):
        w.variance_share = float(p / total) if total > 0 else 0.0
    return value, low, high


def _best(run, key_fn: Callable) -> dict[tuple, list[Candidate]]:
    """Each key's candidates; the same cell measured in several runs of a pooled reference
    is one candidate of all their rounds (the best of three runs would flatter it)."""
    cells: dict[tuple, dict[tuple, Candidate]] = {}
    for r in scored_results(run):
        k, c = key_fn(r), candidate(r)
        if k is None or c is None:
            continue
        same = cells.setdefault(k, {})
        kept = same.get(same_cell(r))
        if kept is not None and len(kept.rounds) == len(c.rounds):
            kept.rounds = [a + b for a, b in zip(kept.rounds, c.rounds, strict=True)]
        else:  # its first run, or copies that differ: a configuration of its own
            same[same_cell(r) + (len(same),) * (kept is not None)] = c
    return {k: list(v.values()) for k, v in cells.items()}


def compare(results, reference, kind: str) -> Score:
    """One score of RESULTS against the reference (report.load Runs)."""
    key_fn = workload_key if kind == "machine" else cell_key
    mine, ref = _best(results, key_fn), _best(reference, key_fn)
    shared = sorted(k for k in mine if k in ref)
    if not shared:
        return Score(kind=kind, value=None)
    rng = np.random.default_rng(SEED)
    by_network: dict[str, list[int]] = {}
    logs, draws, winners = [], [], []
    for i, k in enumerate(shared):
        a, b = min(mine[k], key=lambda c: c.value), min(ref[k], key=lambda c: c.value)
        logs.append(math.log(b.value / a.value))
        # each resample picks the best again: the winner is part of what is uncertain
        best_a = np.min([c.resampled(rng, BOOTSTRAP) for c in mine[k]], axis=0)
        best_b = np.min([c.resampled(rng, BOOTSTRAP) for c in ref[k]], axis=0)
        draws.append(np.log(best_b / best_a))
        by_network.setdefault(a.result.network, []).append(i)
        winners.append(_winner(workload_name(k, kind), a, b))
    # weights: each network 1/networks, shared equally among its workloads
    weights = np.zeros(len(shared))
    for idx in by_network.values():
        weights[idx] = 1.0 / len(by_network) / len(idx)
    value, low, high = _bootstrap_interval(weights, np.asarray(logs), np.asarray(draws), winners)
    behind = [c for k in shared for c in mine[k] + ref[k]]
    rounds = [len(r) for c in behind if c.result.rounds or c.result.copy_rounds for r in c.rounds]
    unrounded = sum(1 for c in behind if not (c.result.rounds or c.result.copy_rounds))
    none = unrounded == len(behind)  # no round anywhere: no interval, rather than a point
    return Score(
        kind=kind,
        value=value,
        low=None if none else low,
        high=None if none else high,
        unrounded=unrounded,
        workloads=len(shared),
        networks=len(by_network),
        winners=winners,
        widest=sorted(winners, key=lambda w: -w.variance_share)[:WIDEST],
        min_rounds=min(rounds, default=0),
    )


def score(results, reference) -> Scores:
    """results and reference: report.load Runs."""
    cells = scored_results(results)
    failed = [r for r in cells if not r.ok]
    # samples per kJ, measured in both runs (never a typed wattage), cell by cell
    mine, ref = _best(results, cell_key), _best(reference, cell_key)
    by_network_energy: dict[str, list[float]] = {}
    for k, cs in mine.items():
        a = cs[0].result.info.get("samples_per_kj")
        b = ref[k][0].result.info.get("samples_per_kj") if k in ref else None
        if isinstance(a, int | float) and isinstance(b, int | float) and a > 0 and b > 0:
            by_network_energy.setdefault(k[0][1], []).append(math.log(a / b))
    means = [sum(v) / len(v) for v in by_network_energy.values()]
    return Scores(
        machine=compare(results, reference, "machine"),
        per_core=compare(results, reference, "per-core"),
        failed=len(failed),
        total=len(cells),
        failed_names=[f"{r.network} {r.task} {r.framework} ({r.status})" for r in failed],
        reference=reference.name,
        apart=[
            configuration(r) + f" ({r.network} {r.task})" for r in cells if r.ok and not together(r)
        ],
        energy=math.exp(sum(means) / len(means)) if means else None,
        energy_cells=sum(len(v) for v in by_network_energy.values()),
    )


def references() -> list[Path]:
    return sorted(p for p in REFERENCES.iterdir() if p.is_dir()) if REFERENCES.is_dir() else []


def load_run(path):
    from xfbench.report.load import load

    return load(path)


def load_reference(path):
    """A reference as one Run: a folder of several runs (or a database) pooled."""
    from xfbench.report.load import LoadError, load_many, pooled

    runs = load_many(path)
    machines = sorted({run.machine["label"] for run in runs})
    if len(machines) > 1:  # rounds of two machines pooled would describe neither
        raise LoadError(
            f"{path}: a reference is one machine's runs; it holds {', '.join(machines)}"
        )
    return runs[0] if len(runs) == 1 else pooled(runs, Path(path).name, str(path))


def device_kind(run) -> str:
    """`cpu`, or the model of the accelerators its measured cells ran on (as the framework
    names it: NVIDIA H100 80GB HBM3), read from every kind of record the scores count."""
    names = sorted({r.device_name for r in scored_results(run) if r.ok and r.accelerator})
    return " + ".join(names) if names else "cpu"


def of_its_kind(run, refs: list) -> list:
    """The references a run may be scored against unasked: those of its own device kind,
    for an accelerator its model. A GPU run is never scored against a CPU reference by
    default, nor a CPU run against a GPU's, nor an H200 against an H100's; `xfbench score
    --reference` still compares any two, and says when they differ in kind."""
    kind = device_kind(run)
    return [ref for ref in refs if device_kind(ref) == kind]


def no_reference_text(run) -> str:
    """Why a run has no reference unasked: none checked in is of its kind."""
    kinds = {}
    for path in references():
        kinds.setdefault(device_kind(load_reference(path)), []).append(path.name)
    known = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(kinds.items()))
    kind = device_kind(run)
    what = "CPU" if kind == "cpu" else f"the model of its accelerator ({kind})"
    return (
        f"no checked-in reference was measured on {what} (checked in: {known}); give "
        "--reference to compare across kinds"
    )


def best_reference(run, candidates=None) -> Scores | None:
    """The score against the reference sharing the most workloads (None: none shares).
    Without candidates, the checked-in references of the run's device kind."""
    refs = (
        [load_reference(c) for c in candidates]
        if candidates
        else of_its_kind(run, [load_reference(c) for c in references()])
    )
    scores = [score(run, ref) for ref in refs]
    # the most workloads shared, then the most equal columns (a table7 run: the reference
    # measured at its thread counts)
    best = max(scores, key=lambda s: (s.cells, s.per_core.workloads), default=None)
    return best if best is not None and best.machine.value is not None else None


def _folder(path: str) -> Path:
    p = Path(path).resolve()
    return p.parent if p.name == "merged.json" else p


def machine_scores(report) -> list[tuple]:
    """(machine, Scores or None) for each machine of a report (report.model.Report), each
    against the checked-in reference sharing the most workloads with it."""
    from xfbench.report.load import Run

    refs = [load_reference(p) for p in references()]
    out = []
    for m in report.machines:
        run = Run(
            name=m.short,
            path="",
            machine={},
            records={k: list(v) for k, v in m.records.items()},
        )
        # a reference is not scored on itself (given as its folder or its merged.json)
        own = {_folder(x.path) for x in m.runs}
        scores = [
            score(run, ref)
            for ref in of_its_kind(run, refs)
            if not any(_folder(ref.path) in (o, *o.parents) for o in own)
        ]
        best = max(scores, key=lambda s: (s.cells, s.per_core.workloads), default=None)
        out.append((m, best if best is not None and best.machine.value is not None else None))
    return out


def value_text(s: Score) -> str:
    """ "4.02 (95 % CI of its rounds 3.81-4.25)", and ", within its rounds' noise" when the
    interval holds 1."""
    if s.low is None:
        return f"{s.value:.3g} (no interval: the runs recorded no rounds)"
    # "of its rounds": this interval holds one run's rounds' noise, and measured it held
    # the score of ten runs pooled in 5 of 10 runs (docs/reports.md): not the machine's CI
    text = f"{s.value:.3g} ({LEVEL * 100:.0f} % CI of its rounds {s.low:.3g}-{s.high:.3g})"
    return text + (", within its rounds' noise" if s.within_noise else "")


def interval_note(s: Score) -> str:
    """What the interval rests on, and what it leaves out."""
    note = f"interval: {METHOD}"
    if s.unrounded:
        note += f"; {s.unrounded} cells recorded no rounds and count as certain"
    if 0 < s.min_rounds < ENOUGH_ROUNDS:
        note += (
            f"; some cells have only {s.min_rounds} rounds (below {ENOUGH_ROUNDS}, even a "
            "cell's range covers its median less than 95 % of the time), too few for the "
            "interval to say much: --preset reference times 6 (every workload), procurement "
            "10 (training)"
        )
    return note + (
        "; what changes between runs (the host, its clocks, its other tenants) is not in "
        "it: score two runs of a machine against each other first (docs/reports.md)"
    )


def describe(s: Scores, price: dict | None = None) -> str:
    """The scores with their intervals and method, the winning configurations, the
    failures, the energy score and the score per $1,000 of a price from a prices file."""
    m, c = s.machine, s.per_core
    lines = [
        f"machine score {value_text(m)} against {s.reference} (above 1: faster): each "
        f"machine at its best on {m.workloads} workloads of {m.networks} networks (network, "
        f"task, framework, precision class), the geometric mean of the reference's seconds "
        f"per sample over these, weights: {WEIGHTS}; {s.failed} of {s.total} cells of "
        "RESULTS failed" + (f" ({', '.join(s.failed_names[:5])})" if s.failed_names else "")
    ]
    if s.apart:
        lines.append(
            f"  left out: {len(s.apart)} multi-copy cells whose copies were not timed "
            f"together (copies_together, copies_overlap below {MIN_OVERLAP:.0%}): "
            + "; ".join(s.apart[:3])
        )
    if m.differ_in_kind:
        here = "accelerators" if m.winners[0].accelerator_here else "CPUs"
        there = "accelerators" if m.winners[0].accelerator_there else "CPUs"
        lines.append(
            f"  the two differ in kind: this machine is at its best on {here}, the "
            f"reference on {there}"
        )
    if c.value is not None:
        lines.append(
            f"per-core score {value_text(c)}: the same cells at the same thread count or "
            f"device, one process, {c.workloads} cells of {c.networks} networks"
        )
    else:
        lines.append("per-core score: none (no cell at the same thread count or device)")
    lines.append(f"{interval_note(m)}")
    if m.widest and len(m.winners) > 1:
        lines.append(
            "widest: "
            + "; ".join(
                f"{w.workload} ({w.variance_share:.0%} of the interval's variance)"
                for w in m.widest
            )
        )
    return "\n".join(lines + _energy_and_price(s, price))


def _energy_and_price(s: Scores, price: dict | None) -> list[str]:
    """The energy score's line, and the machine score per $1,000 where a price is given."""
    if s.energy is not None:
        lines = [
            f"energy score {s.energy:.3g} (above 1: more samples per kJ): the same mean of "
            f"samples per kJ over the reference's, {s.energy_cells} cells measured in both"
        ]
    else:
        lines = ["energy score: none (energy was not measured in both runs)"]
    if price and price.get("price_usd"):
        lines.append(
            f"machine score per $1,000: {s.machine.value / price['price_usd'] * 1000:.3g} (price "
            f"${price['price_usd']:,.0f}, {price.get('price_date')}, {price.get('price_source')})"
        )
    return lines


def winners_table(s: Score) -> str:
    """The machine score's workloads: each run's best configuration and the ratio."""
    from tabulate import tabulate

    rows = [[w.workload, w.here, w.there, f"{w.ratio:.3g}"] for w in s.winners]
    return tabulate(
        rows, headers=["workload", "best here", "best in the reference", "ratio"], tablefmt="github"
    )


def over_runs_text(group: list, scores: list[Scores]) -> str:
    """Several runs of one machine: each run's scores, then their geometric means with the
    t-interval over runs (report/runs.py)."""
    from xfbench.report.runs import METHOD, over_runs

    lines = [
        f"{group[0].machine['label']}: {len(group)} runs against {scores[0].reference}",
        *(
            f"  {run.name}: machine score {value_text(s.machine)}, per-core score "
            + (value_text(s.per_core) if s.per_core.value else "none")
            for run, s in zip(group, scores, strict=True)
        ),
    ]
    for kind, label in (("machine", "machine score"), ("per_core", "per-core score")):
        values = [getattr(s, kind).value for s in scores if getattr(s, kind).value]
        if len(values) == len(scores):
            o = over_runs(values)
            lines.append(f"{label} over the runs: {o.text()}; the runs span {o.spread:.1%}")
    lines.append(
        f"interval over runs: {METHOD}, on each run's score (it holds what changes between "
        "runs; each run's own interval, above, holds only its rounds' noise)"
    )
    return "\n".join(lines)


def _grouped(paths: list[str]) -> list[list]:
    """The runs of RESULTS grouped by machine (its label), in the order given."""
    from xfbench.report.load import load_many

    groups: dict[str, list] = {}
    for run in (run for path in paths for run in load_many(path)):
        groups.setdefault(run.machine["label"], []).append(run)
    return list(groups.values())


def _parser():
    p = command_line.ArgumentParser(
        prog="xfbench score",
        description="RESULTS against a reference result set: the machine score (each "
        "workload at each machine's best) and the per-core score (equal columns), each "
        "with its 95 % interval.",
    )
    p.add_argument(
        "results",
        nargs="+",
        type=command_line.RUN,
        help="runner folders or pytest-benchmark JSON files; several runs of one machine "
        "are scored together, with an interval over runs",
    )
    p.add_argument(
        "--reference",
        type=command_line.RUN,
        help="a reference runner folder (default: the one checked in with xfbench, of "
        "RESULTS' device kind, CPU or accelerator, that shares the most workloads with it)",
    )
    p.add_argument(
        "--prices",
        type=command_line.FILE,
        help="a prices file (as xfbench report --prices) giving RESULTS' machine a "
        "purchase price: adds the score per $1,000",
    )
    p.add_argument(
        "--winners", action="store_true", help="list every workload's best configurations"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    from xfbench.report.load import LoadError

    args = command_line.parse_command_line(_parser(), argv)
    if isinstance(args, int):
        return args
    try:
        groups = _grouped(args.results)
        candidates = [Path(args.reference)] if args.reference else references()
        if not candidates:
            print(
                f"xfbench score: no reference: give --reference, or check one in under {REFERENCES}",
                file=sys.stderr,
            )
            return 2
        outcome = [
            _score_group(group, [Path(args.reference)] if args.reference else None)
            for group in groups
        ]
    except LoadError as e:
        print(f"xfbench score: {e}", file=sys.stderr)
        return 1
    if len(groups) > 1 or len(groups[0]) > 1:
        return _print_groups(groups, outcome, candidates, args)
    run, best = groups[0][0], outcome[0][0]
    if best is None:
        if args.reference:
            said = f"shares no workload with {Path(args.reference).name}"
        elif of_its_kind(run, [load_reference(c) for c in candidates]):
            said = f"shares no workload with a reference of its kind ({device_kind(run)})"
        else:
            said = no_reference_text(run)
        print(f"xfbench score: {' '.join(args.results)}: {said}", file=sys.stderr)
        return 1
    price = _price(args.prices, run) if args.prices else None
    if isinstance(price, str):
        print(f"xfbench score: {price}", file=sys.stderr)
        return 1
    print(describe(best, price))
    if args.winners:
        print()
        print(winners_table(best.machine))
    return 0


def _price(path: str, run) -> dict | str:
    """The run's machine's entry in the prices file, or why there is none (one line)."""
    from xfbench.report.model import build
    from xfbench.report.procurement import PricesError, load_prices

    try:
        [machine] = build([run], prices=load_prices(path)).machines
    except PricesError as e:
        return str(e)
    return machine.prices or f"{path} has no entry for {machine.label}"


def _score_group(group: list, candidates) -> list[Scores | None]:
    """Each run of one machine against one reference: the one sharing the most workloads
    with the group's first run."""
    first = best_reference(group[0], candidates)
    if first is None:
        return [None] * len(group)
    refs = [load_reference(c) for c in candidates or references()]
    ref = next(r for r in refs if r.name == first.reference)
    return [first] + [score(run, ref) for run in group[1:]]


def _print_groups(groups: list, outcome: list, candidates, args) -> int:
    """Several RESULTS: each machine's runs, scored together."""
    if args.prices or args.winners:
        print("xfbench score: --prices and --winners take one run", file=sys.stderr)
        return 2
    status = 0
    for group, scores in zip(groups, outcome, strict=True):
        if scores[0] is None:
            names = ", ".join(Path(c).name for c in candidates)
            print(
                f"xfbench score: {group[0].name} shares no workload with a reference: {names}",
                file=sys.stderr,
            )
            status = 1
            continue
        if len(group) == 1:
            print(f"{group[0].machine['label']} ({group[0].name}):")
            print(describe(scores[0]))
        else:
            print(over_runs_text(group, scores))
        print()
    return status
