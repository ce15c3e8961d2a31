"""The report's main tables (Table 7, the machines, the scores, ...) as plain rows of text
(report/table.py), shared by the Markdown and HTML renderers."""

from __future__ import annotations

from xfbench.harness.threads import legend
from xfbench.report import suites
from xfbench.report.model import Report, col_label, network_title, row_key, row_label
from xfbench.report.table import Table, Text, as_text, number_text


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
    infos = [r.info for r in m.results.values()]
    measured = [i for i in infos if isinstance(i.get("samples_per_kj"), int | float)]
    if measured:
        methods = sorted({str(i.get("energy_method")) for i in measured})
        return f"measured in {len(measured)} of {len(infos)} cells ({', '.join(methods)})"
    reasons = sorted({str(i["energy_reason"]) for i in infos if i.get("energy_reason")})
    return "not measured" + (f": {'; '.join(reasons)}" if reasons else "")


def numbers_status(m) -> str:
    """The preset and rounds of a machine's cells and the coverage of their ± intervals."""
    from xfbench.harness.stats import METHOD

    infos = [r.info for r in m.results.values()]
    # the suites' own cells (serving's: LoadGen's durations)
    served = [i for found in m.records.values() for i in found if i.get("preset")]
    presets = sorted({str(i["preset"]) for i in infos + served if i.get("preset")})
    rounds = sorted({r.info.get("rounds") for r in m.results.values()} - {None})
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


def verdict(a, b, floor: float = 0.0) -> str:
    """How two timed results compare: "1.45x (CI 1.38-1.52x)" when a is faster beyond
    noise, else "within noise (1.02x, CI 0.97-1.08x)"; the ratio is b's time over a's.
    floor: results of two runs (two machines), whose interval is widened by the
    run-to-run noise of the kind of workload (report/noise.py)."""
    from xfbench.harness.stats import ratio_ci
    from xfbench.report.model import interval

    ia, ib = interval(a), interval(b)
    if ia is None or ib is None:
        ratio = b.median / a.median
        if floor and 1 / (1 + floor) <= ratio <= 1 + floor:
            return f"within the run-to-run floor ({ratio:.3g}x, floor +-{floor:.0%})"
        return f"{ratio:.3g}x (no interval recorded)"
    ratio, low, high, _ = ratio_ci(ib, ia)
    low, high = low / (1 + floor), high * (1 + floor)
    text = f"{ratio:.3g}x, CI {low:.3g}-{high:.3g}x" + (
        f" with the run-to-run floor +-{floor:.0%}" if floor else ""
    )
    return f"within noise ({text})" if low <= 1 <= high else f"{ratio:.3g}x faster ({text})"


def fastest_table(report: Report) -> Table | None:
    """Per network and column (threads or device), which framework and mode is fastest,
    and by how much over the next, or that the two are within noise: the question a
    reader comes with, answered before the tables it is read from."""
    from xfbench.models import NETWORKS

    order = {n: i for i, n in enumerate(NETWORKS)}
    rows = []
    tasks = suites.cell_tasks()
    for block in sorted(
        report.blocks, key=lambda b: (tasks.get(b.key[0], len(tasks)), order.get(b.key[1], 99))
    ):
        for ci, col in enumerate(block.columns):
            timed = sorted(
                (row.cells[ci].result for row in block.rows if row.cells[ci].value is not None),
                key=lambda r: r.median,
            )
            if len(timed) < 2:
                continue
            first, second = timed[0], timed[1]
            rows.append(
                [
                    as_text(block.title),
                    as_text(col.label),
                    as_text(row_label(row_key(first))),
                    as_text(row_label(row_key(second))),
                    as_text(verdict(first, second)),
                ]
            )
    if not rows:
        return None
    return Table(
        "Fastest per network",
        ["network", "column", "fastest", "next", "fastest over next"],
        rows,
        anchor="fastest",
        text_cols=5,
        caption="The ratio is the next one's median time over the fastest's; its interval "
        "is [low / high, high / low] of the two medians' confidence intervals over their "
        "rounds, and where it contains 1 the two are within the rounds' noise "
        "(docs/measurement.md, Confidence intervals; between runs, docs/reports.md).",
    )


