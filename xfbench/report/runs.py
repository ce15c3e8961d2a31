"""Verdicts that survive a second run: intervals over several runs of one machine (how a
comparison judges one run against another is report/compare.py's, on report/noise.py's
measured noise).

Within one run, a cell's interval (harness/stats.py) and a score's (report/score.py)
describe the noise of its timed rounds; two runs of one machine differ by more than that
(another boot, another placement in memory, other tenants). Over runs, xfbench uses a
t-interval on the runs' log values: mean(log x) +- t(0.975, n-1) sd(log x) / sqrt(n),
exponentiated. Why: with 3 runs a bootstrap over runs has 10 distinct resamples and its
percentile interval is about the runs' range, which covers a 95 % interval's worth only
about half the time; the t-interval widens for the few runs there are (t = 4.30 at 3 runs)
and assumes only that a machine's log times scatter normally from run to run, which ratios
of times do well enough. Logs, because speeds compare as ratios.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LEVEL = 0.95
METHOD = "t-interval on the runs' log values (95 %)"


@dataclass(frozen=True)
class OverRuns:
    """A value over n runs: its geometric mean and t-interval (None with one run)."""

    value: float
    low: float | None
    high: float | None
    runs: int
    spread: float  # greatest over least, less 1: the runs' own range

    def text(self, digits: str = ".3g") -> str:
        if self.low is None:
            return f"{self.value:{digits}} (one run: no interval over runs)"
        return (
            f"{self.value:{digits}} ({LEVEL * 100:.0f} % CI over {self.runs} runs "
            f"{self.low:{digits}}-{self.high:{digits}})"
        )


def t_quantile(runs: int) -> float:
    """t(0.975) with runs - 1 degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(0.5 + LEVEL / 2, runs - 1))


def over_runs(values: list[float]) -> OverRuns:
    """The geometric mean of positive values, one per run, with its t-interval."""
    if not values or min(values) <= 0:
        raise ValueError("over_runs takes positive values, one per run")
    logs = [math.log(v) for v in values]
    n, mean = len(logs), sum(logs) / len(logs)
    spread = max(values) / min(values) - 1
    if n == 1:
        return OverRuns(value=values[0], low=None, high=None, runs=1, spread=0.0)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = t_quantile(n) * sd / math.sqrt(n)
    return OverRuns(
        value=math.exp(mean),
        low=math.exp(mean - half),
        high=math.exp(mean + half),
        runs=n,
        spread=spread,
    )


def ratio_over_runs(base: list[float], new: list[float]) -> tuple[float, float, float] | None:
    """(ratio, low, high) of new's geometric mean over base's, from several runs on each
    side: Welch's t-interval on the difference of the log means. None where a side has
    fewer than 2 runs (no spread to judge by: the measured noise of the kind is, report/noise.py)."""
    if len(base) < 2 or len(new) < 2:
        return None
    from scipy.stats import t

    a, b = [math.log(x) for x in base], [math.log(x) for x in new]
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1) / len(a)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return math.exp(mb - ma), math.exp(mb - ma), math.exp(mb - ma)
    df = (va + vb) ** 2 / (
        (va**2 / (len(a) - 1) if va else 0.0) + (vb**2 / (len(b) - 1) if vb else 0.0)
    )
    half = float(t.ppf(0.5 + LEVEL / 2, df)) * se
    d = mb - ma
    return math.exp(d), math.exp(d - half), math.exp(d + half)


# -- the report's tables over runs --------------------------------------------------------


def machine_groups(report) -> list[list]:
    """The report's machines grouped by what they are (their label before runs were told
    apart), the groups of two runs or more."""
    by_label: dict[str, list] = {}
    for m in report.machines:
        by_label.setdefault(m.base_label, []).append(m)
    return [g for g in by_label.values() if len(g) > 1]


def scores_table(report):
    """Each machine measured by several runs: its machine and per-core scores over them."""
    from xfbench.report.table import Table, Text

    scored = {id(m): s for m, s in report.scores if s is not None}
    rows = []
    for group in machine_groups(report):
        found = [scored[id(m)] for m in group if id(m) in scored]
        if len(found) < 2:
            continue
        cells = [Text(group[0].base_label), Text(str(len(found)))]
        for kind in ("machine", "per_core"):
            values = [getattr(s, kind).value for s in found if getattr(s, kind).value]
            if len(values) < 2:
                cells += [Text(""), Text("")]
                continue
            o = over_runs(values)
            cells += [Text(o.text()), Text(f"{o.spread:.1%}")]
        rows.append(cells + [Text(found[0].reference)])
    if not rows:
        return None
    return Table(
        "Scores over runs",
        [
            "machine",
            "runs",
            "machine score",
            "its runs' spread",
            "per-core score",
            "its runs' spread",
            "reference",
        ],
        rows,
        anchor="scores-over-runs",
        text_cols=7,
        caption=f"Each run scored on its own against the reference, then the geometric mean "
        f"of the runs' scores with its {METHOD} (report/runs.py says why); spread: the "
        "greatest run's score over the least's. The interval covers what changes between "
        "runs of the machine, which one run's interval does not.",
    )
