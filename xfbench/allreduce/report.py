"""The all-reduce suite's part of the report (xfbench/report/suites.py): a table per
engine and world size of time, algbw and busbw per message size, the baselines (reduce +
broadcast, parameter server) beside all-reduce; its failed or wrong sizes, numbered after
the cells before them; bus bandwidth against message size per engine;
report-allreduce.csv (one row per pattern and message size)."""

from __future__ import annotations

from pathlib import Path

from xfbench.allreduce import report_model
from xfbench.allreduce.plugin import KIND
from xfbench.allreduce.report_model import Sweep, pattern_title, patterns_of
from xfbench.report.api import Entry, Hooks, Part, Report, Table, Text, number_text, plain, plural

# hooks the report calls by name (report/suites.py), beside the model that reads records
owns = report_model.owns
read_failure = report_model.read_failure

LINE_STYLES = {"allreduce": "-", "reduce_broadcast": "--", "parameter_server": ":"}

CAPTION = (
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


COLUMNS = (
    "machine",
    "host",
    "run",
    "framework",
    "backend",
    "device",
    "device_name",
    "world_size",
    "pattern",
    "bytes",
    "count",
    "dtype",
    "status",
    "seconds",
    "algbw_gbps",
    "busbw_gbps",
    "correct",
    "max_abs_err",
    "rounds",
    "reason",
    "file",
)


def read(entry: Entry) -> tuple[dict | None, str | None]:
    return report_model.read_entry(entry.extra, entry.source)


def build(report: Report) -> report_model.Allreduce:
    return report_model.build(report.machines, lambda m: m.of(KIND), report.next_note)


def _model(report: Report) -> report_model.Allreduce:
    return report.suite_models.get(KIND) or report_model.Allreduce([], [])


def sections(report: Report, plots: list[tuple[str, Path]]) -> list[Part]:
    model = _model(report)
    found = [t for t in (allreduce_table(report, s) for s in model.sweeps) if t]
    if not (found or model.failures):
        return []
    return [
        Part(
            title="All-reduce bandwidth",
            caption=CAPTION,
            tables=found,
            plots=plots,
            notes_title="Failed all-reduce cells",
            notes=[(f.number, f"{f.machine.label}: {f.text}") for f in model.failures],
        )
    ]


def plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    if not _model(report).sweeps:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    return busbw_plots(report, folder)


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
                    Text(number_text(r["algbw_gbps"], ".3g")),
                    Text(number_text(r["busbw_gbps"], ".3g")),
                    Text(correct, note=note),
                ]
        rows.append(cells)
    headers = ["size"] + [f"{pattern_title(p)} {s}" for p in patterns for s in sub]
    slug = f"allreduce-{sweep.framework}-{sweep.backend}-{sweep.device}-n{sweep.world_size}"
    t = Table(sweep_title(report, sweep), headers, rows, anchor=slug, text_cols=1)
    t.groups = [("", 1)] + [(pattern_title(p), len(sub)) for p in patterns]
    t.short_headers = ["size"] + sub * len(patterns)
    return t


def busbw_plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    """Per (machine, framework, backend, device): bus bandwidth against message size, log
    x; a colour per world size, a line style per pattern (solid: all-reduce, dashed:
    reduce + broadcast, dotted: parameter server, when the engine measured them)."""
    from xfbench.report.api import COLORS, SIZE, place_legend, plt, save_figure

    engines: dict[tuple, list] = {}
    for sweep in _model(report).sweeps:
        key = (report.machines.index(sweep.machine), sweep.framework, sweep.backend, sweep.device)
        engines.setdefault(key, []).append(sweep)
    out = []
    for (mi, framework, backend, device), sweeps in engines.items():
        fig, ax = plt.subplots(figsize=SIZE)
        lines = 0
        sizes: set[int] = set()
        # one worker moves no bytes between workers (busbw 0 by definition): not drawn
        shown_sweeps = sorted((s for s in sweeps if s.world_size > 1), key=lambda s: s.world_size)
        # the same line style for a pattern in every plot, whichever patterns it has
        styles = {p: LINE_STYLES.get(p, "-.") for p in patterns_of(sweeps)}
        for si, sweep in enumerate(shown_sweeps):
            for pattern in patterns_of([sweep]):
                points = sorted(
                    (size, rows[pattern]["busbw_gbps"])
                    for size, rows in sweep.rows.items()
                    if pattern in rows
                    and rows[pattern]["status"] == "ok"
                    and rows[pattern]["busbw_gbps"] is not None
                    and size > 0
                )
                if not points:
                    continue
                sizes.update(s for s, _ in points)
                ax.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    marker="o",
                    markersize=3,
                    color=COLORS[si % len(COLORS)],
                    linestyle=styles[pattern],
                    label=f"{pattern_title(pattern)}, {plural(sweep.world_size, 'worker')}",
                )
                lines += 1
        if not lines:
            plt.close(fig)
            continue
        ax.set_xscale("log", base=2)
        shown = sorted(sizes)
        step = max(1, len(shown) // 8)  # a readable number of size labels
        ax.set_xticks(shown[::step], [size_text(int(s)) for s in shown[::step]], fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel("message size")
        ax.set_ylabel("bus bandwidth (GB/s)")
        where = sweeps[0].device_name if device != "cpu" else "cpu"
        machine = report.machines[mi]
        title = f"{framework} {backend} on {where}" + (
            f" ({machine.short})" if len(report.machines) > 1 else ""
        )
        ax.set_title(f"All-reduce bus bandwidth: {title}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        place_legend(ax, lines)
        path = folder / f"busbw-{plain(framework)}-{plain(backend)}-{plain(device)}-{mi}.png"
        out.append((f"Bus bandwidth against message size, {title}", save_figure(fig, path)))
    return out


def csv_files(report: Report) -> list[tuple[str, tuple[str, ...], list[dict]]]:
    return [("report-allreduce.csv", COLUMNS, csv_rows(report))]


def csv_rows(report: Report) -> list[dict]:
    out = []
    for sweep in _model(report).sweeps:
        m = sweep.machine
        for size in sorted(sweep.rows):
            for _pattern, r in sorted(sweep.rows[size].items()):
                run = next(
                    (
                        run.name
                        for run in m.runs
                        if any(s["source"] == r["source"] for s in run.of(KIND))
                    ),
                    "",
                )
                out.append(
                    {
                        **{k: r[k] for k in COLUMNS if k in r},
                        "machine": m.label,
                        "host": m.host,
                        "run": run,
                        "framework": sweep.framework,
                        "backend": sweep.backend,
                        "device": sweep.device,
                        "device_name": sweep.device_name,
                        "world_size": sweep.world_size,
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
