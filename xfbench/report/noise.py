"""How far one run of a cell lands from another run of it on the same machine, per kind of
workload: the model `xfbench compare` judges a ratio of times by.

For a cell measured once on each side, the log of NEW's median over BASE's varies from
run to run of one machine with heavier tails than a normal's (a compiled cell that chose
other kernels, a VM's neighbour): it is modelled as Student's t with a scale and degrees
of freedom per kind of workload (training, inference, Offline serving, generation; and
within training and inference per network family where the runs hold enough pairs), fitted
by maximum likelihood to the log ratios of every cell between every pair of runs of one
machine (`fit`). Runs of several per side shrink the scale by sqrt((1/nb + 1/nn) / 2).

The models shipped with the package (data/noise.json, fitted by `benchmarks/verdicts.py`
on the checked-in runs of two CPU VMs) are a prior: `xfbench compare` takes them only for
a CPU cell measured once a side, where neither the runs in front of it nor the machine's
own history (`xfbench noise RUNS --into FILE`, three runs or more of one machine, read by
`compare --noise FILE`) give its noise. A refit writes where it is told, never into the
package. docs/reports.md gives their rates on runs they were not fitted on.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from xfbench.models import FAMILIES

NOISE = Path(__file__).resolve().parent / "data" / "noise.json"
# A family gets its own model only with this many log ratios behind it; else its kind's.
LEAST_PAIRS = 30
LOWEST_DF = 2.0  # below, t's variance is infinite: the fit says so rather than go there
HIGHEST_DF = 100.0  # a normal's tails, as far as these samples can tell


@dataclass(frozen=True)
class Noise:
    """One kind's log ratio of two single runs' medians: t(df) times scale."""

    scale: float
    df: float
    pairs: int  # log ratios it was fitted on
    of: str  # what it models: "training", "inference cnn", ...

    def se(self, base_runs: int, new_runs: int) -> float:
        """The scale of the difference of the two sides' mean log medians."""
        return self.scale * math.sqrt((1 / base_runs + 1 / new_runs) / 2)


def kind_of(task: str, network: str) -> tuple[str, str]:
    """(kind, family) of a cell: ("training", "cnn")."""
    from xfbench import plugin

    return _kinds(tuple(plugin.declared())).get(task, task), FAMILIES.get(network, "")


@functools.cache
def _kinds(suite_names: tuple[str, ...]) -> dict[str, str]:
    """The kind of workload of each task the scores count (report/suites.py: each suite's
    `workloads`): read once for each set of suites (compare asks for every cell)."""
    from xfbench.report import suites

    return {task: kind for s in suites.declared() for task, kind in s.hooks.workloads.items()}


def fit(log_ratios: list[float], of: str) -> Noise:
    """Student's t, centred on 0, fitted by maximum likelihood to log ratios of one run's
    median over another's (the same cells, the same machine)."""
    from scipy.stats import t

    df, _, scale = t.fit(log_ratios, floc=0.0)
    df = float(min(max(df, LOWEST_DF), HIGHEST_DF))
    return Noise(scale=float(scale), df=df, pairs=len(log_ratios), of=of)


def fit_all(samples: dict[tuple[str, str], list[float]]) -> dict[str, Noise]:
    """{"kind" or "kind family": Noise} from log ratios keyed by (kind, family): every kind,
    and each family with LEAST_PAIRS ratios or more."""
    by_kind: dict[str, list[float]] = {}
    for (kind, _), values in samples.items():
        by_kind.setdefault(kind, []).extend(values)
    models = {kind: fit(values, kind) for kind, values in by_kind.items()}
    for (kind, family), values in samples.items():
        if family and len(values) >= LEAST_PAIRS and len(by_kind[kind]) > len(values):
            models[f"{kind} {family}"] = fit(values, f"{kind} {family}")
    return models


def write(models: dict[str, Noise], source: dict, path: Path, cells: dict | None = None, *,
          runs=None) -> None:  # fmt: skip
    """A noise file: each kind's model, and (a machine's history) each cell's own spread and
    its runs' log medians (a family.History: compare's A/A critical values)."""
    doc = {"source": source, "models": {k: asdict(v) for k, v in sorted(models.items())}}
    if cells is not None:
        doc["cells"] = {k: list(v) for k, v in sorted(cells.items())}
    if runs is not None:
        doc["runs"] = {
            "names": runs.runs,
            "cells": {
                name: {"kind": runs.kinds[name],
                       "logs": [x if math.isfinite(x) else None for x in logs]}
                for name, logs in sorted(runs.logs.items())
            },
        }  # fmt: skip
    path.write_text(json.dumps(doc, indent=1) + "\n")


