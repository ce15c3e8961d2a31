"""`xfbench compare BASE NEW`: each cell of two runs, or two sets of runs, as a ratio of
times with its interval and a verdict that interval says; a summary line with each cell's
chance of catching a regression; an exit code that means one thing each: 0 no regression
that may reach past --fail-above, 1 such a regression or a cell measured in BASE that failed
in NEW (in every NEW run, or in some where no BASE run failed it) or is missing in NEW, 3 a cell that cannot tell (--cannot-tell-ok: 0), 2 bad
input (one line).

BASE and NEW are each a runner folder or pytest-benchmark JSON file, or several joined by
commas (the runs of one side; one run given twice is refused). A cell is the per-core
score's (network, task, framework, mode, precision, batch, and its thread count or device;
report/score.py), one process: training and inference cells, Offline serving (seconds per
batch) and generation (seconds per generation). Its time on a side is the geometric mean of
that side's runs' medians, and the ratio is NEW's over BASE's (above 1: slower).

How a cell is judged: its statistic is the difference of the two sides' mean log medians
over its standard error; the variance behind that error comes from, in this order, the
machine's own history (--noise FILE, kept by `xfbench noise` from its runs) pooled with the
runs in front and moderated across the cell's kind; the runs in front alone (Welch, or
moderated); else, for a CPU cell, the prior shipped with the package (report/noise.py: other
machines' runs), said as such. A GPU cell with one run a side and no history is not judged.
Every cell compared is one family, one-sided each way: the critical values (report/family.py)
come from A/A splits of the history where it holds ten runs or more, else from each cell's t
at Sidak's level (the runs in front's t held within t(3) to t(5), a prior model's its own).
The interval printed is the family's:
its low end the one-sided bound a regression is called by, its high end the bound an
improvement or "within noise" is. Slower where the low end is above 1; faster where the high
end is below 1; within noise where the high end is below 1 + --fail-above; else cannot tell.
The stage's level (4 % a false regression at all, where nothing changed; a second stage of
fresh alternated runs of the cells it cannot tell, --stage 2, 1 %) says how often.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from xfbench import command_line
from xfbench.report import family, noise
from xfbench.report import runs as over

VERDICTS = (
    "regression",
    "failed in NEW",
    "missing in NEW",
    "improvement",
    "cannot tell",
    "within noise",
    "new in NEW",
)
FAILING = ("failed in NEW", "missing in NEW")  # counted as failures: exit 1
DEFAULT_FAIL_ABOVE = 0.05


@dataclass
class Verdict:
    cell: str
    network: str
    task: str
    base_s: float | None  # geometric mean over BASE's runs, seconds (per batch, or generation)
    new_s: float | None
    ratio: float | None  # new_s / base_s
    low: float | None  # the ratio's interval, the family's: each end a one-sided bound
    high: float | None
    p: float | None  # one-sided, of "not slower", the cell alone (not the family's)
    verdict: str
    how: str  # what the interval rests on
    base_runs: int
    new_runs: int
    runs_needed: int | None = None  # second stage's pairs to catch --detect with 80 % power
    df: float | None = None  # of its t, where judged
    se: float | None = None  # of its log ratio, where judged
    critical: float | None = None  # the family's, its statistic's to be called slower
    power: float | None = None  # the chance a cell slowed by --fail-above is called slower
    new_failed: int = 0  # NEW runs it failed in, where no BASE run failed it
    select: dict = field(default_factory=dict)  # its record's cell: a second stage runs it


@dataclass
class Cell:
    network: str
    task: str
    medians: list[float]  # one per run that measured it
    rounds: list[list[float]]  # each run's timed rounds (may be empty)
    accelerator: bool = False  # a GPU's or TPU's: never judged by the CPU prior
    failed: str = ""  # its failure's status where no run of the side measured it
    failed_runs: int = 0  # runs of the side in which it failed
    select: dict = field(default_factory=dict)  # what a run is told to measure it again


def _cells(run) -> dict[str, Cell]:
    """A run's cells by name: every result the scores count (report/score.py), one process;
    a failed one with no medians and its status."""
    from xfbench.report.score import cell_key, scored_results, workload_name

    out: dict[str, Cell] = {}
    for r in scored_results(run):
        key = cell_key(r)
        if key is None:
            continue
        lengths = r.scale.replace("full", "").strip(", ")  # a generation's: 128/128 tokens
        name = f"{workload_name(key, 'per-core')}{', ' + lengths if lengths else ''}"
        name += f", batch {r.batch_size}"
        median = r.median if r.ok else None
        if r.ok and not (median is not None and math.isfinite(median) and median > 0):
            # a record with e2e or rate 0: no time to take the log of, so no verdict on it
            median, status = None, f"not a time (median {r.median})"
        else:
            status = r.status
        select = {k: getattr(r, k, None) for k in SELECT}
        if median is None:
            out.setdefault(name, Cell(r.network, r.task, [], [], accelerator=r.accelerator,
                                      failed=status, failed_runs=1, select=select))  # fmt: skip
        elif not out.get(name, Cell("", "", [], [])).medians or median < out[name].medians[0]:
            out[name] = Cell(r.network, r.task, [median], [r.rounds], accelerator=r.accelerator,
                             select=select)  # fmt: skip
    return out


# a cell's record fields that select it again (benchmarks/alternate.py --only-undecided):
# `device` as --device takes it (cpu, cuda:0), `device_name` the model it names
SELECT = ("network", "task", "framework", "mode", "precision", "batch_size", "threads",
          "device", "device_name", "scale")  # fmt: skip


def side(runs_cells: list[dict[str, Cell]]) -> dict[str, Cell]:
    """Every cell of a side's runs (each run's cells, _cells), medians and rounds gathered;
    a cell no run of the side measured keeps its failure."""
    out: dict[str, Cell] = {}
    for cells in runs_cells:
        for name, c in cells.items():
            if name in out:
                have = out[name]
                out[name] = Cell(c.network, c.task, have.medians + c.medians, have.rounds + c.rounds,
                                 accelerator=c.accelerator, failed=have.failed or c.failed,
                                 failed_runs=have.failed_runs + c.failed_runs,
                                 select=have.select or c.select)  # fmt: skip
            else:
                out[name] = c
    return {name: c if not c.medians else replace(c, failed="") for name, c in out.items()}


def _geo(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class Noises:
    """Where a cell's noise may come from: the machine's history (--noise), the prior."""

    prior: dict  # the package's (report/noise.py): other machines' runs
    history: dict | None = None  # this machine's kinds, fitted by `xfbench noise`
    history_name: str = ""
    # this machine's cells: name -> (variance of the log median between its runs, dof)
    history_cells: dict = field(default_factory=dict)
    runs: family.History | None = None  # its runs' cells, for the A/A critical values

    def calibrates(self, name: str) -> bool:
        """Whether the history holds enough runs of the cell to take its critical value from
        A/A splits (family.HISTORY_RUNS)."""
        return self.runs is not None and self.runs.measured(name) >= family.HISTORY_RUNS

    def model(self, cell: Cell):
        """(model, what it is) for a cell measured once a side: the history's, else the
        prior's for a CPU cell, else None (a GPU cell: the prior is CPU VMs')."""
        if self.history is not None:
            return noise.model_for(self.history, cell.task, cell.network), (
                f"this machine's history ({self.history_name})"
            )
        if cell.accelerator:
            return None, ""
        return noise.model_for(self.prior, cell.task, cell.network), "the prior"


def _log_var(values: list[float]) -> float:
    logs = [math.log(x) for x in values]
    m = sum(logs) / len(logs)
    return sum((x - m) ** 2 for x in logs) / (len(logs) - 1)


def welch(base: Cell, new: Cell) -> tuple[float, float] | None:
    """(standard error, degrees of freedom) of the difference of mean log medians from the
    cell's own runs: Welch-Satterthwaite where both sides have two or more; one side's
    spread for both (its n - 1 degrees of freedom) where only it has; None with one a side."""
    nb, nn = len(base.medians), len(new.medians)
    if nb < 2 and nn < 2:
        return None
    if nb < 2 or nn < 2:
        many = base if nb >= 2 else new
        var = _log_var(many.medians)
        return math.sqrt(var * (1 / nb + 1 / nn)), len(many.medians) - 1.0
    vb, vn = _log_var(base.medians) / nb, _log_var(new.medians) / nn
    se2 = vb + vn
    if se2 <= 0:
        return 0.0, float(nb + nn - 2)
    df = se2**2 / (vb**2 / (nb - 1) + vn**2 / (nn - 1))
    return math.sqrt(se2), df


def pooled_var(base: Cell, new: Cell) -> tuple[float, int] | None:
    """A cell's between-run variance of log medians, both sides pooled, on its degrees of
    freedom (None with one run a side)."""
    parts = [(len(c.medians) - 1, _log_var(c.medians)) for c in (base, new) if len(c.medians) > 1]
    dof = sum(k for k, _ in parts)
    return (sum(k * v for k, v in parts) / dof, dof) if dof else None


@dataclass(frozen=True)
class Moderation:
    """A kind's cells' spread over the runs in front, as a prior of each cell's own (Smyth
    2004, limma's moderated t): its variance s0 squared on d0 degrees of freedom."""

    s0_2: float
    d0: float
    cells: int


