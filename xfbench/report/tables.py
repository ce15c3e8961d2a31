"""The report's main tables (Table 7, the machines, the scores, ...) as plain rows of text
(report/table.py), shared by the Markdown and HTML renderers."""

from __future__ import annotations

from dataclasses import dataclass

from xfbench.harness.threads import legend, marks
from xfbench.report import paper, suites
from xfbench.report.model import Block, Report, col_label, network_title, row_key, row_label
from xfbench.report.table import Table, Text, as_text, number_text


def _mb(value) -> str:
    return (
        f"{value / 2**20:.0f}"
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else number_text(value, "")
    )


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


COPIES_HEADERS = [
    "cell",
    "copies",
    "CPUs of each copy",
    "each copy's median s",
    "aggregate samples/s",
    "one process on as many CPUs, samples/s",
    "spread",
    "overlap",
]
COPIES_CAPTION = (
    "Each copy is its own process pinned to its own CPUs with its own threads; the copies "
    "start their timed rounds together and keep stepping until the last has finished. "
    "Aggregate: the sum of batch over each copy's median. Spread: slowest minus fastest "
    "copy's median over their median. Overlap: the least share of a copy's timed rounds "
    "during which every copy was running. The machine score takes the better of copies and "
    "one process. "
)


def copies_table(report: Report) -> Table | None:
    """Cells run as several copies at once (--copies): which CPUs each copy had, each copy's
    median, their aggregate samples/s beside one process on all those CPUs, the spread
    between copies and how far their timed rounds overlapped."""
    several = len(report.machines) > 1
    rows = [
        ([Text(m.tag)] if several else []) + _copies_row(m, r)
        for m in report.machines
        for r in sorted(m.copies, key=lambda r: (r.task, r.network, r.framework, r.threads))
    ]
    if not rows:
        return None
    return Table(
        "Throughput past one process",
        (["tag"] if several else []) + COPIES_HEADERS,
        rows,
        caption=COPIES_CAPTION + legend_caption(r.info for m in report.machines for r in m.copies),
        anchor="copies",
        text_cols=4 if several else 3,
    )


def _copies_row(m, r) -> list[Text]:
    info = r.info
    label = f"{r.network} {r.task}, {row_label(row_key(r))}, batch {r.batch_size}"
    head = [Text(label), Text(f"{r.copies} x {r.threads}t")]
    if not r.ok:
        return head + [Text(f"{r.status}: {r.reason}")] + [Text("")] * 5
    one = m.results.get(
        ((r.task, r.network, r.batch_size, r.scale), row_key(r), ("cpu", r.copies * r.threads))
    )
    overlap = number_text(info.get("copies_overlap"), ".0%") + (
        "" if info.get("copies_together", True) else " (not together)"
    )
    return head + [
        Text(" | ".join(",".join(map(str, c)) for c in info.get("copy_cpus") or [])),
        Text(", ".join(f"{x:.4g}" for x in info.get("copy_medians_s") or [])),
        Text(number_text(info.get("aggregate_samples_per_s"), ".4g") + marks(info)),
        Text(f"{one.batch_size / one.median:.4g}" if one and one.ok else "-"),
        Text(number_text(info.get("copies_spread"), ".1%")),
        Text(overlap),
    ]


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


def compact_table7(report: Report) -> Table | None:
    """Table 7 as the paper lays it out: one table, networks down (its order: the fully
    connected nets, AlexNets, ResNets, LSTMs), each framework and mode at each thread
    count or device across. A cell is the median with its ±, and, where several
    frameworks ran that column, how many times the column's fastest it takes ("1.6x");
    the fastest is bold."""
    if not report.blocks:
        return None
    from xfbench.models import NETWORKS

    order = {n: i for i, n in enumerate(NETWORKS)}
    tasks = suites.cell_tasks()
    blocks = sorted(
        report.blocks, key=lambda b: (tasks.get(b.key[0], len(tasks)), order.get(b.key[1], 99))
    )
    columns = _compact_columns(blocks)
    several = len(report.machines) > 1
    headers = ["network"] + [
        (f"{report.machines[mi].tag}: " if several else "") + f"{row_label(rk)}, {col_label(ck)}"
        for rk, ck, mi in columns
    ]
    infos = [c.result.info for b in blocks for r in b.rows for c in r.cells if c.result]
    return Table(
        "Table 7, seconds per mini-batch (one table)",
        headers,
        [_compact_row(block, columns) for block in blocks],
        anchor="table7",
        text_cols=1,
        caption="Median ± half its confidence interval over this run's rounds; (Nx): how many times the fastest of "
        "that column it takes; the fastest is bold. " + legend_caption(infos),
    )