def machines_compared_table(report: Report) -> Table | None:
    """Each cell two machines both measured, the base machine against each other one:
    which is faster and by how much, or within noise (their intervals' ratio, widened by
    the run-to-run noise of the cell's kind, report/noise.py, contains 1)."""
    from xfbench.report.noise import floor

    if len(report.machines) < 2 or report.base is None:
        return None
    ref = report.base
    rows = []
    for block in report.blocks:
        for row in block.rows:
            mine = {
                block.columns[ci].key: cell.result
                for ci, cell in enumerate(row.cells)
                if cell.value is not None
                and block.columns[ci].machine == report.machines.index(ref)
            }
            for ci, cell in enumerate(row.cells):
                col = block.columns[ci]
                other = report.machines[col.machine]
                if other is ref or cell.value is None or col.key not in mine:
                    continue
                a, b = mine[col.key], cell.result
                fast, slow, who = (a, b, ref.tag) if a.median <= b.median else (b, a, other.tag)
                rows.append(
                    [
                        as_text(block.title),
                        as_text(row.label),
                        as_text(col_label(col.key)),
                        as_text(f"{ref.tag} vs {other.tag}"),
                        as_text(f"{who}: " + verdict(fast, slow, floor(*block.key[:2]))),
                    ]
                )
    if not rows:
        return None
    return Table(
        "Machines compared, cell by cell",
        ["network", "framework / mode", "column", "machines", "faster"],
        rows,
        anchor="machines-compared",
        text_cols=5,
        caption="Ratios and intervals as in the fastest-per-network table, each interval "
        "widened by the run-to-run noise of its kind of workload (two machines are "
        "two runs, and what moves a run is in no run's rounds: docs/reports.md): within "
        "noise where it contains 1.",
    )


def backends_table(report: Report) -> Table | None:
    """Per machine and framework, the kernels its cells ran, as each framework reported
    them (a record's "backend"): what two machines' numbers actually compare."""
    several = len(report.machines) > 1
    rows = []
    for m in report.machines:
        seen: dict[str, dict[str, int]] = {}
        for run in m.runs:
            for r in run.results:
                if r.ok and r.info.get("backend"):
                    per = seen.setdefault(r.framework, {})
                    per[str(r.info["backend"])] = per.get(str(r.info["backend"]), 0) + 1
        for framework, backends in sorted(seen.items()):
            text = "; ".join(
                f"{b} ({n} cell{'s' if n != 1 else ''})" for b, n in sorted(backends.items())
            )
            rows.append(([as_text(m.tag)] if several else []) + [as_text(framework), as_text(text)])
    if not rows:
        return None
    return Table(
        "Backends",
        (["tag"] if several else []) + ["framework", "kernels that ran (cells)"],
        rows,
        anchor="backends",
        text_cols=3 if several else 2,
    )


def summary_table(report: Report) -> Table | None:
    if not report.summaries:
        return None

    def g(value, n):
        return f"{value:.3g}x ({n} cells)" if value is not None else f"- ({n} cells)"

    rows = [
        [
            as_text(s.machine.label),
            as_text(g(s.geomean, s.cells)),
            as_text(g(s.cpu_geomean, s.cpu_cells)),
            as_text(g(s.acc_geomean, s.acc_cells)),
        ]
        for s in report.summaries
    ]
    return Table(
        f"Against {report.base.label}",
        ["machine", "speedup, all shared cells", "CPU cells", "accelerator cells"],
        rows,
        caption="Geometric mean over the cells both machines ran of (the base machine's "
        "seconds / this machine's seconds): above 1 is faster than the base. CPU cells "
        "are matched by thread count, accelerator cells by device index.",
        anchor="summary",
        text_cols=1,
    )


def _measured_energy(d) -> tuple[str, str]:
    """(J per sample, samples per kJ) from the cell's own record, with its method, or
    "not measured" and the record's reason."""
    info = d.result.info
    jps, spk = info.get("joules_per_sample"), info.get("samples_per_kj")
    if isinstance(jps, int | float) and isinstance(spk, int | float):
        method = info.get("energy_method", "?")
        return f"{jps:.3g} ({method})", f"{spk:.4g} ({method})"
    return "not measured", "not measured"