MOST_DF = 1000.0


def _trigamma_inverse(x: float) -> float:
    from scipy.special import polygamma

    if x > 1e7:
        return 1 / math.sqrt(x)
    if x < 1e-6:
        return 1 / x
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        step = tri * (1 - tri / x) / float(polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def moderation(variances: list[tuple[float, int]]) -> Moderation | None:
    """The prior of a kind's cell variances, by the method of moments on their logs (three
    cells or more with a spread; None otherwise)."""
    from scipy.special import digamma, polygamma

    found = [(v, d) for v, d in variances if v > 0]
    if len(found) < 3:
        return None
    e = [math.log(v) - float(digamma(d / 2)) + math.log(d / 2) for v, d in found]
    mean = sum(e) / len(e)
    spread = sum((x - mean) ** 2 for x in e) / (len(e) - 1)
    spread -= sum(float(polygamma(1, d / 2)) for _, d in found) / len(found)
    if spread <= 0:  # the cells agree more than chance allows: one variance for all
        return Moderation(s0_2=math.exp(mean), d0=MOST_DF, cells=len(found))
    d0 = min(2 * _trigamma_inverse(spread), MOST_DF)
    s0_2 = math.exp(mean + float(digamma(d0 / 2)) - math.log(d0 / 2))
    return Moderation(s0_2=s0_2, d0=d0, cells=len(found))


def evidence(name: str, base: Cell, new: Cell, noises: Noises) -> tuple[float, float] | None:
    """A cell's own between-run variance of log medians and its degrees of freedom: its
    history's (--noise) and the runs in front's, pooled; None where neither has a spread."""
    parts = [noises.history_cells[name]] if name in noises.history_cells else []
    front = pooled_var(base, new)
    parts += [front] if front else []
    dof = sum(d for _, d in parts)
    return (sum(v * d for v, d in parts) / dof, dof) if dof else None


def moderations(base: dict, new: dict, noises: Noises) -> dict[str, Moderation]:
    """Each kind's Moderation from the evidence of the cells both sides measured."""
    by_kind: dict[str, list] = {}
    for name in set(base) & set(new):
        if not (base[name].medians and new[name].medians):
            continue
        found = evidence(name, base[name], new[name], noises)
        if found:
            kind = noise.kind_of(base[name].task, base[name].network)[0]
            by_kind.setdefault(kind, []).append(found)
    return {k: m for k, v in by_kind.items() if (m := moderation(v)) is not None}


TAILS_DF = (3.0, 5.0)


def tails(model) -> float:
    """The degrees of freedom of a kind's between-run noise in its tails: its model's, kept
    within TAILS_DF. No heavier than t(3), whose variance is finite with room to spare (a fit
    at its floor of 2 says the tails are heavy, not how heavy); no lighter than t(5), as no
    kind fitted on 40 log ratios or more had above 8.7, and the lighter fits rest on few
    (a VM's runs jump: a kernel chosen one way or another, a neighbour). Without the upper
    bound, one run a side judged by a simulated machine's history of six runs gave a false
    verdict in 6 % of comparisons; with it, 2.8 % (tests/test_compare_calibration.py)."""
    low, high = TAILS_DF
    return high if model is None else min(max(model.df, low), high)


def own_noise(name: str, base: Cell, new: Cell, noises: Noises, *, mod: Moderation | None,
              most: float | None) -> tuple[float, float, str] | None:  # fmt: skip
    """(standard error, degrees of freedom, what) from the cell's own spread, its history's
    and the runs in front's, moderated by its kind's; Welch's on the runs in front where its
    kind has too few cells to moderate by. The degrees of freedom are what the variance
    rests on (the kind's d0 and the cell's own), but no more than `most`, the kind's known
    tails: a cell's runs can jump between two speeds (a kernel chosen one way or another),
    which no spread of two or three runs shows. On held-out runs of a Zen 5 VM, 2 runs a
    side, without that bound 11 of 90 comparisons failed; with it, 1 (tails())."""
    nb, nn = len(base.medians), len(new.medians)
    found = evidence(name, base, new, noises)
    if found is None:
        return None
    sources = " and ".join(
        s for s, here in (("its history", name in noises.history_cells),
                          (f"the runs in front ({nb} and {nn})", pooled_var(base, new) is not None))
        if here
    )  # fmt: skip
    if mod is None:  # its kind too small to moderate by; its tails held as the kind's are
        if name not in noises.history_cells:
            se, df = welch(base, new)
            df = min(df, most)
            return se, df, f"{sources}: Welch, t({df:.1f})"
        var, dof = found
        df = min(dof, most)
        return math.sqrt(var * (1 / nb + 1 / nn)), df, f"{sources}: t({df:.0f})"
    var, dof = found
    var = (mod.d0 * mod.s0_2 + dof * var) / (mod.d0 + dof)
    df = min(mod.d0 + dof, most)
    se = math.sqrt(var * (1 / nb + 1 / nn))
    return se, df, f"{sources}, with its kind's ({mod.cells} cells): t({df:.1f})"


def _unjudged(name: str, base: Cell | None, new: Cell | None, *, verdict: str, how: str) -> Verdict:
    here = new or base
    measured = [c for c in (base, new) if c and c.medians]
    return Verdict(
        cell=name,
        network=here.network,
        task=here.task,
        base_s=_geo(base.medians) if base and base.medians else None,
        new_s=_geo(new.medians) if new and new.medians else None,
        ratio=None,
        low=None,
        high=None,
        p=None,
        verdict=verdict,
        how=how,
        base_runs=len(base.medians) if base else 0,
        new_runs=len(new.medians) if new else 0,
        select=here.select,
    ) if measured else None  # fmt: skip


def noise_of(name: str, base: Cell, new: Cell, noises: Noises, *, mod: Moderation | None = None):
    """(standard error, degrees of freedom, what they rest on) of a cell's log ratio: its
    own spread where known (own_noise), else its kind's model, the history's or, for a CPU
    cell, the prior's; None where none is known (a GPU cell run once a side)."""
    nb, nn = len(base.medians), len(new.medians)
    model, what = noises.model(new)
    # the history's A/A splits carry the real tails: no bound on the degrees of freedom
    most = math.inf if noises.calibrates(name) else tails(model)
    own = own_noise(name, base, new, noises, mod=mod, most=most)
    if own is not None:
        return own
    if model is None:
        return None
    return model.se(nb, nn), model.df, f"{what}: {model.of}, t({model.df:.1f}) x {model.scale:.3f}"


def judge(name: str, base: Cell | None, new: Cell | None, noises: Noises, *,
          mods: dict | None = None) -> Verdict | None:  # fmt: skip
    """One cell's ratio, and the standard error and degrees of freedom of its log ratio;
    its interval and verdict come with the other cells' (decide): they are one family."""
    from scipy.special import stdtr

    if base is None or not base.medians:
        return _unjudged(name, base, new, verdict="new in NEW", how="not measured in BASE")
    if new is None or not new.medians:
        if new is not None and new.failed:
            return _unjudged(name, base, new, verdict="failed in NEW", how=f"{new.failed} in NEW")
        return _unjudged(name, base, new, verdict="missing in NEW", how="measured in BASE only")
    mod = (mods or {}).get(noise.kind_of(new.task, new.network)[0])
    found = noise_of(name, base, new, noises, mod=mod)
    d = math.log(_geo(new.medians) / _geo(base.medians))
    verdict = Verdict(
        cell=name,
        network=new.network,
        task=new.task,
        base_s=_geo(base.medians),
        new_s=_geo(new.medians),
        ratio=math.exp(d),
        low=None,
        high=None,
        p=None,
        verdict="cannot tell",
        how="",
        base_runs=len(base.medians),
        new_runs=len(new.medians),
        select=new.select,
    )
    if new.failed_runs and not base.failed_runs:  # flaky in NEW only: a failure of its own
        verdict.new_failed = new.failed_runs
    if found is None:
        verdict.how = "no noise known: a GPU cell run once a side (run twice, or --noise)"
        return verdict
    se, df, how = found
    if se <= 0:  # runs that agree to the last digit are copies, not a measured spread
        verdict.how = f"{how}: no spread between the runs (the same run given twice?)"
        return verdict
    verdict.se, verdict.df, verdict.how = se, df, how
    verdict.p = float(stdtr(df, -d / se))  # one-sided, of "not slower", this cell alone
    return verdict


STAGE_ALPHA = {1: 0.04, 2: 0.01}  # a false regression at all: 5 % over the two stages
WANTED_POWER = 0.8
MOST_RUNS = 50


def power(scale: float, df_of, n: int, *, alpha: float, effect: float) -> float:
    """The chance a regression of log size `effect` is rejected at two-sided level alpha,
    n runs a side, where one run a side's log ratio is t(df) x scale: the statistic's t
    shifted by the effect over the standard error scale / sqrt(n)."""
    # scipy.stats.t's ppf, sf and cdf are these functions behind a generic layer that
    # costs a thousand times more a scalar call; compare calls them per cell and per runs
    from scipy.special import stdtr, stdtrit

    df = df_of(n)
    se = scale / math.sqrt(n)
    crit = float(stdtrit(df, 1 - alpha / 2))
    shift = effect / se
    return float(stdtr(df, shift - crit) + stdtr(df, -crit - shift))


def runs_for_power(
    scale: float, df_of, *, alpha: float, effect: float, wanted: float
) -> int | None:
    """The fewest runs a side with at least that power (None: more than MOST_RUNS), by
    bisection: the power grows with the runs."""

    def enough(n: int) -> bool:
        return df_of(n) > 0 and power(scale, df_of, n, alpha=alpha, effect=effect) >= wanted

    if not enough(MOST_RUNS):
        return None
    low, high = 0, MOST_RUNS  # enough(high), not enough(low)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


UNKNOWN_NOISE_PAIRS = 4  # a cell with no noise known: enough pairs to measure one (3 dof)


def second_stage_runs(v: Verdict, undecided: int, detect: float, *,
                      history_dof: int) -> int | None:  # fmt: skip
    """Alternated pairs of fresh runs (one BASE, one NEW each) that catch a slowdown of
    `detect` in a cell compare cannot tell with WANTED_POWER: judged in a second stage of
    just the `undecided` cells at STAGE_ALPHA[2] (Sidak's one-sided level among them), on
    its per-run variance as known now and the degrees of freedom that stage has (its pairs'
    less one, and the history's where the cell has one: compare --paired). At `detect` equal
    to --fail-above, as many pairs also show an unchanged cell within noise about as often.
    None: more than MOST_RUNS."""
    if not v.se:
        return UNKNOWN_NOISE_PAIRS
    per_run = v.se**2 / (1 / v.base_runs + 1 / v.new_runs)
    # one-sided at the stage's level: power() is two-sided, so twice the alpha
    alpha = 2 * (1 - (1 - STAGE_ALPHA[2]) ** (1 / undecided))
    found = runs_for_power(math.sqrt(2 * per_run), lambda n: n - 1 + history_dof, alpha=alpha,
                           effect=math.log(1 + detect), wanted=WANTED_POWER)  # fmt: skip
    return max(found, 2) if found else None  # two: B N N B, a linear drift cancelled


def _criticals(judged: list[Verdict], noises: Noises, alpha: float, *, paired: bool) -> list:
    """(Critical, the verdicts it judges): the cells the machine's history calibrates by
    A/A splits (its splits are of unpaired runs: not for paired ones), the others by Sidak
    on their t; the family's alpha shared by their counts."""
    calibrated = [v for v in judged if noises.calibrates(v.cell) and not paired]
    out = []
    if calibrated:
        # the fewest runs any of them rests on: its tails are the widest of the family's
        nb = min(v.base_runs for v in calibrated)
        nn = min(v.new_runs for v in calibrated)
        share = alpha * len(calibrated) / len(judged)
        found = family.max_t(noises.runs, [v.cell for v in calibrated], nb, nn, alpha=share,
                             moderation=moderation)  # fmt: skip
        if found is not None:
            out.append((found, calibrated))
        else:  # too few splits to reach the level: judged as the others, on the prior's tails
            for v in calibrated:
                v.df = min(v.df, TAILS_DF[1])
            calibrated = []
    others = [v for v in judged if v not in calibrated]
    if others:
        share = alpha * len(others) / len(judged)
        out.append((family.sidak({v.cell: v.df for v in others}, share), others))
    return out


def decide(verdicts: list[Verdict], fail_above: float, noises: Noises, *,
           stage: int = 1, paired: bool = False, detect: float | None = None) -> list[str]:  # fmt: skip
    """Each judged cell's interval, the family's (each end a one-sided bound at the stage's
    level over every cell judged), and the verdict that interval says: slower (low above
    1), faster (high below 1), within noise (high below 1 + fail_above), else cannot tell;
    each cell it cannot tell, the pairs a second stage needs to catch a slowdown of `detect`
    (default: fail_above). Returns what the critical values rest on."""
    from scipy.special import stdtr

    judged = [v for v in verdicts if v.se]
    effect = math.log(1 + fail_above)
    families = _criticals(judged, noises, STAGE_ALPHA[stage], paired=paired)
    for crit, group in families:
        for v in group:
            up, down = crit.of(v.cell)
            d = math.log(v.ratio)
            v.low, v.high, v.critical = math.exp(d - up * v.se), math.exp(d + down * v.se), up
            stated = crit.power(v.cell, effect)
            v.power = stated if stated is not None else float(stdtr(v.df, effect / v.se - up))
            if v.low > 1:
                v.verdict = "regression"
            elif v.high < 1:
                v.verdict = "improvement"
            elif v.high < 1 + fail_above:
                v.verdict = "within noise"
    undecided = [v for v in verdicts if v.verdict == "cannot tell"]
    for v in undecided:
        dof = noises.history_cells.get(v.cell, (0.0, 0))[1]
        v.runs_needed = second_stage_runs(v, len(undecided), detect or fail_above,
                                          history_dof=dof)  # fmt: skip
    return [f"{crit.what} ({len(group)} cells)" for crit, group in families]


def compare(base_runs, new_runs, fail_above: float = DEFAULT_FAIL_ABOVE, noises=None):
    """Every cell's Verdict, regressions first."""
    verdicts, _ = compare_cells(
        side([_cells(r) for r in base_runs]),
        side([_cells(r) for r in new_runs]),
        fail_above,
        noises,
    )
    return verdicts


def paired_noise(name: str, pairs: list[tuple[dict, dict]], noises: Noises):
    """(log ratio, standard error, degrees of freedom, what) of a cell from runs made in
    pairs, one BASE and one NEW back to back: the mean of its pairs' differences, and its
    per-run variance from their spread (half a difference's: it holds two runs; a drift
    between pairs is not in it) pooled with its history's. None without a spread."""
    from statistics import fmean, variance

    diffs = [
        math.log(n[name].medians[0] / b[name].medians[0])
        for b, n in pairs
        if name in b and name in n and b[name].medians and n[name].medians
    ]
    parts = [(variance(diffs) / 2, len(diffs) - 1)] if len(diffs) >= 2 else []
    parts += [noises.history_cells[name]] if diffs and name in noises.history_cells else []
    dof = sum(d for _, d in parts)
    if not dof:
        return None
    var = sum(v * d for v, d in parts) / dof
    what = f"{len(diffs)} pairs' differences" + (" and its history" if len(parts) > 1 else "")
    return fmean(diffs), math.sqrt(2 * var / len(diffs)), float(dof), f"{what}: t({dof:.0f})"


def _pair(verdicts: list[Verdict], pairs: list[tuple[dict, dict]], noises: Noises) -> None:
    """Each judged cell's ratio and noise from its pairs (paired_noise) where it has any."""
    from scipy.special import stdtr

    for v in verdicts:
        found = paired_noise(v.cell, pairs, noises) if v.ratio else None
        if found is None:
            continue
        d, se, df, v.how = found
        v.ratio, v.se, v.df = math.exp(d), se, df
        v.p = float(stdtr(df, -d / se)) if se > 0 else None


def compare_cells(base: dict, new: dict, fail_above: float = DEFAULT_FAIL_ABOVE, noises=None,
                  *, stage: int = 1, pairs: list | None = None, detect: float | None = None):  # fmt: skip
    """compare() of two sides' cells (side()), and what its critical values rest on; with
    `pairs` (each a BASE run's and a NEW run's cells, made back to back), judged on the
    pairs' differences."""
    noises = noises or Noises(prior=noise.load())
    order = {v: i for i, v in enumerate(VERDICTS)}
    mods = moderations(base, new, noises)
    names = sorted(set(base) | set(new))
    found = [judge(n, base.get(n), new.get(n), noises, mods=mods) for n in names]
    found = [v for v in found if v is not None]
    if pairs:
        _pair(found, pairs, noises)
    families = decide(found, fail_above, noises, stage=stage, paired=bool(pairs), detect=detect)
    return sorted(found, key=lambda v: (order[v.verdict], -(v.ratio or 0), v.cell)), families


def overall(base_runs, new_runs) -> over.OverRuns | None:
    """NEW's time over BASE's across the cells both sides measured in every run: each
    run's geometric mean over those cells, then the ratio over runs (None with a single
    run on a side, or no such cell)."""
    sides = [
        [{k: c for k, c in _cells(r).items() if c.medians} for r in runs]
        for runs in (base_runs, new_runs)
    ]
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
            v.verdict + (f" (failed in {v.new_failed} NEW run(s))" if v.new_failed else ""),
            v.how,
        ]
        for v in verdicts
    ]
    headers = ["cell", "BASE s", "NEW s", "time", "family's interval", "verdict", "noise from"]
    return tabulate(rows, headers=headers, disable_numparse=True)


