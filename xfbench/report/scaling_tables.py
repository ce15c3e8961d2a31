"""The scaling and all-reduce tables as plain rows of text (report.tables.Table), shared
by the Markdown and HTML renderers."""

from __future__ import annotations

from xfbench.report.model import Report, format_seconds, network_title
from xfbench.report.scaling import ScalingRow, ScalingTable, Sweep, pattern_title, patterns_of
from xfbench.report.table import Table, Text, _num

TITLES = {
    "strong": "Strong scaling: the global batch fixed, split over the workers",
    "weak": "Weak scaling: the batch per worker fixed",
}
CAPTION = (
    "Seconds per step of the global batch (median over the timed steps; each step "
    "lasts until the slowest worker has finished it), samples/s of the global batch, "
    "speedup over one worker (strong: t(1) / t(N) at the same global batch; weak: "
    "samples/s(N) / samples/s(1) at the same batch per worker) and efficiency = "
    "speedup / workers. The speedup is the suite's where it recorded one, else computed "
    "here from the row's 1-worker cell; n/a: no 1-worker cell to compare with. "
    "comm: the share of the step spent communicating, where the framework exposes it."
)
ALLREDUCE_CAPTION = (
    "Median time per operation; algbw = bytes / time; busbw = algbw x 2(n-1)/n "
    "for n workers (nccl-tests' all-reduce definitions; 0 for one worker, which the "
    "plot leaves out). The "
    "baselines compute the same sum and are measured and computed the same way, "
    "so the columns compare directly: reduce + broadcast is the library's reduce "
    "to one worker then its broadcast (pipelined along a ring or tree); parameter "
    "server is the literal pattern, one worker receiving every buffer and sending "
    "the sum back to each, 2(n-1) buffers through its link. "
    "correct: the result checked on every size."
)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def row_label(row: ScalingRow) -> str:
    extra = [
        x
        for x in (
            row.precision if row.precision != "fp32" else "",
            f"{row.scale} size" if row.scale != "full" else "",
        )
        if x
    ]
    return network_title(row.network) + (f" ({', '.join(extra)})" if extra else "")


def device_text(row: ScalingRow) -> str:
    if row.device == "cpu":
        return "cpu" + (
            f", {plural(row.threads_per_worker, 'thread')}/worker" if row.threads_per_worker else ""
        )
    return row.device_name


def batch_text(kind: str, batch: int | None) -> str:
    if batch is None:
        return "?"
    return f"{batch} global" if kind == "strong" else f"{batch} per worker"


def scaling_table(report: Report, table: ScalingTable) -> Table:
    several = len(report.machines) > 1
    lead = (["machine"] if several else []) + ["network", "framework", "device", "batch", "backend"]
    base = ["s/step", "samples/s", "speedup", "eff."]

    def sub(w: int) -> list[str]:  # one worker does not communicate: no comm column
        return base + (["comm"] if table.comm and w > 1 else [])

    headers = list(lead)
    for w in table.workers:
        headers += [f"{w}w {s}" for s in sub(w)]
    rows = []
    for row in table.rows:
        cells = ([Text(row.machine.short)] if several else []) + [
            Text(row_label(row)),
            Text(row.framework),
            Text(device_text(row)),
            Text(batch_text(table.kind, row.batch)),
            Text(row.backend),
        ]
        for w in table.workers:
            p = row.points.get(w)
            blanks = [Text("") for _ in sub(w)[1:]]
            if p is None:
                cells += [Text("-")] + blanks
            elif p.record["seconds"] is None:
                cells += [Text(p.record["status"], note=p.footnote)] + blanks
            else:
                r = p.record
                cells += [
                    Text(format_seconds(r["seconds"])),
                    Text(_num(r["samples_per_s"], ".4g")),
                    Text(f"{p.speedup:.2f}x" if p.speedup is not None else "n/a"),
                    Text(f"{p.efficiency * 100:.0f}%" if p.efficiency is not None else "n/a"),
                ]
                if len(sub(w)) > len(base):
                    cells.append(
                        Text(f"{r['comm_share'] * 100:.0f}%" if r["comm_share"] is not None else "")
                    )
        rows.append(cells)
    t = Table(
        TITLES.get(table.kind, f"{table.kind} scaling"),
        headers,
        rows,
        anchor=f"scaling-{table.kind}",
        text_cols=len(lead),
    )
    t.groups = [("", len(lead))] + [(plural(w, "worker"), len(sub(w))) for w in table.workers]
    t.short_headers = lead + [s for w in table.workers for s in sub(w)]
    return t


def sweep_title(report: Report, sweep: Sweep) -> str:
    where = sweep.device_name if sweep.device != "cpu" else "cpu"
    title = (
        f"All-reduce, {sweep.framework} {sweep.backend} on {where}, "
        f"{plural(sweep.world_size, 'worker')}"
    )
    return title + (f" ({sweep.machine.short})" if len(report.machines) > 1 else "")


def allreduce_table(report: Report, sweep: Sweep) -> Table | None:
    if not sweep.rows:
        return None
    sub = ["time", "algbw GB/s", "busbw GB/s", "correct"]
    patterns = patterns_of([sweep])  # only those measured: no empty columns
    rows = []
    for size in sorted(sweep.rows):
        cells = [Text(size_text(size))]
        for pattern in patterns:
            r = sweep.rows[size].get(pattern)
            note = sweep.footnotes.get((size, pattern))
            if r is None:
                cells += [Text("-"), Text(""), Text(""), Text("")]
            elif r["status"] != "ok":
                cells += [Text(r["status"], note=note), Text(""), Text(""), Text("")]
            else:
                correct = {True: "yes", False: "NO", None: ""}[r["correct"]]
                cells += [
                    Text(duration_text(r["seconds"])),
                    Text(_num(r["algbw_gbps"], ".3g")),
                    Text(_num(r["busbw_gbps"], ".3g")),
                    Text(correct, note=note),
                ]
        rows.append(cells)
    headers = ["size"] + [f"{pattern_title(p)} {s}" for p in patterns for s in sub]
    slug = f"allreduce-{sweep.framework}-{sweep.backend}-{sweep.device}-n{sweep.world_size}"
    t = Table(sweep_title(report, sweep), headers, rows, anchor=slug, text_cols=1)
    t.groups = [("", 1)] + [(pattern_title(p), len(sub)) for p in patterns]
    t.short_headers = ["size"] + sub * len(patterns)
    return t


def scaling_tables(report: Report) -> list[Table]:
    return [scaling_table(report, t) for t in report.scaling.tables] if report.scaling else []


def allreduce_tables(report: Report) -> list[Table]:
    if not report.scaling:
        return []
    return [t for t in (allreduce_table(report, s) for s in report.scaling.sweeps) if t]


def failure_lines(report: Report) -> list[tuple[int, str]]:
    if not report.scaling:
        return []
    return [(f.number, f"{f.machine.label}: {f.text}") for f in report.scaling.failures]
