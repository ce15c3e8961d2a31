"""Markdown for terminals and pull requests (tables by tabulate, GitHub style)."""

from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from xfbench.report.model import Report
from xfbench.report.sections import Part, parts
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


def part(p: Part, out: Path) -> list[str]:
    """One part of the report (report/sections.py) in Markdown."""
    lines = [f"## {esc(p.title)}", ""] if p.title else []
    lines += [esc(p.caption), ""] if p.caption else []
    for t in p.tables:
        lines += [table(t, p.level), ""]
    if p.notes:
        lines += [f"### {esc(p.notes_title)}", ""]
        lines += [f"- [{n}] {esc(x)}" for n, x in p.notes] + [""]
    if p.items:
        lines += [f"### {esc(p.items_title)}", ""] if p.items_title else []
        lines += [f"- {esc(x)}" for x in p.items] + [""]
    for caption, path in p.plots:
        lines += [f"![{esc(caption)}]({path.relative_to(out).as_posix()})", ""]
    return lines


def render(report: Report, plots: dict, out: Path, generated: str) -> str:
    lines = ["# xfbench report", "", f"Generated {generated}. {INTRO}", ""]
    for p in parts(report, plots):
        lines += part(p, out)
    return "\n".join(lines)
