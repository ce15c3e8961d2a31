"""The scaling suite's part of the report (xfbench/report/suites.py): a table per scaling
kind (strong, weak) of seconds per step, samples/s, speedup and efficiency over one worker
and the share spent communicating; its failed cells, numbered after Table 7's; parallel
efficiency against workers per network; report-scaling.csv (one row per cell)."""

from __future__ import annotations

from pathlib import Path

from xfbench.report.api import (
    Entry,
    Hooks,
    Part,
    Report,
    Table,
    Text,
    format_seconds,
    network_title,
    number_text,
    plain,
    plural,
)
from xfbench.scaling import report_model
from xfbench.scaling.cell import KIND
from xfbench.scaling.report_model import ScalingRow, ScalingTable

# hooks the report calls by name (report/suites.py), beside the model that reads records
owns = report_model.owns
read_failure = report_model.read_failure

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
COLUMNS = (
    "machine",
    "host",
    "run",
    "network",
    "framework",
    "device",
    "device_name",
    "precision",
    "scale",
    "scaling",
    "workers",
    "batch",
    "global_batch",
    "per_worker_batch",
    "threads_per_worker",
    "status",
    "seconds_per_step",
    "samples_per_s",
    "speedup",
    "efficiency",
    "speedup_from",
    "speedup_baseline",
    "backend",
    "comm_share",
    "comm_share_how",
    "compile_s",
    "rounds",
    "replicas_agree",
    "replicas_max_diff",
    "threads_used",
    "reason",
    "file",
)


def read(entry: Entry) -> tuple[dict | None, str | None]:
    median, error = entry.median()
    return report_model.read_entry(entry.extra, median, error, entry.source)


def build(report: Report) -> report_model.Scaling:
    return report_model.build(
        report.machines, lambda m: m.of(KIND), report.next_note, report.problems
    )


def _model(report: Report) -> report_model.Scaling:
    return report.suite_models.get(KIND) or report_model.Scaling([], [])


def sections(report: Report, plots: list[tuple[str, Path]]) -> list[Part]:
    model = _model(report)
    if not (model.tables or model.failures):
        return []
    return [
        Part(
            title="Data-parallel scaling",
            caption=CAPTION,
            tables=[scaling_table(report, t) for t in model.tables],
            plots=plots,
            notes_title="Failed scaling cells",
            notes=[(f.number, f"{f.machine.label}: {f.text}") for f in model.failures],
        )
    ]


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
                    Text(number_text(r["samples_per_s"], ".4g")),
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


def plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    if not _model(report).tables:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    return efficiency_plots(report, folder)


def efficiency_plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    """Per scaling kind and network: efficiency against workers, a line per framework,
    device and batch (a line style per machine), and the ideal 100 % line."""
    from xfbench.report.api import COLORS, SIZE, STYLES, place_legend, plt, save_figure

    out = []
    several = len(report.machines) > 1
    for table in _model(report).tables:
        networks = dict.fromkeys((r.network, r.scale) for r in table.rows)
        for network, scale in networks:
            fig, ax = plt.subplots(figsize=SIZE)
            lines = 0
            workers: set[int] = set()
            for ri, row in enumerate(
                r for r in table.rows if (r.network, r.scale) == (network, scale)
            ):
                points = sorted(
                    (w, p.efficiency * 100)
                    for w, p in row.points.items()
                    if p.efficiency is not None and w > 0
                )
                if not points:
                    continue
                workers.update(w for w, _ in points)
                mi = report.machines.index(row.machine)
                label = (
                    f"{row.framework} {device_text(row)}, batch {batch_text(table.kind, row.batch)}"
                    + (f" ({row.machine.short})" if several else "")
                )
                ax.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    marker="o",
                    label=label,
                    color=COLORS[ri % len(COLORS)],
                    linestyle=STYLES[mi % len(STYLES)],
                )
                lines += 1
            if not lines:
                plt.close(fig)
                continue
            ticks = sorted(workers | {1})
            ax.plot(
                [ticks[0], ticks[-1]],
                [100, 100],
                color="black",
                linestyle=":",
                linewidth=1,
                label="ideal (100 %)",
            )
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks, [str(w) for w in ticks])
            ax.minorticks_off()
            top = max(p for line in ax.get_lines() for p in line.get_ydata())
            ax.set_ylim(0, max(110, top * 1.05))
            ax.set_xlabel("workers")
            ax.set_ylabel("parallel efficiency (%)")
            title = f"{network_title(network)}: {table.kind} scaling" + (
                "" if scale == "full" else f", {scale} size"
            )
            ax.set_title(title, fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            place_legend(ax, lines + 1)
            path = folder / f"efficiency-{table.kind}-{plain(network)}-{scale}.png"
            out.append((f"Parallel efficiency, {title}", save_figure(fig, path)))
    return out


def csv_files(report: Report) -> list[tuple[str, tuple[str, ...], list[dict]]]:
    return [("report-scaling.csv", COLUMNS, csv_rows(report))]


def csv_rows(report: Report) -> list[dict]:
    out = []
    for table in _model(report).tables:
        for row in table.rows:
            m = row.machine
            for _workers, p in sorted(row.points.items()):
                r = p.record
                out.append(
                    {
                        **{k: r[k] for k in COLUMNS if k in r},
                        "machine": m.label,
                        "host": m.host,
                        "run": next(
                            (run.name for run in m.runs if any(x is r for x in run.of(KIND))), ""
                        ),
                        "seconds_per_step": r["seconds"],
                        "speedup": p.speedup,
                        "efficiency": p.efficiency,
                        "speedup_from": ""
                        if p.speedup is None
                        else ("report" if p.computed else "record"),
                        "file": r["source"],
                    }
                )
    return out


# Its part of the report (xfbench/report/suites.py says what each hook is).
REPORT = Hooks(
    sections={"suites": sections},
    plots=plots,
    csv_files=csv_files,
    read=read,
    read_failure=read_failure,
    owns=owns,
    build=build,
)