def history(names: list[str], runs: list[dict]):
    """A machine's runs (each run's cells, as compare reads them) as a family.History."""
    from xfbench.report.family import History

    logs: dict[str, list[float]] = {}
    kinds: dict[str, str] = {}
    for i, cells in enumerate(runs):
        for name, c in cells.items():
            if c.medians:
                logs.setdefault(name, [math.nan] * len(runs))[i] = math.log(c.medians[0])
                kinds[name] = kind_of(c.task, c.network)[0]
    return History(runs=list(names), logs=logs, kinds=kinds)


def load_history(path: Path):
    """A noise file's runs (None where it holds none: the package's prior, an older file)."""
    from xfbench.report.family import History

    doc = json.loads(path.read_text()).get("runs")
    if doc is None:
        return None
    cells = doc["cells"]
    return History(
        runs=[str(n) for n in doc["names"]],
        logs={
            k: [math.nan if x is None else float(x) for x in v["logs"]] for k, v in cells.items()
        },
        kinds={k: str(v["kind"]) for k, v in cells.items()},
    )


def duplicate(named: list[tuple[str, dict]]) -> tuple[str, str] | None:
    """Two of the runs (name, each run's cells) that are one run given twice: every cell's
    median the same. Their spread would be zero, and a zero spread is no measurement."""
    seen: dict[tuple, str] = {}
    for name, cells in named:
        key = tuple(sorted((k, tuple(c.medians)) for k, c in cells.items()))
        if key in seen:
            return seen[key], name
        seen[key] = name
    return None


def cell_spreads(runs: list[dict]) -> dict[str, tuple[float, int]]:
    """Each cell's variance of its log median over one machine's runs (each run's cells, as
    compare reads them), and its degrees of freedom: the runs that measured it, less one."""
    logs: dict[str, list[float]] = {}
    for cells in runs:
        for name, c in cells.items():
            if c.medians:
                logs.setdefault(name, []).append(math.log(c.medians[0]))
    out = {}
    for name, values in logs.items():
        if len(values) >= 2:
            m = sum(values) / len(values)
            out[name] = (sum((x - m) ** 2 for x in values) / (len(values) - 1), len(values) - 1)
    return out


def load_cells(path: Path) -> dict[str, tuple[float, int]]:
    """A machine's history's cells (none in the package's prior)."""
    doc = json.loads(path.read_text())
    return {k: (float(v[0]), int(v[1])) for k, v in doc.get("cells", {}).items()}


def load(path: Path = NOISE) -> dict[str, Noise]:
    doc = json.loads(path.read_text())
    return {k: Noise(**v) for k, v in doc["models"].items()}


def source(path: Path = NOISE) -> dict:
    return json.loads(path.read_text())["source"]


def log_ratios(runs: list[dict]) -> dict[tuple[str, str], list[float]]:
    """Every cell's log ratio between every pair of one machine's runs (each run's cells,
    as compare reads them), by (kind, family)."""
    import itertools

    out: dict[tuple[str, str], list[float]] = {}
    for a, b in itertools.combinations(runs, 2):
        for name in set(a) & set(b):
            c = a[name]
            if not (c.medians and b[name].medians):  # failed in one of them
                continue
            out.setdefault(kind_of(c.task, c.network), []).append(
                math.log(b[name].medians[0] / a[name].medians[0])
            )
    return out


def model_for(models: dict[str, Noise], task: str, network: str) -> Noise:
    """The model of a cell: its family's, else its kind's, else the widest fitted."""
    kind, family = kind_of(task, network)
    found = models.get(f"{kind} {family}") or models.get(kind)
    return found or max(models.values(), key=lambda m: m.scale)


def floor(task: str, network: str, models: dict[str, Noise] | None = None) -> float:
    """How far one run's median of such a cell may land from another run's on one machine,
    as a share: the half-width of its kind's 95 % interval, one run a side."""
    from scipy.stats import t

    model = model_for(models or load(), task, network)
    return math.exp(float(t.ppf(0.975, model.df)) * model.scale) - 1
