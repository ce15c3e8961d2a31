"""Table 7 of the network suite's cells, derived once per report (its Hooks.build): a
block per (task, network, batch, scale) with a row per configuration and a column per
machine's thread count or device, each timed cell's figures (Detail: samples/s, TFLOP/s,
% of the peak a suite measured, speedup over one thread), the failed cells' footnotes,
each machine against the base machine and, with prices, what money buys.

Everything here is plain data; its sections (table7.py, compared.py, procurement.py,
plots.py) and report.csv (table7_csv.py) lay it out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xfbench.harness.threads import marks
from xfbench.networks.report import paper
from xfbench.networks.report.cells import KINDS, MachineCells, machine_cells
from xfbench.networks.report.keys import (
    BlockKey,
    ColKey,
    RowKey,
    block_key,
    col_key,
    col_label,
    col_order,
    row_key,
    row_label,
)
from xfbench.report.api import (
    Machine,
    Report,
    Result,
    Workload,
    achieved_tflops,
    dtype_name,
    format_seconds,
    interval,
    measured_peaks,
    network_title,
    plain,
    plus_minus,
    procurement,
    verified_mark,
)

# The task whose blocks Shi et al.'s own Table 7 measured (its paper.py: shown beside
# them with --paper): training.
PAPER_TASK = "train"
# What a block of one (task, network) calls its task where the task's name alone would
# mislead.
BLOCK_TASKS = {("infer", "gpt2"): "infer (prefill: one pass scoring every position, no cache)"}


@dataclass
class Column:
    machine: int  # index into Report.machines
    key: ColKey
    label: str  # header, with the machine's tag when there are several
    short_label: str = ""  # header under a machine's group header (HTML)


@dataclass
class TableCell:
    text: str  # what a reader sees: seconds, a failure word, or "-"
    value: float | None = None  # seconds per mini-batch
    best: bool = False
    footnote: int | None = None
    result: Result | None = None


@dataclass
class Row:
    key: RowKey
    label: str
    verified: str  # "", "yes (max rel err 3e-07)" or "NO (...)"
    cells: list[TableCell]


@dataclass
class PaperBlock:
    row: str  # the paper's row name
    batch: int | None
    labels: tuple[str, ...]
    tools: list[tuple[str, list[str]]]  # (tool, cell texts)
    values: list[tuple[str, dict[str, float]]]


@dataclass
class Block:
    key: BlockKey
    title: str
    columns: list[Column]
    rows: list[Row]
    paper: PaperBlock | None = None

    @property
    def slug(self) -> str:
        task, network, batch, scale = self.key
        slug = f"{task}-{network}-b{batch}" + ("" if scale == "full" else f"-{scale}")
        return plain(slug)  # names come from JSON: keep paths plain


@dataclass
class Footnote:
    number: int
    result: Result
    machine: str


@dataclass
class Detail:
    """One timed cell with everything derived from it (a row of the CSV)."""

    machine: Machine
    block: BlockKey
    row: RowKey
    col: ColKey
    result: Result
    samples_per_s: float
    tflops: float | None
    peak_tflops: float | None  # the best a suite measured there (measured_peaks)
    peak_share: float | None
    speedup: float | None  # over the same row's 1-thread CPU cell on the machine
    efficiency: float | None  # speedup / threads, CPU cells only
    verified: dict | None
    best_in_column: bool = False
    money: dict[str, float | None] = field(default_factory=dict)


@dataclass
class Summary:
    machine: Machine
    cells: int
    geomean: float | None  # the base machine's time / this machine's, geometric mean
    cpu_cells: int
    cpu_geomean: float | None
    acc_cells: int
    acc_geomean: float | None


@dataclass
class Buy:
    """The procurement view: a network's best cell on one machine, at its prices."""

    block: BlockKey
    machine: Machine
    best: Detail
    figures: dict[str, float | None]


def _peak_for(peaks, r: Result) -> float | None:
    dev = r.device_name if r.accelerator else "cpu"
    dtype = dtype_name(r.precision)
    found = peaks.get((dev, dtype, None if r.accelerator else r.threads))
    if found is None and not r.accelerator:
        found = peaks.get((dev, dtype, None))
    return found[0] if found else None