def _beyond(v: Verdict, fail_above: float) -> bool:
    """A regression whose interval reaches past fail_above: slower for sure, and perhaps
    by more than is allowed."""
    return v.verdict == "regression" and v.high > 1 + fail_above


def summary(verdicts: list[Verdict], total, fail_above: float, families: list[str] | None = None,
            *, stage: int = 1, detect: float | None = None) -> str:  # fmt: skip
    counts = {v: sum(1 for x in verdicts if x.verdict == v) for v in VERDICTS}
    said = ", ".join(f"{n} {v}" for v, n in counts.items() if n or v in VERDICTS[:5])
    worst = next((v for v in verdicts if v.verdict == "regression"), None)
    text = f"{len(verdicts)} cells: {said}"
    if worst:
        text += f"; worst: {worst.cell} {_pct(worst.ratio)}"
    if total is not None:
        text += (
            f"; NEW's time over BASE's across the {total.runs} cells every run measured: "
            f"x{total.value:.3f} (95 % CI {total.low:.3f}-{total.high:.3f})"
        )
    if families:
        text += (
            f"; each interval is the family's, each end a one-sided bound (stage {stage}: "
            f"a false regression in at most {STAGE_ALPHA[stage]:.0%} of comparisons where "
            f"nothing changed, {sum(STAGE_ALPHA.values()):.0%} over both stages): "
            + "; ".join(families)
        )
    if any("the prior" in v.how for v in verdicts):
        text += "; noise from the prior (other machines' runs): --noise gives this machine's"
    powers = sorted(v.power for v in verdicts if v.power is not None)
    if powers:
        text += (
            f"; the chance of catching +{fail_above:.0%}: median {powers[len(powers) // 2]:.0%} "
            f"of a cell, lowest {powers[0]:.0%}"
        )
    undecided = [v for v in verdicts if v.verdict == "cannot tell"]
    if undecided and stage == 1:
        text += "; " + second_stage_plan(undecided, detect or fail_above, fail_above)
    failing = [v for v in verdicts if _beyond(v, fail_above)]
    lost = [v for v in verdicts if v.verdict in FAILING or v.new_failed]
    if failing or lost:
        text += (
            f"; {len(failing)} regression(s) reaching past {fail_above:.0%}, "
            f"{len(lost)} failed or lost in NEW: failing"
        )
    elif counts["cannot tell"]:
        text += f"; {counts['cannot tell']} cannot tell a {fail_above:.0%} regression: exit 3"
    return text


