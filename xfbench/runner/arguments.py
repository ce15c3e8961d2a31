"""`xfbench run`'s command line: its own options, declared here (the sweep's and its
output's, and --suite), and every option it takes, with the common options of the suites
and the suites' own (xfbench/options.py). From them come its parser (runner.cli), which
options apply to each --suite (runner.plan), docs/running.md's synopsis and its options
table (tests/test_options.py holds the page to them). Read them once the suites are
declared (plugin.declared()).
"""

from __future__ import annotations

from xfbench import options
from xfbench.options import ALL, Option

# Where an option shows in `xfbench run --help`; a suite's own options, under its name.
GROUPS = {
    "suite": "",
    "cells": "cells (as for pytest xfbench/suites/; an option naming several things takes "
    "them comma-separated)",
    "sweep": "the sweep",
    "output": "output",
}

# `xfbench run`'s own options, none of pytest's: --skip-roofs, shown before the common
# --cell-timeout, and the rest of the sweep's and those of its output, shown after it.
SKIP_ROOFS = Option(
    name="skip-roofs",
    values="measure no roofs before the cells (the machine's bandwidth and peaks, "
    "docs/measurement.md); roofs already in the folder's roofs.json are kept",
    default="measure the roofs of each CPU thread count and GPU of the sweep first",
    flag=True,
    pytest=False,
    run=ALL,
    group="sweep",
)
SWEEP: tuple[Option, ...] = (
    Option(
        name="results",
        values="the results folder",
        default="resume the newest unfinished `results/<date>-<host>` of this selection, "
        "else start today's",
        pytest=False,
        run=ALL,
        group="sweep",
        metavar="DIR",
        kind="output folder",
    ),
    Option(
        name="retry-failed",
        values="run again the cells recorded in failed/ (failed, timed out, killed, out of "
        "memory, or skipped)",
        default="a cell with a failure record is finished",
        flag=True,
        pytest=False,
        run=ALL,
        group="sweep",
    ),
    Option(
        name="retry-contended",
        values="measure again the cells whose result is marked contended (other processes "
        "took more than 10% of their CPUs); the new record replaces the old",
        default="a contended result is finished",
        flag=True,
        pytest=False,
        run=ALL,
        group="sweep",
    ),
)
OUTPUT: tuple[Option, ...] = (
    Option(
        name="dry-run",
        values="print the cells, the process groups and an estimate of each group's time "
        "(from the preset and the cells' FLOPs at an assumed rate), then stop: nothing is "
        "measured or written",
        default="run the sweep",
        flag=True,
        pytest=False,
        run=ALL,
        group="output",
    ),
    Option(
        name="quiet",
        values="no progress bar or table: one line at the end",
        default="progress bar and table",
        flag=True,
        pytest=False,
        run=ALL,
        group="output",
    ),
    Option(
        name="bundle",
        values="pack the results folder into a checked bundle beside it when the sweep "
        "ends (xfbench bundle; FOLDER.xfbench.zip), for xfbench collect",
        default="no bundle",
        flag=True,
        pytest=False,
        run=ALL,
        group="output",
    ),
    Option(
        name="json-only",
        values="print only the merged JSON's path",
        default="progress bar and table",
        flag=True,
        pytest=False,
        run=ALL,
        group="output",
    ),
)


def suite_option() -> Option:
    """--suite: one of the suites `xfbench run` sweeps."""
    named = [f"`{name}` ({what})" for name, what in options.SWEEPS.items()]
    return Option(
        name="suite",
        values=", ".join(named[:-1]) + (" or " if len(named) > 1 else "") + named[-1],
        default=options.default_sweep(),
        pytest=False,
        run=ALL,
        group="suite",
    )


def every() -> tuple[Option, ...]:
    """Every option of pytest and of `xfbench run`: --suite, the common options of the
    cells, the suites' own, then those of the sweep and its output."""
    common = options.every()
    cells = tuple(o for o in common if o.group != "sweep")
    sweep = tuple(o for o in common if o.group == "sweep")
    suite = (suite_option(),) if options.SWEEPS else ()
    return (*suite, *cells, SKIP_ROOFS, *sweep, *SWEEP, *OUTPUT)


def run_options() -> tuple[Option, ...]:
    return tuple(o for o in every() if o.run)


def applies(suite: str) -> tuple[str, ...]:
    """The dests of the `xfbench run` options that apply to --suite suite."""
    return tuple(o.dest for o in run_options() if o.applies(suite))


def add_run_arguments(parser, kinds: dict) -> None:
    """`xfbench run`'s options, each checked by its kind (kinds: command_line.KINDS)."""
    groups = {}
    for o in run_options():
        if o.group not in groups:
            title = GROUPS.get(o.group, f"--suite {o.group}")
            groups[o.group] = parser.add_argument_group(title) if title else parser
        if o.flag:
            groups[o.group].add_argument(f"--{o.name}", action="store_true", help=o.help(True))
        else:
            groups[o.group].add_argument(
                f"--{o.name}", metavar=o.metavar, type=kinds[o.kind], help=o.help(True)
            )


def run_synopsis(width: int = 92) -> str:
    """docs/running.md's synopsis of `xfbench run`, every option of it."""
    lines, line = [], "xfbench run"
    for o in run_options():
        part = f"[--{o.name}]" if o.flag else f"[--{o.name} {o.metavar or o.dest.upper()}]"
        if len(line) + 1 + len(part) > width:
            lines.append(line)
            line = " " * len("xfbench run")
        line += " " + part
    return "\n".join([*lines, line])


def markdown_table() -> str:
    """docs/running.md's options table."""

    def where(o: Option) -> str:
        out = ["pytest"] if o.pytest else []
        if o.run == ALL:
            out.append("run")
        elif o.run:
            out.append("run " + ", ".join(options.TAKERS.get(o.name, ())))
        return "; ".join(out)

    lines = ["| option | takes | default | where |", "|---|---|---|---|"]
    for o in every():
        takes = o.takes() if not o.run_values else f"{o.takes()}; xfbench run: {o.run_values}"
        if o.flag:
            takes = f"(a flag) {takes}"
        lines.append(f"| `--{o.name}` | {takes} | {o.means_by_default()} | {where(o)} |")
    return "\n".join(lines)