def _details(m: Machine) -> list[Detail]:
    peaks = measured_peaks(m)
    cells = machine_cells(m)
    out = []
    for (block, row, col), r in cells.results.items():
        one = cells.results.get((block, row, ("cpu", 1)))
        speedup = one.median / r.median if one and r.median > 0 else None
        efficiency = speedup / r.threads if speedup and col[0] == "cpu" and r.threads > 0 else None
        tflops = achieved_tflops(r)
        peak = _peak_for(peaks, r)
        out.append(
            Detail(
                machine=m,
                block=block,
                row=row,
                col=col,
                result=r,
                samples_per_s=r.batch_size / r.median if r.median > 0 else math.nan,
                tflops=tflops,
                peak_tflops=peak,
                peak_share=tflops / peak if tflops is not None and peak else None,
                speedup=speedup,
                efficiency=efficiency,
                verified=verified_mark(cells.equivalence, r.framework, r.network, r.task),
            )
        )
    return out


def _verified_text(check: dict | None) -> str:
    if check is None:
        return ""
    err = f"max rel err {check['max_rel_err']:.1e}" if check["max_rel_err"] is not None else ""
    return ("yes" if check["verified"] else "NO") + (f" ({err})" if err else "")


def _paper_block(key: BlockKey) -> PaperBlock | None:
    """Shi et al.'s row beside a block of the task their Table 7 measured (PAPER_TASK)."""
    task, network, _, _ = key
    row = paper.paper_row(network)
    if task != PAPER_TASK or not row:
        return None
    t = paper.table()
    values = t.rows.get(row, [])
    tools = [(tool, [f"{v[c]:.3f}" if c in v else "-" for c in t.columns]) for tool, v in values]
    return PaperBlock(row=row, batch=t.batch.get(row), labels=t.labels, tools=tools, values=values)


