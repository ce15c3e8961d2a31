"""Table 7's plots: seconds per mini-batch against CPU threads, and on each accelerator, a
plot of each for every network and batch (report.model's blocks)."""

from __future__ import annotations

from pathlib import Path

from xfbench.networks.report.model import Block, table7_content
from xfbench.report.api import Report


def draw(report: Report, folder: Path) -> list[tuple[str, Path]]:
    """Every block's plots, (caption, path): the threads plots, then the accelerators';
    one that cannot be drawn is said in report.problems and costs no other."""
    from xfbench.report.api import safely

    drawn: dict[str, list[tuple[str, Path]]] = {"threads": [], "accelerators": []}
    for block in table7_content(report).blocks:
        for kind, draw in (("threads", threads_plot), ("accelerators", accelerator_plot)):
            what = f"{kind}-{block.slug}"
            path = safely(
                draw, report, block, folder / f"{what}.png", problems=report.problems, what=what
            )
            if path:
                drawn[kind].append((block.title, path))
    return drawn["threads"] + drawn["accelerators"]


def _interval(cell) -> tuple[float, float]:
    """The median's confidence interval, or the median itself where none was recorded."""
    info = cell.result.info if cell.result else {}
    low, high = info.get("ci_low_s"), info.get("ci_high_s")
    if isinstance(low, int | float) and isinstance(high, int | float) and low <= cell.value <= high:
        return float(low), float(high)
    return cell.value, cell.value


def threads_plot(report: Report, block: Block, path: Path) -> Path | None:
    """Seconds per mini-batch against CPU threads, both log scale, a line per row
    (and per machine when there are several)."""
    from matplotlib import ticker

    from xfbench.report.api import COLORS, MARKERS, SIZE, STYLES, place_legend, plt, save_figure

    lines = 0
    several = len(report.machines) > 1
    fig, ax = plt.subplots(figsize=SIZE)
    for ri, row in enumerate(block.rows):
        for mi, machine in enumerate(report.machines):
            points = sorted(
                (c.key[1], cell.value, _interval(cell))
                for c, cell in zip(block.columns, row.cells)
                if c.machine == mi and c.key[0] == "cpu" and cell.value is not None and c.key[1] > 0
            )
            if len(points) < 1:
                continue
            label = row.label + (f" ({machine.short})" if several else "")
            # several machines: a colour per machine, so two machines never share one, and
            # a marker and line style per row; one machine: a colour per row
            ax.errorbar(
                [p[0] for p in points],
                [p[1] for p in points],
                yerr=[[p[1] - p[2][0] for p in points], [p[2][1] - p[1] for p in points]],
                marker=MARKERS[ri % len(MARKERS)] if several else "o",
                label=label,
                color=COLORS[(mi if several else ri) % len(COLORS)],
                linestyle=STYLES[ri % len(STYLES)] if several else "-",
                capsize=3,
            )
            lines += 1
    if not lines:
        plt.close(fig)
        return None
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    threads = sorted({c.key[1] for c in block.columns if c.key[0] == "cpu" and c.key[1] > 0})
    ax.set_xticks(threads, [str(t) for t in threads])  # the thread counts measured, as integers
    ax.minorticks_off() if len(threads) < 2 else None
    ax.set_xlabel("CPU threads")
    ax.set_ylabel("seconds per mini-batch (median, CI bars)")
    # plain numbers on the log axis, not powers of ten
    ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(ticker.FormatStrFormatter("%g"))
    ax.set_title(block.title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    place_legend(ax, lines)
    return save_figure(fig, path)


def accelerator_plot(report: Report, block: Block, path: Path) -> Path | None:
    """Seconds per mini-batch on each accelerator, a bar per row."""
    from xfbench.report.api import SIZE, place_legend, plt, save_figure

    columns = [(ci, c) for ci, c in enumerate(block.columns) if c.key[0] == "acc"]
    if not columns:
        return None
    rows = [row for row in block.rows if any(row.cells[ci].value is not None for ci, _ in columns)]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    width = 0.8 / len(rows)
    for i, row in enumerate(rows):
        xs = [j + i * width for j in range(len(columns))]
        cells = [row.cells[ci] for ci, _ in columns]
        ys = [c.value or 0.0 for c in cells]
        ci = [_interval(c) if c.value is not None else (0.0, 0.0) for c in cells]
        err = [[y - lo for y, (lo, _) in zip(ys, ci)], [hi - y for y, (_, hi) in zip(ys, ci)]]
        ax.bar(xs, ys, width=width, label=row.label, yerr=err, capsize=3)
    ax.set_xticks([j + width * (len(rows) - 1) / 2 for j in range(len(columns))])
    ax.set_xticklabels([c.label for _, c in columns], fontsize=8, rotation=10)
    ax.set_ylabel("seconds per mini-batch (median)")
    ax.set_title(block.title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    place_legend(ax, len(rows))
    return save_figure(fig, path)