def second_stage_plan(undecided: list[Verdict], detect: float, fail_above: float) -> str:
    """What a second stage of the cells stage 1 cannot tell costs: each cell its own
    alternated pairs (runs_needed, made even as alternate.py makes them), and what they buy."""
    needed = [v.runs_needed for v in undecided]
    known = sorted(n + n % 2 for n in needed if n is not None)
    beyond = len(needed) - len(known)
    parts = []
    if known:
        span = str(known[0]) if known[0] == known[-1] else f"{known[0]}-{known[-1]}"
        parts.append(f"{span} alternated pairs each")
    if beyond:
        parts.append(f"more than {MOST_RUNS} for {beyond}")
    said = ", and ".join(parts)
    runs = f", {2 * sum(known)} runs of a cell in all" if known and not beyond else ""
    text = (
        f"a second stage of just the {len(undecided)} cells it cannot tell, {said}{runs}, "
        f"catches a +{detect:.0%} slowdown of each with {WANTED_POWER:.0%} power"
    )
    if detect > fail_above:
        text += f" (--detect; an unchanged cell may still not show within {fail_above:.0%})"
    return text + " (benchmarks/alternate.py --only-undecided; compare --paired --stage 2)"


def exit_code(verdicts: list[Verdict], fail_above: float, cannot_tell_ok: bool) -> int:
    """1: a regression whose interval reaches past fail_above, or a cell of BASE failed
    in NEW (every run, or some where no BASE run failed it) or missing in NEW; 3: a cell that cannot tell (0 with cannot_tell_ok);
    0: none of these."""
    if any(v.verdict in FAILING or v.new_failed or _beyond(v, fail_above) for v in verdicts):
        return 1
    if any(v.verdict == "cannot tell" for v in verdicts) and not cannot_tell_ok:
        return 3
    return 0


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