def _geomean(ratios: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None


def _match_key(block: BlockKey, row: RowKey, r: Result):
    """Cells of different machines that are the same measurement: CPU cells by thread
    count, accelerator cells by device index (cuda:0 of one machine against cuda:0 of
    the other, whatever their names)."""
    return (block, row, ("cpu", r.threads) if not r.accelerator else ("acc", r.device))


def summarise(machines: list[Machine], base: Machine) -> list[Summary]:
    ref = {_match_key(b, row, r): r for (b, row, _), r in machine_cells(base).results.items()}
    out = []
    for m in machines:
        if m is base:
            continue
        every, cpu, acc = [], [], []
        for (b, row, _), r in machine_cells(m).results.items():
            other = ref.get(_match_key(b, row, r))
            if other is None or r.median <= 0 or other.median <= 0:
                continue
            ratio = other.median / r.median
            every.append(ratio)
            (acc if r.accelerator else cpu).append(ratio)
        out.append(
            Summary(
                machine=m,
                cells=len(every),
                geomean=_geomean(every),
                cpu_cells=len(cpu),
                cpu_geomean=_geomean(cpu),
                acc_cells=len(acc),
                acc_geomean=_geomean(acc),
            )
        )
    return out


def _block_keys(everything) -> list[tuple]:
    """Every (task, network, batch, scale) seen anywhere, ok or failed: the tasks in their
    declared order (training first); the networks in docs/models.md's order (Shi's rows,
    then those beyond the paper), any other after them."""
    from xfbench.models import NETWORKS

    order = {n: i for i, n in enumerate(NETWORKS)}
    tasks = {task: i for i, task in enumerate(KINDS)}
    return sorted(
        {block_key(r) for _, r in everything},
        key=lambda k: (tasks.get(k[0], len(tasks)), order.get(k[1], len(order)), *k[1:]),
    )


def _columns(machines: list[Machine], inside) -> list[Column]:
    columns = []
    for mi, m in enumerate(machines):
        keys = sorted({col_key(r) for i, r in inside if i == mi}, key=col_order)
        columns += [
            Column(
                mi, k, col_label(k) if len(machines) == 1 else f"{m.tag}: {col_label(k)}",
                col_label(k),
            )
            for k in keys
        ]  # fmt: skip
    return columns


def _table_cell(
    m: Machine, cells: MachineCells, bk, rk, *, column: Column, footnotes: list[Footnote]
) -> TableCell:
    """A cell of a block: its median (with its interval and marks), its failure's status
    and footnote, or "-" where it did not run."""
    r = cells.results.get((bk, rk, column.key))
    if r is not None:
        # contended / thread-shortfall marks beside the number (legend: tables.py)
        text = format_seconds(r.median) + plus_minus(r) + marks(r.info)
        return TableCell(text, r.median, result=r)
    failed = next(
        (
            f
            for f in cells.failures
            if (block_key(f), row_key(f), col_key(f)) == (bk, rk, column.key)
        ),
        None,
    )
    if failed is None:
        return TableCell("-")
    number = len(footnotes) + 1
    footnotes.append(Footnote(number, failed, m.label))
    return TableCell(failed.status, footnote=number, result=failed)


def _block(bk, machines, views, inside, *, footnotes, by_cell, with_paper: bool) -> Block:
    """One (task, network, batch) table: a row per configuration, a column per machine's
    thread count or device; the best of each column marked."""
    columns = _columns(machines, inside)
    rows = []
    for rk in sorted({row_key(r) for _, r in inside}):
        cells = [
            _table_cell(
                machines[c.machine], views[c.machine], bk, rk, column=c, footnotes=footnotes
            )
            for c in columns
        ]
        checks = [verified_mark(v.equivalence, rk[0], bk[1], bk[0]) for v in views]
        check = next((c for c in checks if c and not c["verified"]), None) or next(
            (c for c in checks if c), None
        )
        rows.append(Row(rk, row_label(rk), _verified_text(check), cells))
    for ci in range(len(columns)):
        timed = [row.cells[ci] for row in rows if row.cells[ci].value is not None]
        if len(timed) > 1:  # a lone number is not a winner
            best = min(timed, key=lambda cell: cell.value)
            best.best = True
            d = by_cell.get(
                (id(machines[columns[ci].machine]), bk, row_key(best.result), columns[ci].key)
            )
            if d:
                d.best_in_column = True
    task, network, batch, scale = bk
    lengths = sorted({r.tokens for _, r in inside if r.tokens})
    task = BLOCK_TASKS.get((task, network), task)
    title = (
        f"{network_title(network)}: {task}, batch {batch}"
        + (f" x {', '.join(map(str, lengths))} tokens" if lengths else "")
        + ("" if scale == "full" else f", {scale} size")
    )
    return Block(
        key=bk,
        title=title,
        columns=columns,
        rows=rows,
        paper=_paper_block(bk) if with_paper else None,
    )


def _buys(machines, details, block_keys) -> list[Buy]:
    """Each priced machine's best configuration of each block, with its money figures."""
    for d in details:
        if d.machine.prices:
            d.money = procurement.figures(d.samples_per_s, d.machine.prices)
    buys = []
    for m in machines:
        for bk in block_keys if m.prices else []:
            mine = [d for d in details if d.machine is m and d.block == bk]
            if mine:
                best = max(mine, key=lambda d: d.samples_per_s)
                buys.append(Buy(bk, m, best, best.money))
    buys.sort(key=lambda b: (block_keys.index(b.block), machines.index(b.machine)))
    return buys


@dataclass
class Table7Content:
    """What the network suite derives from its cells once per report."""

    blocks: list[Block]
    details: list[Detail]
    footnotes: list[Footnote]
    summaries: list[Summary]  # each machine against the base one, where there are several
    buys: list[Buy]


def build(report: Report) -> Table7Content:
    """Table 7 of every machine's cells (its Hooks.build). Its footnotes are the report's
    first: the suites after it number theirs from report.next_note()."""
    machines, ref = report.machines, report.base
    views = [machine_cells(m) for m in machines]
    report.problems += [note for v in views for note in v.notes]
    details = [d for m in machines for d in _details(m)]
    by_cell = {(id(d.machine), d.block, d.row, d.col): d for d in details}
    everything = [
        (mi, r) for mi, v in enumerate(views) for r in list(v.results.values()) + v.failures
    ]
    block_keys = _block_keys(everything)
    footnotes: list[Footnote] = []
    blocks = [
        _block(
            bk,
            machines,
            views,
            [(mi, r) for mi, r in everything if block_key(r) == bk],
            footnotes=footnotes,
            by_cell=by_cell,
            with_paper=report.with_paper,
        )
        for bk in block_keys
    ]  # fmt: skip
    report.notes_given = max(report.notes_given, len(footnotes))
    return Table7Content(
        blocks=blocks,
        details=details,
        footnotes=footnotes,
        summaries=summarise(machines, ref) if ref and len(machines) > 1 else [],
        buys=_buys(machines, details, block_keys),
    )


def gpu_workloads(machine: Machine) -> list[Workload]:
    """Its GPU cells as workloads bound by arithmetic (report/gpu_models.py, its
    Hooks.gpu_workloads); its training cells stand beside published training ratios."""
    out = []
    for r in machine_cells(machine).results.values():
        if not (r.ok and r.accelerator):
            continue
        ci = interval(r)
        what = f"{r.network} {r.task}, {r.framework} {r.mode}, {r.precision}, batch {r.batch_size}"
        out.append(
            Workload(device_name=r.device_name, what=what, precision=r.precision,
                     bound="compute", seconds=r.median, low=ci[1] if ci else None,
                     high=ci[2] if ci else None,
                     published_as="training" if r.task == PAPER_TASK else "")
        )  # fmt: skip
    return out


def table7_content(report: Report) -> Table7Content:
    """What build() derived for this report."""
    return report.suite_models[KINDS[0]]
