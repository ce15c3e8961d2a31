"""From runs to the report's content: machines, Table 7 blocks, per-cell figures,
machine-against-base summaries and the procurement view.

Everything here is plain data; the md and html renderers and the suite of Table 7's cells
(its sections and report.csv) only lay it out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from xfbench.frameworks import display
from xfbench.harness.threads import marks
from xfbench.report import paper, procurement, suites
from xfbench.report.equivalence import mark
from xfbench.report.files import plain
from xfbench.report.load import Result, Run

# A row of Table 7: the way a network was run.
RowKey = tuple[str, str, str, str]  # framework, mode, precision, data
# A block of Table 7: one network at one batch size.
BlockKey = tuple[str, str, int, str]  # task, network, batch_size, scale
# A column within one machine: ("cpu", threads) or ("acc", device_name).
ColKey = tuple[str, Any]

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
    results: dict[tuple[BlockKey, RowKey, ColKey], Result] = field(default_factory=dict)
    failures: list[Result] = field(default_factory=list)
    equivalence: list[dict] = field(default_factory=list)
    prices: dict[str, float] = field(default_factory=dict)
    # cells run as several copies at once (--copies), ok or failed: not Table 7's cells
    copies: list[Result] = field(default_factory=list)
    # every suite's records but Table 7's cells (report/suites.py), and their failed
    # cells, by kind
    records: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.runs]

    def of(self, kind: str) -> list[dict]:
        """The records of one suite's kind (report/suites.py), and its failed cells."""
        return self.records.get(kind, [])


def block_key(r: Result) -> BlockKey:
    return (r.task, r.network, r.batch_size, r.scale)


def row_key(r: Result) -> RowKey:
    return (r.framework, r.mode, r.precision, r.data)


def col_key(r: Result) -> ColKey:
    return ("acc", r.device_name) if r.accelerator else ("cpu", r.threads)


def row_label(key: RowKey) -> str:
    framework, mode, precision, data = key
    parts = (
        [display(framework), mode]
        + ([precision] if precision != "fp32" else [])
        + ([f"data {data}"] if data != "resident" else [])
    )
    return " ".join(parts)


def col_label(key: ColKey) -> str:
    kind, what = key
    return f"{what}t" if kind == "cpu" else str(what)


def _col_order(key: ColKey):
    return (0, key[1], "") if key[0] == "cpu" else (1, 0, str(key[1]))


def group_machines(runs: list[Run]) -> tuple[list[Machine], list[str]]:
    """Column groups, and notes on cells measured twice within one run."""
    machines: list[Machine] = []
    notes: list[str] = []
    kinds = suites.cell_kinds()  # read once: those of Table 7's cells
    for run in runs:
        cells = run.of(*kinds)
        target = _machine_of(run, cells, machines)
        target.runs.append(run)
        _name_failed_devices(run, cells)
        target.equivalence += run.of("equivalence")
        for kind, found in run.records.items():
            target.records.setdefault(kind, []).extend(found)
        for r in cells:
            key = (block_key(r), row_key(r), col_key(r))
            if r.copies > 1:
                target.copies.append(r)
                continue
            if not r.ok:
                target.failures.append(r)
                continue
            if key in target.results:
                # two devices of the same name, or a repeated cell: keep the faster
                notes.append(
                    f"{r.source}: {r.network} {row_label(row_key(r))} {col_label(col_key(r))} "
                    f"measured more than once in {run.name}; the fastest is shown"
                )
                if r.median >= target.results[key].median:
                    continue
            target.results[key] = r
    _label(machines)
    return machines, notes


def _machine_of(run: Run, cells: list[Result], machines: list[Machine]) -> Machine:
    """The group a run joins (cells: its Table 7 cells): the first of its machine's label
    none of whose cells it measured again, else a new one (added to machines)."""
    keys = {_cell_key(r) for r in cells}
    for m in machines:
        if m.base_label != run.machine["label"]:
            continue  # only its own machine's groups: their cells' keys are worth building
        measured = set(m.results) | set(_failure_keys(m)) | {_cell_key(r) for r in m.copies}
        if not keys & measured:
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