def _compact_columns(blocks) -> list[tuple]:
    """The one table's columns, (row key, column key, machine): each machine's, its CPU
    thread counts before its devices, frameworks in their declared order."""
    from xfbench.frameworks import FRAMEWORKS

    columns: list = []
    for block in blocks:
        for row in block.rows:
            for col in block.columns:
                key = (row.key, col.key, col.machine)
                if key not in columns:
                    columns.append(key)
    fw = {name: i for i, name in enumerate(FRAMEWORKS)}
    return sorted(
        columns,
        key=lambda k: (k[2], k[1][0] != "cpu", str(k[1][1]).zfill(4), fw.get(k[0][0], 99), k[0]),
    )


def _compact_row(block, columns: list[tuple]) -> list[Text]:
    """A network's row: each column's cell, with its times the column's fastest."""
    cells = {}
    for row in block.rows:
        for ci, col in enumerate(block.columns):
            cells[(row.key, col.key, col.machine)] = row.cells[ci]
    best: dict = {}
    for (_, ck, mi), cell in cells.items():
        if cell.value is not None:
            best[(ck, mi)] = min(best.get((ck, mi), cell.value), cell.value)
    out = [as_text(block.title)]
    for key in columns:
        cell = cells.get(key)
        if cell is None:
            out.append(as_text(""))
            continue
        text = cell.text
        runners = sum(1 for (_, ck, mi), c in cells.items() if (ck, mi) == key[1:] and c.value)
        if cell.value is not None and runners > 1:
            ratio = cell.value / best[key[1:]]
            text += "" if ratio == 1 else f" ({ratio:.2g}x)"
        out.append(Text(text, best=cell.value is not None and cell.value == best.get(key[1:])))
    return out


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


def table7(
    block: Block, group_names: list[str] | None = None, tags: list[str] | None = None
) -> Table:
    verified = any(row.verified for row in block.rows)
    headers = (
        ["framework / mode"]
        + (["verified identical"] if verified else [])
        + [c.label for c in block.columns]
    )
    rows = []
    for row in block.rows:
        cells = [Text(c.text, best=c.best, note=c.footnote) for c in row.cells]
        rows.append([as_text(row.label)] + ([as_text(row.verified)] if verified else []) + cells)
    lead = 1 + verified
    if block.paper:
        rows += _paper_rows(block, verified)
    table = Table(
        block.title,
        headers,
        rows,
        anchor=f"t7-{block.slug}",
        text_cols=lead,
        caption=legend_caption(c.result.info for row in block.rows for c in row.cells if c.result),
    )
    machines = [c.machine for c in block.columns]
    if group_names and len(group_names) > 1:  # several machines: a header over each group
        table.groups = [("", lead)] + [
            (f"{tags[mi]}: {group_names[mi]}", machines.count(mi)) for mi in dict.fromkeys(machines)
        ]
        table.short_headers = headers[:lead] + [c.short_label for c in block.columns]
    if block.paper:
        p = block.paper
        ours = block.key[2]
        note = (
            ""
            if p.batch == ours
            else f" The paper's mini-batch was {p.batch}, ours {ours}: not comparable cell for cell."
        )
        table.sub.append(
            Table(
                f"Shi et al. 2016, {p.row} (paper's machines)",
                ["tool"] + list(p.labels),
                [
                    [as_text(paper.tool_label(tool))] + [as_text(x) for x in texts]
                    for tool, texts in p.tools
                ],
                caption=f"{paper.table().machines}{note}",
            )
        )
    return table


def _paper_rows(block: Block, verified: bool) -> list[list[Text]]:
    """The paper's tools under our CPU columns of the same thread count, one row per tool
    and paper machine (its desktop and its server), so 1t sits under 1t; accelerator
    columns stay blank, the paper's GPUs being others. Rows with nothing under our
    columns are left to the full table below, as are blocks run at another batch size."""
    if block.paper.batch != block.key[2]:
        return []
    rows = []
    for machine, name in (("desktop", "i7-3820"), ("server", "2x E5-2630 v3")):
        for tool, values in block.paper.values:
            cells = [
                paper.aligned(values, machine, c.key[1]) if c.key[0] == "cpu" else None
                for c in block.columns
            ]
            if any(v is not None for v in cells):
                label = f"Shi et al.: {paper.tool_label(tool)}, {machine} ({name})"
                rows.append(
                    [as_text(label)]
                    + ([as_text("")] if verified else [])
                    + [as_text("-" if v is None else f"{v:.3f}") for v in cells]
                )
    return rows


