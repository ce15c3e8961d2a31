"""The report's own tables (the scores, the machines) as plain rows of text
(report/table.py), shared by the Markdown and HTML renderers; Table 7's are the network
suite's (xfbench/networks/report/)."""

from __future__ import annotations

from xfbench.harness.threads import legend
from xfbench.report import suites
from xfbench.report.model import Report
from xfbench.report.table import Table, Text, as_text


def legend_caption(infos) -> str:
    """The caption under a table: what its marks mean, one sentence each."""
    return " ".join(f"{line}." for line in legend(infos))


def layout(topology: dict) -> str:
    """ "2 sockets, 2 NUMA nodes, 2 L3 domains, SMT 2" from the machine record's topology of
    the CPUs the run could use ("?" in files from before it was recorded)."""
    if not topology:
        return "?"

    def count(n, what):
        return f"{n} {what}{'s' * (n != 1)}"

    smt = topology.get("smt_siblings") or []
    return ", ".join(
        [
            count(topology.get("sockets", 0), "socket"),
            count(len(topology.get("numa_nodes") or []), "NUMA node"),
            count(len(topology.get("l3_domains") or []), "L3 domain"),
            f"SMT {max(len(g) for g in smt)}" if smt else "no SMT",
        ]
    )


def machines_table(report: Report) -> Table:
    several = len(report.machines) > 1
    rows = []
    for m in report.machines:
        first = m.runs[0].machine
        mem = first.get("memory_bytes")
        cores = f"{first.get('cores_physical') or '?'} / {first.get('cores_logical') or '?'}"
        rows.append(
            ([as_text(m.tag)] if several else [])
            + [
                as_text(m.label),
                as_text(cores),
                as_text(layout(first.get("topology") or {})),
                as_text(f"{mem / 2**30:.0f}" if mem else "?"),
                as_text(" ".join(first.get("isa") or []) or "?"),
                as_text(", ".join(first["gpus"]) or "none"),
                as_text(first.get("software") or "?"),
                as_text(first.get("commit") or "?"),
                as_text(
                    ", ".join(
                        f"{r.name} ({r.files} file{'s' if r.files != 1 else ''})" for r in m.runs
                    )
                ),
                as_text("base" if m is report.base else ""),
            ]
        )
    return Table(
        "Machines",
        (["tag"] if several else [])
        + [
            "machine",
            "cores (phys / logical)",
            "CPUs' layout",
            "memory GiB",
            "CPU ISA",
            "GPUs",
            "libraries and runtimes",
            "xfbench commit",
            "runs",
            "role",
        ],
        rows,
        anchor="machines",
        text_cols=11 if several else 10,
        caption="Table 7's column headers start with the machine's tag." if several else "",
    )


def energy_status(m) -> str:
    """Whether a machine's cells measured their energy: how many, by what method, or why
    not (the records' energy_reason)."""
    infos = [r.info for r in suites.timed_cells(m)]
    measured = [i for i in infos if isinstance(i.get("samples_per_kj"), int | float)]
    if measured:
        methods = sorted({str(i.get("energy_method")) for i in measured})
        return f"measured in {len(measured)} of {len(infos)} cells ({', '.join(methods)})"
    reasons = sorted({str(i["energy_reason"]) for i in infos if i.get("energy_reason")})
    return "not measured" + (f": {'; '.join(reasons)}" if reasons else "")


def numbers_status(m) -> str:
    """The preset and rounds of a machine's cells and the coverage of their ± intervals."""
    from xfbench.harness.stats import METHOD

    cells = suites.timed_cells(m)
    infos = [r.info for r in cells]
    # the suites' own cells (serving's: LoadGen's durations)
    served = [
        i for found in m.records.values() for i in found if isinstance(i, dict) and i.get("preset")
    ]
    presets = sorted({str(i["preset"]) for i in infos + served if i.get("preset")})
    rounds = sorted({r.info.get("rounds") for r in cells} - {None})
    levels = sorted({i["ci_level"] for i in infos if isinstance(i.get("ci_level"), int | float)})
    text = f"preset {', '.join(presets) or '?'}"
    if rounds:
        text += f", {rounds[0]}" + (f" to {rounds[-1]}" if rounds[-1] != rounds[0] else "")
        text += " timed rounds per cell"
    if levels:
        text += (
            f"; ± is half the interval of this run's median at {_levels(levels)} coverage "
            f"({METHOD}; 95 % needs 6 rounds or more): its rounds' noise, not another run's "
            "(measured, it held the median of ten runs pooled 54 % of the time; between runs "
            "see xfbench compare, docs/reports.md)"
        )
    return text


def _levels(levels: list[float]) -> str:
    low, high = levels[0] * 100, levels[-1] * 100
    return f"{low:.0f} %" if round(low) == round(high) else f"{low:.0f} % to {high:.0f} %"


SCORES_CAPTION = (
    "Machine score: each workload (network, task, framework, precision class) at each "
    "machine's best configuration (threads, device, mode, batch, copies), the geometric "
    "mean of the reference's seconds per sample over this machine's, each network "
    "weighing the same; above 1 is faster. Per-core score: the same cells at the same "
    "thread count or device, one process. "
)


def answer_table(report: Report) -> Table | None:
    """The report's opening: each machine's machine score and per-core score against its
    reference, with intervals, what energy was measured and what the numbers below are;
    under it, each machine's winning configurations."""
    from xfbench.report import score

    if not report.scores:
        return None
    several = len(report.machines) > 1
    rows, subs, notes = [], [], []
    for m, s in report.scores:
        if s is None:
            machine = per_core = Text("no reference shares a workload")
            ref = Text("")
        else:
            machine = Text(score.value_text(s.machine))
            per_core = Text(score.value_text(s.per_core) if s.per_core.value else "none")
            ref = Text(s.reference)
            if s.machine.differ_in_kind:
                notes.append(f"{m.tag or m.label}: the machine and its reference differ in kind")
            subs.append(_winners_table(m, s, several))
        rows.append(
            ([Text(m.tag)] if several else [])
            + [Text(m.label), machine, per_core, ref]
            + [Text(energy_status(m)), Text(numbers_status(m))]
        )
    first = next((s for _, s in report.scores if s is not None), None)
    caption = (
        SCORES_CAPTION
        + (score.interval_note(first.machine) + ". " if first else "")
        + " ".join(f"{n}." for n in notes)
    )
    headers = ["machine", "machine score", "per-core score", "reference", "energy"]
    return Table(
        "Scores",
        (["tag"] if several else []) + headers + ["numbers below"],
        rows,
        caption=caption,
        anchor="scores",
        text_cols=7 if several else 6,
        sub=subs,
    )


def _winners_table(m, s, several: bool) -> Table:
    """A machine's best configuration per workload against its reference's."""
    widest = "; ".join(
        f"{w.workload} ({w.variance_share:.0%} of the interval's variance)"
        for w in s.machine.widest
    )
    failed = f": {', '.join(s.failed_names)}" if s.failed_names else ""
    return Table(
        f"{m.tag + ': ' if several else ''}best configuration per workload (against {s.reference})",
        ["workload", "best here", "best in the reference", "ratio"],
        [
            [Text(w.workload), Text(w.here), Text(w.there), Text(f"{w.ratio:.3g}")]
            for w in s.machine.winners
        ],
        text_cols=3,
        caption=f"Widest: {widest}. {s.failed} of {s.total} cells failed{failed}.",
    )
