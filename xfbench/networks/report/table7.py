"""Table 7's own sections: the paper's layout in one table, a table per network and batch
(with the paper's rows beside ours and the failed cells' notes), each cell's figures
(throughput, TFLOP/s, thread speedup, compile time, memory) and the cells run as several
copies at once. The report builds what they lay out (report/model.py: blocks, details,
footnotes)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xfbench.harness.threads import marks
from xfbench.networks.report import paper
from xfbench.networks.report.cells import KINDS, machine_cells
from xfbench.networks.report.compared import backends_table, summary_table
from xfbench.networks.report.keys import col_label, row_key, row_label
from xfbench.networks.report.model import Block, table7_content
from xfbench.report.api import (
    Part,
    Report,
    Table,
    Text,
    as_text,
    legend_caption,
    number_text,
    table_section,
)


def sections(report: Report, plots: list[tuple[str, Path]]) -> list[Part]:
    """Its sections among the suites', in their order: the kernels that ran, the machines
    against the base one, the one table, Table 7, the details, the copies."""
    return [
        *table_section(backends_table(report)),
        *table_section(summary_table(report)),
        *table_section(compact_table7(report)),
        *_table7(report),
        *_details(report),
        *table_section(copies_table(report)),
    ]


def _table7(report: Report) -> list[Part]:
    # records of other suites only (its own cells and equivalence checks left out)
    suites_only = any(
        found
        for m in report.machines
        for kind, found in m.records.items()
        if kind not in (*KINDS, "equivalence")
    )
    if not table7_content(report).blocks and suites_only:
        return []
    names, tags = [m.label for m in report.machines], [m.tag for m in report.machines]
    return [
        Part(
            title="Table 7: seconds per mini-batch",
            caption="Columns: CPU thread counts (`4t` = 4 threads), then each accelerator by name.",
            tables=[table7(b, names, tags) for b in table7_content(report).blocks],
            notes_title="Failed cells",
            notes=footnote_lines(report),
        )
    ]


def _details(report: Report) -> list[Part]:
    found = [t for t in (details_table(report, b) for b in table7_content(report).blocks) if t]
    if not table7_content(report).blocks:
        return []
    return [
        Part(
            title="Throughput, TFLOP/s, thread speedup, compile time, memory",
            caption="samples/s = batch / median; TFLOP/s from the network's analytic FLOPs; "
            "measured peak: the best TFLOP/s a suite measured at the cell's precision on its "
            "device (and thread count); speedup and parallel efficiency over the same row's "
            "1-thread CPU cell.",
            tables=found,
        )
    ]


def _mb(value) -> str:
    return (
        f"{value / 2**20:.0f}"
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else number_text(value, "")
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
        for r in sorted(
            machine_cells(m).copies, key=lambda r: (r.task, r.network, r.framework, r.threads)
        )
    ]
    if not rows:
        return None
    return Table(
        "Throughput past one process",
        (["tag"] if several else []) + COPIES_HEADERS,
        rows,
        caption=COPIES_CAPTION
        + legend_caption(r.info for m in report.machines for r in machine_cells(m).copies),
        anchor="copies",
        text_cols=4 if several else 3,
    )


def _copies_row(m, r) -> list[Text]:
    info = r.info
    label = f"{r.network} {r.task}, {row_label(row_key(r))}, batch {r.batch_size}"
    head = [Text(label), Text(f"{r.copies} x {r.threads}t")]
    if not r.ok:
        return head + [Text(f"{r.status}: {r.reason}")] + [Text("")] * 5
    one = machine_cells(m).results.get(
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


def compact_table7(report: Report) -> Table | None:
    """Table 7 as the paper lays it out: one table, networks down (its order: the fully
    connected nets, AlexNets, ResNets, LSTMs), each framework and mode at each thread
    count or device across. A cell is the median with its ±, and, where several
    frameworks ran that column, how many times the column's fastest it takes ("1.6x");
    the fastest is bold."""
    if not table7_content(report).blocks:
        return None
    blocks = table7_content(report).blocks  # in Table 7's order: the tasks', then docs/models.md's
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
    mine = [d for d in table7_content(report).details if d.block == block.key]
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
        for f in table7_content(report).footnotes
    ]
