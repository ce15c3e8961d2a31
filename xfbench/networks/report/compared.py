"""Which of Table 7's configurations and machines is faster: the fastest per network and
column (in one run's rounds, and over several runs of a machine), each cell two machines
both measured, each machine against the base one, and the kernels each framework ran,
which are what two machines' numbers compare."""

from __future__ import annotations

import math

from xfbench.harness.stats import ratio_ci
from xfbench.networks.report.cells import cells_of, machine_cells
from xfbench.networks.report.keys import col_label, row_key, row_label
from xfbench.networks.report.model import table7_content
from xfbench.report.api import (
    Report,
    Table,
    Text,
    as_text,
    interval,
    machine_groups,
    noise_floor,
    ratio_over_runs,
)


def verdict(a, b, floor: float = 0.0) -> str:
    """How two timed results compare: "1.45x (CI 1.38-1.52x)" when a is faster beyond
    noise, else "within noise (1.02x, CI 0.97-1.08x)"; the ratio is b's time over a's.
    floor: results of two runs (two machines), whose interval is widened by the
    run-to-run noise of the kind of workload (report/noise.py)."""
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
    rows = []
    for block in table7_content(
        report
    ).blocks:  # in Table 7's order: the tasks', then docs/models.md's
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


def fastest_over_runs_table(report: Report) -> Table | None:
    """Per machine measured by several runs, network and column: the fastest framework
    and mode over the runs (geometric mean of each run's median), and the next one's time
    over it with its interval over runs, or within noise."""
    rows = []
    for group in machine_groups(report):
        cells: dict[tuple, dict[tuple, list[float]]] = {}
        for m in group:
            for (block, row, col), r in machine_cells(m).results.items():
                cells.setdefault((block, col), {}).setdefault(row, []).append(r.median)
        for (block, col), found in sorted(cells.items(), key=lambda kv: str(kv[0])):
            timed = sorted(
                ((row, t) for row, t in found.items() if len(t) >= 2),
                key=lambda kv: math.exp(sum(math.log(x) for x in kv[1]) / len(kv[1])),
            )
            if len(timed) < 2:
                continue
            (first, a), (second, b) = timed[0], timed[1]
            ratio, low, high = ratio_over_runs(a, b)
            said = (
                "within noise"
                if low <= 1 <= high
                else f"x{ratio:.3g} (95 % CI {low:.3g}-{high:.3g})"
            )
            rows.append(
                [
                    Text(group[0].base_label),
                    Text(f"{block[1]} {block[0]}, batch {block[2]}"),
                    Text(col_label(col)),
                    Text(row_label(first)),
                    Text(row_label(second)),
                    Text(str(min(len(a), len(b)))),
                    Text(said),
                ]
            )
    if not rows:
        return None
    return Table(
        "Fastest per network over runs",
        ["machine", "network", "column", "fastest", "next", "runs", "next over fastest"],
        rows,
        anchor="fastest-over-runs",
        text_cols=7,
        caption="Each configuration's time is the geometric mean of its runs' medians; the "
        "ratio's interval is Welch's t-interval on the runs' log medians (report/runs.py); "
        "where it holds 1 the two are within noise, and no faster is said.",
    )


def machines_compared_table(report: Report) -> Table | None:
    """Each cell two machines both measured, the base machine against each other one:
    which is faster and by how much, or within noise (their intervals' ratio, widened by
    the run-to-run noise of the cell's kind, report/noise.py, contains 1)."""
    if len(report.machines) < 2 or report.base is None:
        return None
    ref = report.base
    rows = []
    for block in table7_content(report).blocks:
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
                        as_text(f"{who}: " + verdict(fast, slow, noise_floor(*block.key[:2]))),
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
            for r in cells_of(run):
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
    if not table7_content(report).summaries:
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
        for s in table7_content(report).summaries
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