def _name_failed_devices(run: Run, cells: list[Result]) -> None:
    """A failure record carries the cell's device ("cuda:0") but not the device's name,
    which only a cell that ran reports: take it from the run's timed cells on that
    device, else from the machine's GPU list, so the failure lands in its column."""
    names = {r.device: r.device_name for r in cells if r.ok and r.accelerator}
    for i, gpu in enumerate(run.machine.get("gpus") or []):
        for prefix in ("cuda", "gpu"):
            names.setdefault(f"{prefix}:{i}", gpu)
    for r in cells:
        if not r.ok and r.accelerator and r.device_name == r.device:
            r.device_name = names.get(r.device, r.device)


def _cell_key(r: Result) -> tuple:
    """A cell's place among a machine's: its block, row and column, and its copies."""
    key = (block_key(r), row_key(r), col_key(r))
    return key if r.copies == 1 else (*key, r.copies)


def _failure_keys(m: Machine):
    return ((block_key(r), row_key(r), col_key(r)) for r in m.failures)


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


# ---------------------------------------------------------------- Table 7


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


@dataclass(kw_only=True)
class Report:
    machines: list[Machine]
    blocks: list[Block]
    details: list[Detail]
    footnotes: list[Footnote]
    summaries: list[Summary]
    base: Machine | None  # the machine the others are compared with, side by side
    buys: list[Buy]
    problems: list[str]
    with_paper: bool
    # what each suite with a report of its own derives from its records (its `build`,
    # report/suites.py), by its record kind
    suite_models: dict[str, Any] = field(default_factory=dict)
    notes_given: int = 0  # the footnotes numbered so far: Table 7's, then the suites'

    def next_note(self) -> int:
        """The next footnote's number, after Table 7's and those given before."""
        self.notes_given = max(self.notes_given, len(self.footnotes)) + 1
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


def _peak_for(peaks, r: Result) -> float | None:
    dev = r.device_name if r.accelerator else "cpu"
    dtype = dtype_name(r.precision)
    found = peaks.get((dev, dtype, None if r.accelerator else r.threads))
    if found is None and not r.accelerator:
        found = peaks.get((dev, dtype, None))
    return found[0] if found else None


def _tflops(r: Result) -> float | None:
    flops = r.info.get("flops_per_step")
    if isinstance(flops, (int, float)) and flops > 0 and r.median > 0:
        return flops / r.median / 1e12
    value = r.info.get("achieved_tflops")
    return float(value) if isinstance(value, (int, float)) else None


def _details(m: Machine) -> list[Detail]:
    peaks = measured_peaks(m)
    out = []
    for (block, row, col), r in m.results.items():
        one = m.results.get((block, row, ("cpu", 1)))
        speedup = one.median / r.median if one and r.median > 0 else None
        efficiency = speedup / r.threads if speedup and col[0] == "cpu" and r.threads > 0 else None
        tflops = _tflops(r)
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
                verified=mark(m.equivalence, r.framework, r.network, r.task),
            )
        )
    return out


def _verified_text(check: dict | None) -> str:
    if check is None:
        return ""
    err = f"max rel err {check['max_rel_err']:.1e}" if check["max_rel_err"] is not None else ""
    return ("yes" if check["verified"] else "NO") + (f" ({err})" if err else "")


def _paper_block(key: BlockKey, paper_task: str | None) -> PaperBlock | None:
    """Shi et al.'s row beside a block of the task their Table 7 measured (the suite of
    Table 7's cells says which, `paper_task`)."""
    task, network, _, _ = key
    row = paper.paper_row(network)
    if task != paper_task or not row:
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
    ref = {_match_key(b, row, r): r for (b, row, _), r in base.results.items()}
    out = []
    for m in machines:
        if m is base:
            continue
        every, cpu, acc = [], [], []
        for (b, row, _), r in m.results.items():
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


