"""From runs to the report's content: the machines (column groups of runs), the base
machine and the prices, and what each suite derives from its records (its Hooks.build:
Table 7's blocks, per-cell figures, summaries against the base machine and what money
buys are the network suite's, xfbench/networks/report/model.py).

Everything here is plain data; the md and html renderers and the suites only lay it out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xfbench.report import suites
from xfbench.report.load import Result, Run, same_cell

DTYPES = {
    "float32": "fp32",
    "fp32": "fp32",
    "f32": "fp32",
    "tf32": "tf32",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "f16": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float64": "fp64",
    "fp64": "fp64",
    "double": "fp64",
}


def dtype_name(value: Any) -> str:
    return DTYPES.get(str(value).lower(), str(value).lower())


@dataclass
class Machine:
    """One column group: the runs of one machine (runs of the same machine are merged
    unless they measured the same cells, in which case each is its own group)."""

    label: str  # machine label, made unique with the run name when needed
    host: str
    base_label: str  # machine label as written (host: CPU + GPUs)
    short: str  # host name (with the run names when one host ran twice)
    tag: str = ""  # "A", "B", ...: column-header prefix when there are several
    runs: list[Run] = field(default_factory=list)
    prices: dict[str, float] = field(default_factory=dict)
    # every suite's records (report/suites.py), and their failed cells, by kind
    records: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.runs]

    def of(self, kind: str) -> list[dict]:
        """The records of one suite's kind (report/suites.py), and its failed cells."""
        return self.records.get(kind, [])


def group_machines(runs: list[Run]) -> list[Machine]:
    """Column groups: each run in the first group of its machine none of whose cells it
    measured again, else in one of its own."""
    machines: list[Machine] = []
    scoring = [s.hooks.scored for s in suites.declared() if s.hooks.scored]
    for run in runs:
        target = _machine_of(run, _measured(run, scoring), machines, scoring)
        target.runs.append(run)
        for kind, found in run.records.items():
            target.records.setdefault(kind, []).extend(found)
    _label(machines)
    return machines


def _measured(run: Run, scoring: list) -> set[tuple]:
    """The cells a run measured, timed or failed: every suite's scored records
    (Hooks.scored), each by what makes it the same cell as another (report.load.same_cell)."""
    return {same_cell(r) for scored in scoring for r in scored(run)}


def _machine_of(run: Run, cells: set[tuple], machines: list[Machine], scoring: list) -> Machine:
    """The group a run joins (cells: those it measured): the first of its machine's label
    none of whose cells it measured again, else a new one (added to machines)."""
    for m in machines:
        if m.base_label != run.machine["label"]:
            continue  # only its own machine's groups: their cells are worth reading
        if not cells & {c for other in m.runs for c in _measured(other, scoring)}:
            return m
    target = Machine(
        label=run.machine["label"],
        host=run.machine["host"],
        base_label=run.machine["label"],
        short=run.machine["host"],
    )
    machines.append(target)
    return target


def _label(machines: list[Machine]) -> None:
    """Each group's label, short name and tag, told apart where they would be alike."""
    # Same machine measured by separate runs: tell the groups apart by run name.
    for m in machines:
        twins = [o for o in machines if o.base_label == m.base_label]
        if len(twins) > 1:
            m.label = f"{m.base_label} [{', '.join(m.names)}]"
            m.short = f"{m.host} [{', '.join(m.names)}]"
    labels = [m.label for m in machines]
    for i, m in enumerate(machines):
        m.tag = chr(ord("A") + i) if i < 26 else f"M{i + 1}"
        if labels.count(m.label) > 1:  # runs of the same name, too
            m.label, m.short = f"{m.label} ({m.tag})", f"{m.short} ({m.tag})"
    hosts = [m.short for m in machines]
    for m in machines:
        if hosts.count(m.short) > 1:  # same host name, different hardware
            m.short = m.base_label


def find_machine(machines: list[Machine], name: str) -> Machine | None:
    """A machine by label, host or run name, or by a part of its label; None when the
    name matches none or several."""
    for test in (
        lambda m: name in (m.label, m.base_label),
        lambda m: name == m.host or name in m.names,
        lambda m: name.lower() in m.label.lower(),
    ):
        hits = [m for m in machines if test(m)]
        if hits:
            return hits[0] if len(hits) == 1 else None
    return None


