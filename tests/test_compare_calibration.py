"""`xfbench compare`'s error rates, proven by simulation on a machine unlike the model compare
assumes: each cell its own scale, heavy tails (t(4)), two speeds (half the cells run 8 %
slower in one run of five: a kernel chosen one way or another) and a shift every cell of a
run shares (a neighbour). Its history of 12 runs (`xfbench noise`) sets the critical values
by A/A splits. With nothing changed, a false regression in at most the stage's 4 % of
comparisons; one cell slowed 20 % is caught about as often as compare says, cell by cell.
The rates measured on real runs: docs/reports.md."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xfbench.report import compare, family, noise

KINDS = (("train", "fcn5"), ("train", "resnet56"), ("infer", "alexnet"), ("infer", "lstm32"))
CELLS = 32
HISTORY = 12


def machine(rng) -> list[dict]:
    """Each cell: its kind, its true time, its own between-run scale and its second speed."""
    return [
        {"task": task, "network": net, "name": f"{net} {task} #{i}",
         "time": float(rng.uniform(0.05, 2.0)), "scale": float(rng.uniform(0.01, 0.04)),
         "jump": 0.08 if i % 2 else 0.0}
        for i, (task, net) in enumerate(KINDS[j % 4] for j in range(CELLS))
    ]  # fmt: skip


def run(rng, cells: list[dict], slow: dict[str, float] | None = None) -> dict:
    """One run's cells; `slow` multiplies some cells' times."""
    shared = 0.01 * rng.standard_normal()
    out = {}
    for c in cells:
        jump = c["jump"] if rng.random() < 0.2 else 0.0
        x = c["time"] * (slow or {}).get(c["name"], 1.0)
        x *= math.exp(shared + jump + c["scale"] * rng.standard_t(4))
        out[c["name"]] = compare.Cell(c["network"], c["task"], [x], [[x]])
    return out


def history(rng, cells) -> compare.Noises:
    """What `xfbench noise` keeps of the machine's runs and compare --noise reads."""
    runs = [run(rng, cells) for _ in range(HISTORY)]
    models = noise.fit_all(noise.log_ratios(runs))
    return compare.Noises(prior=noise.load(), history=models, history_name="sim",
                          history_cells=noise.cell_spreads(runs),
                          runs=noise.history([f"run-{i}" for i in range(HISTORY)], runs))  # fmt: skip


def outcome(rng, cells, noises, n: int, *, slow=None) -> list[compare.Verdict]:
    base = compare.side([run(rng, cells) for _ in range(n)])
    new = compare.side([run(rng, cells, slow) for _ in range(n)])
    return compare.compare_cells(base, new, 0.05, noises)[0]


def test_the_history_sets_the_critical_values_and_says_so():
    rng = np.random.default_rng(0)
    cells = machine(rng)
    noises = history(rng, cells)
    verdicts = outcome(rng, cells, noises, 3, slow={cells[0]["name"]: 1.3})
    _, families = compare.compare_cells(
        compare.side([run(rng, cells) for _ in range(3)]),
        compare.side([run(rng, cells) for _ in range(3)]),
        0.05,
        noises,
    )
    assert families and "A/A splits of this machine's 12 runs" in families[0]
    slowed = next(v for v in verdicts if v.cell == cells[0]["name"])
    assert slowed.verdict == "regression" and slowed.low > 1
    # no clamp: the degrees of freedom are what the history and the runs rest on
    assert all(v.df > 10 for v in verdicts if v.df)
    # the printed interval is the one judged by: every verdict follows from it
    for v in verdicts:
        assert (v.verdict == "regression") == (v.low > 1)
        assert v.verdict != "within noise" or v.high < 1.05


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 3])
def test_nothing_changed_gives_a_false_regression_in_at_most_the_stages_share(n):
    """600 simulated comparisons a setting, the history fixed: the share with any regression
    called; its 95 % upper bound (Clopper-Pearson) at most 8 %. Measured, seeds as here: 22
    of 600 at 1 a side, 3 at 3 (the A/A splits of 1 against 1, and 3 against 3)."""
    from scipy.stats import beta

    rng = np.random.default_rng(n)
    cells = machine(rng)
    noises = history(rng, cells)
    tries = 600
    wrong = sum(
        any(v.verdict == "regression" for v in outcome(rng, cells, noises, n)) for _ in range(tries)
    )
    upper = beta.ppf(0.975, wrong + 1, tries - wrong)
    assert wrong <= 0.04 * tries and upper <= 0.08, (wrong, upper)


@pytest.mark.slow
def test_each_cells_stated_power_is_what_is_measured():
    """One cell slowed 20 % (each in turn), 3 runs a side: the share caught, cell by cell,
    beside the power the A/A null states for that cell (Critical.power). Measured, seeds as
    here: 0.83 caught on average, 0.82 stated; 0.08 apart a cell on average."""
    rng = np.random.default_rng(7)
    cells = machine(rng)
    noises = history(rng, cells)
    crit = family.max_t(noises.runs, sorted(noises.runs.logs), 3, 3, alpha=compare.STAGE_ALPHA[1],
                        moderation=compare.moderation)  # fmt: skip
    tries, gaps = 12, []
    for c in cells:
        caught = sum(
            next(v for v in outcome(rng, cells, noises, 3, slow={c["name"]: 1.2})
                 if v.cell == c["name"]).verdict == "regression"
            for _ in range(tries)
        )  # fmt: skip
        gaps.append(caught / tries - crit.power(c["name"], math.log(1.2)))
    # within 10 points, cell by cell on average (each cell's own share rests on 12 tries)
    assert abs(float(np.mean(gaps))) <= 0.10, gaps
    assert float(np.mean(np.abs(gaps))) <= 0.15, gaps