def _real_data_cells(info: dict) -> list[Text]:
    """--data real: the median wait for a batch with its share of the step, the throughput
    with the batch resident (against samples/s, which is end to end), and the verdict."""
    if info.get("data") != "real":
        return [as_text("-"), as_text("-"), as_text("-")]
    wait, share = info.get("data_wait_s"), info.get("data_wait_share")
    return [
        as_text(f"{number_text(wait, '.3g')} s ({number_text(share and share * 100, '.0f')}%)"),
        as_text(number_text(info.get("samples_per_s_resident"), ".4g")),
        as_text("yes" if info.get("input_bound") else "no"),
    ]


@dataclass(frozen=True)
class _DetailColumns:
    """Which of the details table's optional columns a block shows."""

    several: bool  # machines: a column naming each
    share: bool  # a peak measured (model.measured_peaks): the cells' share of it
    real: bool  # real-data rows beside the synthetic ones
    tokens: bool  # the transformers: tokens/s beside samples/s

    def headers(self) -> list[str]:
        return (
            (["machine"] if self.several else [])
            + ["framework / mode", "device / threads", "s/batch", "samples/s"]
            + (["tokens/s"] if self.tokens else [])
            + ["TFLOP/s"]
            + (["measured peak TFLOP/s", "% of peak"] if self.share else [])
            + ["speedup vs 1t", "parallel eff.", "threads used", "compile s"]
            + ["peak host MB (cell)", "peak device MB"]
            + (
                ["data wait (share of step)", "samples/s resident", "input-bound"]
                if self.real
                else []
            )
        )


def details_table(report: Report, block: Block) -> Table | None:
    mine = [d for d in report.details if d.block == block.key]
    if not mine:
        return None
    show = _DetailColumns(
        several=len(report.machines) > 1,
        share=any(d.peak_tflops for d in mine),
        real=any(d.result.data == "real" for d in mine),
        tokens=any(d.result.tokens for d in mine),
    )
    order = {c.key: i for i, c in enumerate(block.columns)}
    mine.sort(key=lambda d: (report.machines.index(d.machine), d.row, order.get(d.col, 0)))
    return Table(
        block.title,
        show.headers(),
        [_detail_row(d, show) for d in mine],
        anchor=f"detail-{block.slug}",
        text_cols=3 if show.several else 2,
        caption=legend_caption(d.result.info for d in mine),
    )


def _detail_row(d, show: _DetailColumns) -> list[Text]:
    info = d.result.info
    # a peak that could not be reset for the cell is the process's lifetime one
    host = _mb(info.get("peak_host_rss_bytes")) + (
        " (process)" if info.get("peak_host_rss_scope") == "process" else ""
    )
    efficiency = number_text(d.efficiency and d.efficiency * 100, ".0f") + (
        "%" if d.efficiency else ""
    )
    return (
        ([as_text(d.machine.short)] if show.several else [])
        + [as_text(row_label(d.row)), as_text(col_label(d.col))]
        + [Text(number_text(d.result.median, ".4g") + marks(info), best=d.best_in_column)]
        + [as_text(number_text(d.samples_per_s, ".4g"))]
        + (
            [as_text(number_text(d.samples_per_s * (d.result.tokens or 0) or None, ".4g"))]
            if show.tokens
            else []
        )
        + [as_text(number_text(d.tflops, ".3g"))]
        + (
            [
                as_text(number_text(d.peak_tflops, ".3g")),
                as_text(number_text(d.peak_share and d.peak_share * 100, ".2g")),
            ]
            if show.share
            else []
        )
        + [
            as_text(number_text(d.speedup, ".2f")),
            as_text(efficiency),
            as_text(number_text(info.get("threads_used"), ".2f")),
        ]
        + [
            as_text(number_text(info.get("compile_s"), ".3g")),
            as_text(host),
            as_text(_mb(info.get("peak_device_bytes"))),
        ]
        + (_real_data_cells(info) if show.real else [])
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


def footnote_lines(report: Report) -> list[tuple[int, str]]:
    return [
        (
            f.number,
            f"{f.machine}: {f.result.task} {f.result.network} "
            f"{row_label((f.result.framework, f.result.mode, f.result.precision, f.result.data))} "
            f"on {f.result.device}"
            + (f" with {f.result.threads} threads" if not f.result.accelerator else "")
            + f": {f.result.status}: {f.result.reason}",
        )
        for f in report.footnotes
    ]