def _fraction(value: str, flag: str = "--fail-above", *, zero: bool = True) -> float:
    text = value.strip()
    share = text.endswith("%")
    number = command_line.number(flag, text.rstrip("%"), low_inclusive=zero)
    return number / 100 if share else number


def parser() -> command_line.ArgumentParser:
    p = command_line.ArgumentParser(
        prog="xfbench compare",
        description="Each cell of NEW against BASE (runs, or several joined by commas): "
        "its ratio of times, the family's interval (each end a one-sided bound over every "
        "cell compared) and the verdict that interval says.",
        epilog="exit codes: 0 no regression whose interval reaches past --fail-above, nothing "
        "lost; 1 such a regression, or a cell of BASE failed in NEW (in every run, or in some "
        "where no BASE run failed it) or missing in "
        "NEW; 3 a cell that cannot tell (--cannot-tell-ok: 0); 2 bad input, one line. "
        "Two stages: stage 1 judges every cell (a false regression in at most 4% of "
        "comparisons where nothing changed) and says how many alternated pairs of each cell "
        "it cannot tell catch a slowdown of --detect with 80% power; "
        "benchmarks/alternate.py --only-undecided makes those runs and --paired --stage 2 "
        "judges them (1%: 5% over both stages).",
    )
    runs = command_line.RUNS
    p.add_argument(
        "base", metavar="BASE", type=runs, help="runner folders or JSON files, comma-separated"
    )
    p.add_argument("new", metavar="NEW", type=runs, help="likewise")
    p.add_argument(
        "--fail-above",
        default=f"{DEFAULT_FAIL_ABOVE:.0%}",
        type=command_line.SHARE,
        help="a regression slower than this fails (exit 1): 5%% or 0.05 (default: 5%%)",
    )
    p.add_argument(
        "--detect",
        type=command_line.SHARE,
        help="the slowdown a second stage is sized to catch with 80%% power in each cell "
        "stage 1 cannot tell, 20%% or 0.2 (default: --fail-above, which also shows an "
        "unchanged cell within it about as often, at many more runs on a noisy machine)",
    )
    p.add_argument(
        "--noise",
        metavar="FILE",
        type=command_line.FILE,
        help="this machine's run-to-run noise, fitted by xfbench noise from three or more "
        "of its runs (default: the runs in front, else the shipped prior for CPU cells)",
    )
    p.add_argument(
        "--stage",
        default="1",
        choices=("1", "2"),
        help="1: every cell (a false regression in at most 4%% of comparisons); 2: the "
        "fresh runs of the cells stage 1 could not tell, alternated (1%%; 5%% over both)",
    )
    p.add_argument(
        "--paired",
        action="store_true",
        help="BASE's runs and NEW's were made in pairs, the i-th of each back to back "
        "(benchmarks/alternate.py): each cell is judged on its pairs' differences",
    )
    p.add_argument(
        "--cannot-tell-ok",
        action="store_true",
        help="exit 0 rather than 3 where a cell cannot tell a regression from its noise",
    )
    out = command_line.OUTPUT_FILE
    p.add_argument("--json", metavar="FILE", type=out, help="also write the verdicts as JSON")
    p.add_argument("--bmf", metavar="FILE", type=out, help="also write Bencher Metric Format JSON")
    return p