def _block_keys(everything) -> list[tuple]:
    """Every (task, network, batch, scale) seen anywhere, ok or failed: the tasks in their
    declared order (training first); the networks in docs/models.md's order (Shi's rows,
    then those beyond the paper), any other after them."""
    from xfbench.models import NETWORKS

    order = {n: i for i, n in enumerate(NETWORKS)}
    tasks = suites.cell_tasks()
    return sorted(
        {block_key(r) for _, r in everything},
        key=lambda k: (tasks.get(k[0], len(tasks)), order.get(k[1], len(order)), *k[1:]),
    )


def _columns(machines: list[Machine], inside) -> list[Column]:
    columns = []
    for mi, m in enumerate(machines):
        keys = sorted({col_key(r) for i, r in inside if i == mi}, key=_col_order)
        columns += [
            Column(
                mi, k, col_label(k) if len(machines) == 1 else f"{m.tag}: {col_label(k)}",
                col_label(k),
            )
            for k in keys
        ]  # fmt: skip
    return columns


def _table_cell(m: Machine, bk, rk, *, column: Column, footnotes: list[Footnote]) -> TableCell:
    """A cell of a block: its median (with its interval and marks), its failure's status
    and footnote, or "-" where it did not run."""
    r = m.results.get((bk, rk, column.key))
    if r is not None:
        # contended / thread-shortfall marks beside the number (legend: tables.py)
        text = format_seconds(r.median) + plus_minus(r) + marks(r.info)
        return TableCell(text, r.median, result=r)
    failed = next(
        (f for f in m.failures if (block_key(f), row_key(f), col_key(f)) == (bk, rk, column.key)),
        None,
    )
    if failed is None:
        return TableCell("-")
    number = len(footnotes) + 1
    footnotes.append(Footnote(number, failed, m.label))
    return TableCell(failed.status, footnote=number, result=failed)


def _block(bk, machines, inside, *, footnotes, by_cell, with_paper: bool, table7) -> Block:
    """One (task, network, batch) table: a row per configuration, a column per machine's
    thread count or device; the best of each column marked. `table7`: the layout the suite
    of Table 7's cells declares (its paper task, its blocks' names), or None."""
    columns = _columns(machines, inside)
    rows = []
    for rk in sorted({row_key(r) for _, r in inside}):
        cells = [
            _table_cell(machines[c.machine], bk, rk, column=c, footnotes=footnotes) for c in columns
        ]
        checks = [mark(m.equivalence, rk[0], bk[1], bk[0]) for m in machines]
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
    task = table7.block_tasks.get((task, network), task) if table7 else task
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
        paper=_paper_block(bk, table7 and table7.paper_task) if with_paper else None,
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


def build(
    runs: list[Run],
    *,
    with_paper: bool = False,
    base: str | None = None,
    prices: dict[str, dict[str, float]] | None = None,
) -> Report:
    """The report's content. `base` names a machine (label, host or run name);
    ValueError when it names none."""
    machines, problems = group_machines(runs)
    problems = [p for run in runs for p in run.problems] + problems
    ref = _base_machine(machines, base)
    if prices:
        problems += _priced(machines, prices)
    details = [d for m in machines for d in _details(m)]
    by_cell = {(id(d.machine), d.block, d.row, d.col): d for d in details}
    everything = [
        (mi, r) for mi, m in enumerate(machines) for r in list(m.results.values()) + m.failures
    ]
    block_keys = _block_keys(everything)
    footnotes: list[Footnote] = []
    cells = suites.cells_suite()  # read once: each block takes its hooks
    table7 = cells.hooks.table7 if cells else None
    blocks = [
        _block(
            bk,
            machines,
            [(mi, r) for mi, r in everything if block_key(r) == bk],
            footnotes=footnotes,
            by_cell=by_cell,
            with_paper=with_paper,
            table7=table7,
        )
        for bk in block_keys
    ]  # fmt: skip
    report = Report(
        machines=machines,
        blocks=blocks,
        details=details,
        footnotes=footnotes,
        summaries=summarise(machines, ref) if ref and len(machines) > 1 else [],
        base=ref,
        buys=_buys(machines, details, block_keys),
        problems=problems,
        with_paper=with_paper,
    )
    for suite in suites.declared():
        if suite.hooks.build:
            report.suite_models[suite.kind] = suite.hooks.build(report)
    return report
