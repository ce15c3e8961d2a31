"""Markdown for terminals and pull requests (tables by tabulate, GitHub style)."""

from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from xfbench.report import anchors, roofline, scaling_tables, serving, tables
from xfbench.report.model import Report
from xfbench.report.table import Table, Text

INTRO = (
    "Seconds per mini-batch are medians of the timed rounds (pytest-benchmark's stats.median). "
    "**Bold** marks the best of its column; `-` means not run; a failed cell shows its "
    "status and a footnote with the reason."
)


def esc(text: str) -> str:
    """Text from JSON inside a Markdown table: no raw HTML, no broken table."""
    return (
        str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "\\<").replace("\n", " ")
    )


def _cell(t: Text) -> str:
    s = esc(t.text)
    if t.best and s:
        s = f"**{s}**"
    if t.note:
        s += f" [{t.note}]"
    return s


def table(t: Table, level: int = 3) -> str:
    parts = [f"{'#' * level} {esc(t.title)}", ""]
    parts.append(
        tabulate(
            [[_cell(c) for c in row] for row in t.rows],
            headers=[esc(h) for h in t.headers],
            tablefmt="github",
            disable_numparse=True,
        )
    )
    if t.caption:
        parts += ["", esc(t.caption)]
    for sub in t.sub:
        parts += ["", table(sub, level + 1)]
    return "\n".join(parts)


def _plots(plots: dict, kinds, out: Path) -> list[str]:
    return [
        line
        for kind in kinds
        for caption, path in plots.get(kind, [])
        for line in (f"![{esc(caption)}]({path.relative_to(out).as_posix()})", "")
    ]


def scaling_section(report: Report, plots: dict, out: Path) -> list[str]:
    """Data-parallel scaling and all-reduce: tables, failures and their plots."""
    lines = []
    scaling = scaling_tables.scaling_tables(report)
    if scaling:
        lines += ["## Data-parallel scaling", "", esc(scaling_tables.CAPTION), ""]
        for t in scaling:
            lines += [table(t), ""]
        lines += _plots(plots, ("efficiency",), out)
    allreduce = scaling_tables.allreduce_tables(report)
    if allreduce:
        lines += ["## All-reduce bandwidth", "", esc(scaling_tables.ALLREDUCE_CAPTION), ""]
        for t in allreduce:
            lines += [table(t), ""]
        lines += _plots(plots, ("busbw",), out)
    failures = scaling_tables.failure_lines(report)
    if failures:
        lines += (
            ["### Failed scaling and all-reduce cells", ""]
            + [f"- [{n}] {esc(x)}" for n, x in failures]
            + [""]
        )
    return lines


def roofline_section(report: Report, plots: dict, out: Path) -> list[str]:
    """The measured roofs, what bounds each CPU cell, and the roofline plots."""
    tables_ = roofline.tables(report)
    if not tables_:
        return []
    lines = ["## Roofline", ""]
    for t in tables_:
        lines += [table(t), ""]
    return lines + _plots(plots, ("roofline",), out)


def serving_section(report: Report, plots: dict, out: Path) -> list[str]:
    """LoadGen's scenarios: a table per machine and network, failures, plots."""
    tables_ = serving.tables(report)
    failures = serving.failure_lines(report)
    if not (tables_ or failures):
        return []
    lines = ["## Serving (MLPerf LoadGen)", "", esc(serving.CAPTION), ""]
    for t in tables_:
        lines += [table(t), ""]
    if failures:
        lines += ["### Serving cells that gave no number", ""] + [f"- {esc(x)}" for x in failures]
        lines.append("")
    return lines + _plots(plots, ("serving",), out)


def render(report: Report, plots: dict, out: Path, generated: str) -> str:
    lines = [
        "# xfbench report",
        "",
        f"Generated {generated}. {INTRO}",
        "",
    ]
    answer = tables.answer_table(report)
    if answer:  # the answer first: the scores, with what they rest on
        lines += [table(answer, 2), ""]
    summary = tables.procurement_summary(report)
    if summary:  # then what money buys
        lines += [table(summary, 2), ""]
    fastest = tables.fastest_table(report)
    if fastest:  # the answer first
        lines += [table(fastest, 2), ""]
    lines += [table(tables.machines_table(report), 2), ""]
    for t in (tables.machines_compared_table(report), tables.backends_table(report)):
        if t:
            lines += [table(t, 2), ""]
    summary = tables.summary_table(report)
    if summary:
        lines += [table(summary, 2), ""]
    compact = tables.compact_table7(report)
    if compact:
        lines += [table(compact, 2), ""]
    if report.blocks or not (report.scaling or any(m.serving for m in report.machines)):
        lines += [
            "## Table 7: seconds per mini-batch",
            "",
            "Columns: CPU thread counts (`4t` = 4 threads), then each accelerator by name.",
            "",
        ]
    for block in report.blocks:
        lines += [table(tables.table7(block)), ""]
    if report.footnotes:
        lines += (
            ["### Failed cells", ""]
            + [f"- [{n}] {esc(x)}" for n, x in tables.footnote_lines(report)]
            + [""]
        )
    if report.blocks:
        lines += [
            "## Throughput, TFLOP/s, scaling, compile time, memory",
            "",
            "samples/s = batch / median; TFLOP/s from the network's analytic FLOPs; speedup and "
            "parallel efficiency over the same row's 1-thread CPU cell.",
            "",
        ]
    for block in report.blocks:
        t = tables.details_table(report, block)
        if t:
            lines += [table(t), ""]
    copies = tables.copies_table(report)
    if copies:
        lines += [table(copies, 2), ""]
    lines += scaling_section(report, plots, out)
    lines += serving_section(report, plots, out)
    lines += roofline_section(report, plots, out)
    for t in (
        tables.procurement_table(report),
        tables.gemm_table(report),
        anchors.anchors_table(report),
    ):
        if t:
            lines += [table(t, 2), ""]
    if any(plots.get(kind) for kind in ("threads", "accelerators", "gemm")):
        lines += ["## Plots", ""]
        for kind in ("threads", "accelerators", "gemm"):
            for caption, path in plots[kind]:
                lines += [f"![{esc(caption)}]({path.relative_to(out).as_posix()})", ""]
    if report.problems:
        lines += ["## Left out", ""] + [f"- {esc(p)}" for p in report.problems] + [""]
    return "\n".join(lines)