def _read(sides: list[list[str]], *, paired: bool) -> tuple[list, list, list]:
    """Each side's runs and their cells (UsageError: one line): no run given twice on a
    side, and with --paired as many runs a side."""
    from xfbench.errors import UsageError
    from xfbench.report.load import LoadError, load_many

    try:
        base_runs, new_runs = ([r for p in side for r in load_many(p)] for side in sides)
    except LoadError as e:
        raise UsageError(str(e)) from None
    cells = [[_cells(r) for r in runs] for runs in (base_runs, new_runs)]
    for label, runs, found in (("BASE", base_runs, cells[0]), ("NEW", new_runs, cells[1])):
        twice = noise.duplicate([(r.path, c) for r, c in zip(runs, found)])
        if twice:
            raise UsageError(f"{label} gives one run twice ({twice[0]} and {twice[1]}: every "
                             "median the same), which would measure no spread")  # fmt: skip
    if paired and len(base_runs) != len(new_runs):
        raise UsageError(f"--paired: {len(base_runs)} BASE runs and {len(new_runs)} NEW runs, "
                         "where each pair is one of each")  # fmt: skip
    return base_runs, new_runs, cells


def main(argv: list[str] | None = None) -> int:
    from xfbench.errors import UsageError

    args = command_line.parse_command_line(parser(), argv)
    if isinstance(args, int):
        return args
    try:
        fail_above = _fraction(args.fail_above)
        detect = _fraction(args.detect, "--detect", zero=False) if args.detect else fail_above
        command_line.output_path("--json", args.json)
        command_line.output_path("--bmf", args.bmf)
        sides = [[p for p in value.split(",") if p] for value in (args.base, args.new)]
        if not all(sides):
            raise UsageError("BASE and NEW each name at least one run")
        noises = _noises(args.noise)
        base_runs, new_runs, cells = _read(sides, paired=args.paired)
    except UsageError as e:
        print(f"xfbench compare: {e}", file=sys.stderr)
        return 2
    stage = int(args.stage)
    pairs = list(zip(cells[0], cells[1])) if args.paired else None
    verdicts, families = compare_cells(side(cells[0]), side(cells[1]), fail_above, noises,
                                       stage=stage, pairs=pairs, detect=detect)  # fmt: skip
    if not verdicts:
        print("xfbench compare: no cell measured in BASE or NEW", file=sys.stderr)
        return 2
    print(table(verdicts))
    print()
    line = summary(verdicts, overall(base_runs, new_runs), fail_above, families, stage=stage,
                   detect=detect)  # fmt: skip
    print(line)
    for path, doc in ((args.json, None), (args.bmf, bmf(verdicts))):
        if path:
            doc = doc or {"summary": line, "fail_above": fail_above, "detect": detect, "base": sides[0],
                          "new": sides[1], "cells": [asdict(v) for v in verdicts]}  # fmt: skip
            Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    return exit_code(verdicts, fail_above, args.cannot_tell_ok)


def _noises(path: str | None) -> Noises:
    """The prior, and the machine's history where --noise names one (UsageError: one line)."""
    from xfbench.errors import UsageError

    if path is None:
        return Noises(prior=noise.load())
    try:
        return Noises(prior=noise.load(), history=noise.load(Path(path)), history_name=path,
                      history_cells=noise.load_cells(Path(path)),
                      runs=noise.load_history(Path(path)))  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"--noise {path}: not a noise file xfbench noise wrote ({e})") from None