PROCUREMENT_HEADERS = [
    "network",
    "machine",
    "fastest cell",
    "samples/s",
    "price (date, source)",
    "samples/s per $",
    "$ per million samples",
    "J per sample (measured)",
    "samples per kJ (measured)",
]
TYPED_HEADERS = ["samples/s per W (typed power)", "kWh per million samples (typed power)"]
PROCUREMENT_CAPTION = (
    "Each network's fastest cell on each machine that has an entry in the prices file. $ "
    "per million samples uses the hourly price. Energy is the cell's own, measured over its "
    "timed rounds by the method named (harness/energy.py); 'not measured' where the machine "
    "gave no counter (the record says why)."
)


def procurement_table(report: Report) -> Table | None:
    if not report.buys:
        return None
    typed = any("watts" in b.machine.prices for b in report.buys)
    return Table(
        "Procurement",
        PROCUREMENT_HEADERS + (TYPED_HEADERS if typed else []),
        [_buy_row(b, typed) for b in report.buys],
        caption=PROCUREMENT_CAPTION
        + (
            " The typed-power columns divide by the watts typed into the prices file: "
            "they are not measurements."
            if typed
            else ""
        ),
        anchor="procurement",
        text_cols=5,
    )


def _buy_row(b, typed: bool) -> list[Text]:
    f, p = b.figures, b.machine.prices
    jps, spk = _measured_energy(b.best)
    prices = (
        f"${p['price_usd']:,.0f}" if "price_usd" in p else "",
        f"${p['price_per_hour_usd']:g}/h" if "price_per_hour_usd" in p else "",
    )
    price = ", ".join(x for x in prices if x)
    if price:
        price += f" ({p.get('price_date')}, {p.get('price_source')})"
    typed_cells = [
        as_text(number_text(f["samples_per_s_per_watt_typed"], ".3g")),
        as_text(number_text(f["kwh_per_million_samples_typed"], ".3g")),
    ]
    return [
        as_text(f"{network_title(b.block[1])} {b.block[0]}, batch {b.block[2]}"),
        as_text(b.machine.label),
        as_text(f"{row_label(b.best.row)} on {col_label(b.best.col)}"),
        as_text(number_text(b.best.samples_per_s, ".4g")),
        as_text(price or "-"),
        as_text(number_text(f["samples_per_s_per_usd"], ".3g")),
        as_text(number_text(f["usd_per_million_samples"], ".3g")),
        as_text(jps),
        as_text(spk),
    ] + (typed_cells if typed else [])


def procurement_summary(report: Report) -> Table | None:
    """The answer first, when prices are given: per network, the fastest machine, the most
    samples/s per dollar, and the most samples per kJ measured."""
    if not report.buys:
        return None
    by_block: dict = {}
    for b in report.buys:
        by_block.setdefault(b.block, []).append(b)
    rows = []
    for block, buys in by_block.items():
        fastest = max(buys, key=lambda b: b.best.samples_per_s)
        per_usd = [b for b in buys if b.figures["samples_per_s_per_usd"]]
        cheapest = max(per_usd, key=lambda b: b.figures["samples_per_s_per_usd"], default=None)
        measured = [
            b for b in buys if isinstance(b.best.result.info.get("samples_per_kj"), int | float)
        ]
        frugal = max(measured, key=lambda b: b.best.result.info["samples_per_kj"], default=None)
        rows.append(
            [
                as_text(f"{network_title(block[1])} {block[0]}, batch {block[2]}"),
                as_text(f"{fastest.machine.label} ({fastest.best.samples_per_s:.4g} samples/s)"),
                as_text(
                    f"{cheapest.machine.label} "
                    f"({cheapest.figures['samples_per_s_per_usd']:.3g} samples/s per $)"
                    if cheapest
                    else "no purchase price given"
                ),
                as_text(
                    f"{frugal.machine.label} ({frugal.best.result.info['samples_per_kj']:.4g} "
                    f"samples per kJ, {frugal.best.result.info.get('energy_method')})"
                    if frugal
                    else "not measured on any machine"
                ),
            ]
        )
    return Table(
        "Procurement summary",
        ["network", "fastest machine", "most per $", "most per kJ (measured)"],
        rows,
        caption="From the procurement table below: each network's fastest cell per machine.",
        anchor="procurement-summary",
        text_cols=4,
    )
