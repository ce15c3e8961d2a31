"""The critical values `xfbench compare` judges its cells by, all of them one family: how
large a cell's one-sided statistic (NEW's mean log median less BASE's, over its standard
error) gets when nothing changed.

With a machine's history of HISTORY_RUNS runs or more (`xfbench noise`), it is measured, not
assumed: the history is split A/A, nb of its runs against nn others (every split, or SPLITS
of them drawn with a fixed seed), each cell's statistic computed as compare computes it
(its variance from the history's other runs and the split's, moderated across its kind),
and the 1 - alpha quantile of the largest statistic over the family taken, each direction
apart (max-T, Westfall and Young 1993). It carries the machine's real tails (a kernel chosen
one way or another, a neighbour) and the cells' correlation (a neighbour slows every cell
of a run at once), which no t model of independent cells does.

Without such a history, each cell's t quantile at Sidak's level, (1 - alpha)^(1/m) one-sided
over the m cells judged: exact where the cells are independent and their t is right, which
the prior's model of other machines' runs only approximates; compare says so beside it.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field

import numpy as np

HISTORY_RUNS = 10  # a history's A/A splits: at least 45 pairs of runs, 1v1
SPLITS = 600  # A/A splits drawn where there are more (seed 0: the same answer every time)
LEFT_OUT = 2  # history runs kept out of every split: the variance the split is judged by


@dataclass(frozen=True)
class History:
    """A machine's runs as compare reads them: each cell's log medians, one a run (NaN where
    the run did not measure it), and its kind."""

    runs: list[str]  # each run's name
    logs: dict[str, list[float]]  # cell -> log median per run
    kinds: dict[str, str]  # cell -> kind of workload ("training", ...)

    @property
    def size(self) -> int:
        return len(self.runs)

    def measured(self, cell: str) -> int:
        """The runs of the history that measured the cell."""
        return sum(1 for x in self.logs.get(cell, ()) if math.isfinite(x))


@dataclass
class Critical:
    """One-sided critical values of a family: a cell is slower where its statistic exceeds
    `up`, faster where minus it exceeds `down`; `null` holds each cell's statistics and
    standard errors over the A/A splits (the per-cell power's null), empty for Sidak's."""

    up: float | dict[str, float]
    down: float | dict[str, float]
    what: str
    null: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def of(self, cell: str) -> tuple[float, float]:
        up = self.up[cell] if isinstance(self.up, dict) else self.up
        down = self.down[cell] if isinstance(self.down, dict) else self.down
        return up, down

    def power(self, cell: str, effect: float) -> float | None:
        """The chance a cell slowed by log `effect` is called slower: over the A/A splits,
        its null statistic shifted by effect over that split's standard error."""
        if cell not in self.null:
            return None
        t, se = self.null[cell]
        keep = np.isfinite(t) & (se > 0)
        if not keep.any():
            return None
        return float(np.mean(t[keep] + effect / se[keep] > self.of(cell)[0]))


def sidak(dfs: dict[str, float], alpha: float) -> Critical:
    """Each cell's one-sided t quantile at (1 - alpha)^(1/m): no cell of m independent ones
    beyond it with probability 1 - alpha."""
    from scipy.special import stdtrit

    level = (1 - alpha) ** (1 / max(len(dfs), 1))
    found = {c: float(stdtrit(df, level)) for c, df in dfs.items()}
    what = f"Sidak over {len(dfs)} cells at {alpha:.0%} one-sided, each its t"
    return Critical(up=found, down=dict(found), what=what)


def split_sizes(size: int, nb: int, nn: int) -> tuple[int, int]:
    """The A/A split's sides: the comparison's, shrunk (in proportion) to leave LEFT_OUT runs
    of the history out of every split."""
    room = size - LEFT_OUT
    if nb + nn <= room:
        return nb, nn
    b = min(max(1, round(room * nb / (nb + nn))), room - 1)
    return b, room - b


def splits(size: int, nb: int, nn: int, most: int = SPLITS) -> list[tuple[tuple, tuple]]:
    """Ordered A/A splits of `size` runs: nb of them against nn others; every one, or `most`
    drawn with a fixed seed."""
    runs = range(size)
    count = math.comb(size, nb) * math.comb(size - nb, nn)
    if count <= most:
        return [
            (b, n)
            for b in itertools.combinations(runs, nb)
            for n in itertools.combinations([i for i in runs if i not in b], nn)
        ]
    rng, out = random.Random(0), []
    for _ in range(most):
        chosen = rng.sample(list(runs), nb + nn)
        out.append((tuple(sorted(chosen[:nb])), tuple(sorted(chosen[nb:]))))
    return out


def _spread(logs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's sample variance over the rows that hold it, and its degrees of freedom
    (rows less one; 0 where fewer than two)."""
    n = np.sum(np.isfinite(logs), axis=0)
    dof = np.maximum(n - 1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(logs, axis=0)
        var = np.nansum((logs - mean) ** 2, axis=0) / np.where(dof > 0, dof, 1)
    return np.where(dof > 0, var, 0.0), dof


def moderated(var: np.ndarray, dof: np.ndarray, kinds: list[str], moderation) -> tuple:
    """Each cell's variance moderated across its kind (limma's), and its degrees of freedom:
    `moderation` fits a kind's prior from its cells' (variance, dof); a kind too small to
    fit keeps its cells' own."""
    var, df = var.astype(float).copy(), dof.astype(float).copy()
    for kind in set(kinds):
        index = [i for i, k in enumerate(kinds) if k == kind]
        mod = moderation([(float(var[i]), int(dof[i])) for i in index if dof[i] > 0])
        if mod is None:
            continue
        for i in index:
            var[i] = (mod.d0 * mod.s0_2 + dof[i] * var[i]) / (mod.d0 + dof[i])
            df[i] = mod.d0 + dof[i]
    return var, df


def statistics(history: History, cells: list[str], b: tuple, n: tuple, *, moderation):
    """Each cell's statistic and standard error where the split's b runs are BASE and its n
    runs NEW, the history's other runs its history, as compare judges a comparison."""
    logs = np.array([history.logs[c] for c in cells], dtype=float).T  # runs x cells
    rest = [i for i in range(history.size) if i not in b and i not in n]
    base, new = logs[list(b)], logs[list(n)]
    parts = [_spread(logs[rest]), _spread(base), _spread(new)]
    dof = sum(d for _, d in parts)
    var = sum(v * d for v, d in parts) / np.where(dof > 0, dof, 1)
    var, _ = moderated(var, dof, [history.kinds[c] for c in cells], moderation)
    nb, nn = np.sum(np.isfinite(base), axis=0), np.sum(np.isfinite(new), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(var * (1 / nb + 1 / nn))
        t = (np.nanmean(new, axis=0) - np.nanmean(base, axis=0)) / se
    return np.where((dof > 0) & (se > 0), t, np.nan), se


_FOUND: dict[
    tuple, tuple[History, Critical | None]
] = {}  # a history's splits depend on its sizes only


def max_t(history: History, cells: list[str], nb: int, nn: int, *, alpha: float,
          moderation) -> Critical | None:  # fmt: skip
    """The family's critical values from A/A splits of the history (max-T, each direction),
    computed once a history, family, sizes and level (a benchmark compares many times);
    None where too few splits reach the level's quantile (1 / alpha of them or more)."""
    key = (id(history), tuple(cells), nb, nn, alpha)
    if key not in _FOUND or _FOUND[key][0] is not history:
        _FOUND[key] = (history, _max_t(history, cells, nb, nn, alpha=alpha, moderation=moderation))
    return _FOUND[key][1]


def _max_t(history: History, cells: list[str], nb: int, nn: int, *, alpha: float,
           moderation) -> Critical | None:  # fmt: skip
    b_size, n_size = split_sizes(history.size, nb, nn)
    found = [statistics(history, cells, b, n, moderation=moderation) for b, n in splits(history.size, b_size, n_size)]  # fmt: skip
    t = np.array([f[0] for f in found])  # splits x cells
    se = np.array([f[1] for f in found])
    with np.errstate(invalid="ignore"):
        largest_up = np.nanmax(np.where(np.isfinite(t), t, -np.inf), axis=1)
        largest_down = np.nanmax(np.where(np.isfinite(t), -t, -np.inf), axis=1)
    # a split where no cell had a statistic says nothing of the largest: left out, not
    # counted as one below every critical value
    valid = np.isfinite(largest_up) & np.isfinite(largest_down)
    if valid.sum() * alpha < 1:  # too few splits to reach the quantile: no calibration
        return None
    up = float(np.quantile(largest_up[valid], 1 - alpha))
    down = float(np.quantile(largest_down[valid], 1 - alpha))
    what = (
        f"A/A splits of this machine's {history.size} runs ({len(found)} splits, "
        f"{b_size} against {n_size}): max-T over {len(cells)} cells at {alpha:.0%} one-sided"
    )
    null = {c: (t[valid, i], se[valid, i]) for i, c in enumerate(cells)}
    return Critical(up=up, down=down, what=what, null=null)
