"""Plots of the scaling and all-reduce results (matplotlib, Agg, PNG files):
parallel efficiency against workers per network, and bus bandwidth against message size
per all-reduce engine, where the baselines (reduce + broadcast, parameter server) fall
behind all-reduce as the workers grow."""

from __future__ import annotations

import re
from pathlib import Path

from xfbench.report.model import Report, network_title
from xfbench.report.plots import COLORS, SIZE, STYLES, _legend, _safely, _save, plt
from xfbench.report.scaling import pattern_title, patterns_of
from xfbench.report.scaling_tables import batch_text, device_text, plural, size_text

LINE_STYLES = {"allreduce": "-", "reduce_broadcast": "--", "parameter_server": ":"}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:100]  # names come from JSON: keep paths plain


def efficiency_plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    """Per scaling kind and network: efficiency against workers, a line per framework,
    device and batch (a line style per machine), and the ideal 100 % line."""
    out = []
    several = len(report.machines) > 1
    for table in report.scaling.tables:
        networks = dict.fromkeys((r.network, r.scale) for r in table.rows)
        for network, scale in networks:
            fig, ax = plt.subplots(figsize=SIZE)
            lines = 0
            workers = set()
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
            _legend(ax, lines + 1)
            path = folder / f"efficiency-{table.kind}-{_slug(network)}-{scale}.png"
            out.append((f"Parallel efficiency, {title}", _save(fig, path)))
    return out


def busbw_plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    """Per (machine, framework, backend, device): bus bandwidth against message size, log
    x; a colour per world size, a line style per pattern (solid: all-reduce, dashed:
    reduce + broadcast, dotted: parameter server, when the engine measured them)."""
    engines: dict[tuple, list] = {}
    for sweep in report.scaling.sweeps:
        key = (report.machines.index(sweep.machine), sweep.framework, sweep.backend, sweep.device)
        engines.setdefault(key, []).append(sweep)
    out = []
    for (mi, framework, backend, device), sweeps in engines.items():
        fig, ax = plt.subplots(figsize=SIZE)
        lines = 0
        sizes = set()
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
        _legend(ax, lines)
        path = folder / f"busbw-{_slug(framework)}-{_slug(backend)}-{_slug(device)}-{mi}.png"
        out.append((f"Bus bandwidth against message size, {title}", _save(fig, path)))
    return out


def render(report: Report, folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """{"efficiency": [(caption, path)], "busbw": [...]}, written under folder (which
    report.plots.render has already cleared); plots that fail are listed in
    report.problems."""
    out: dict[str, list[tuple[str, Path]]] = {"efficiency": [], "busbw": []}
    if not report.scaling:
        return out
    folder.mkdir(parents=True, exist_ok=True)
    out["efficiency"] = (
        _safely(efficiency_plots, report, folder, problems=report.problems, what="efficiency") or []
    )
    out["busbw"] = (
        _safely(busbw_plots, report, folder, problems=report.problems, what="busbw") or []
    )
    return out