@dataclass(kw_only=True)
class Report:
    machines: list[Machine]
    base: Machine | None  # the machine the others are compared with, side by side
    problems: list[str]
    with_paper: bool
    # what each suite with a report of its own derives from its records (its `build`,
    # report/suites.py), by its record kind
    suite_models: dict[str, Any] = field(default_factory=dict)
    notes_given: int = 0  # the footnotes numbered so far, in the suites' declared order

    def next_note(self) -> int:
        """The next footnote's number, after those given before."""
        self.notes_given += 1
        return self.notes_given

    # each machine's scores against its reference (report.score.Scores, None: no reference
    # shares a workload), filled by report.render
    scores: list[tuple[Machine, Any]] = field(default_factory=list)


def format_seconds(value: float) -> str:
    return f"{value:.4g}" if value >= 1e-3 else f"{value:.3g}"


def interval(r: Result) -> tuple[float, float, float] | None:
    """(median, low, high) of a timed result whose record has a confidence interval."""
    low, high = r.info.get("ci_low_s"), r.info.get("ci_high_s")
    if r.median is None or not isinstance(low, int | float) or not isinstance(high, int | float):
        return None
    return r.median, float(low), float(high)


def plus_minus(r: Result) -> str:
    """ " ±3%": half the median's interval, or nothing for a record without one."""
    ci = interval(r)
    if ci is None or ci[0] <= 0:
        return ""
    return f" ±{(ci[2] - ci[1]) / 2 / ci[0] * 100:.0f}%"


def network_title(network: str) -> str:
    """The network as a report heads it; the transformers are marked as beyond the paper
    (Shi et al.'s Table 7 has no row for them), and come after its rows."""
    from xfbench.models import TRANSFORMERS, get_spec

    try:
        beyond = ", beyond the paper" if network in TRANSFORMERS else ""
        return f"{get_spec(network).paper_name} ({network}{beyond})"
    except (KeyError, ValueError):
        return network


def measured_peaks(m: Machine) -> dict[tuple[str, str, int | None], tuple[float, str]]:
    """The best TFLOP/s the suites measured on a machine (their report's `peaks`,
    report/suites.py) per (device: "cpu" or the GPU's name, dtype, CPU threads or None for
    any), with the suite that measured it."""
    found: dict[tuple[str, str, int | None], tuple[float, str]] = {}
    for suite in suites.declared():
        for key, tflops in ((suite.hooks.peaks or (lambda m: {}))(m)).items():
            if key not in found or tflops > found[key][0]:
                found[key] = (tflops, suite.name)
    return found


def achieved_tflops(r: Result) -> float | None:
    flops = r.info.get("flops_per_step")
    if isinstance(flops, (int, float)) and flops > 0 and r.median > 0:
        return flops / r.median / 1e12
    value = r.info.get("achieved_tflops")
    return float(value) if isinstance(value, (int, float)) else None


def _prices_for(m: Machine, prices: dict[str, dict[str, float]]) -> tuple[str, dict] | None:
    for key in (m.label, m.base_label, m.host, *m.names):
        if key in prices:
            return key, prices[key]
    return None


def _base_machine(machines: list[Machine], base: str | None) -> Machine | None:
    """The machine the others are compared with (the first unless `base` names one);
    ValueError when base names none."""
    if len(machines) < 2 and not base:
        return None
    found = find_machine(machines, base) if base else machines[0]
    if found is None:
        raise ValueError(
            f"--base {base!r} names no single machine; machines: "
            + "; ".join(m.label for m in machines)
        )
    return found


def _priced(machines: list[Machine], prices: dict[str, dict[str, float]]) -> list[str]:
    """Each machine's prices (Machine.prices); a problem per price matching no machine."""
    used = set()
    for m in machines:
        hit = _prices_for(m, prices)
        if hit:
            used.add(hit[0])
            m.prices = hit[1]
    return [f"prices for {k!r} match no machine in the results" for k in prices if k not in used]


def build(
    runs: list[Run],
    *,
    with_paper: bool = False,
    base: str | None = None,
    prices: dict[str, dict[str, float]] | None = None,
) -> Report:
    """The report's content. `base` names a machine (label, host or run name);
    ValueError when it names none."""
    machines = group_machines(runs)
    problems = [p for run in runs for p in run.problems]
    ref = _base_machine(machines, base)
    priced = _priced(machines, prices) if prices else []
    report = Report(machines=machines, base=ref, problems=problems, with_paper=with_paper)
    for suite in suites.declared():
        if suite.hooks.build:  # it may add its notes to report.problems
            report.suite_models[suite.kind] = suite.hooks.build(report)
    report.problems += priced  # after the suites' notes on their records
    return report
