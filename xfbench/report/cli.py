"""`xfbench report RESULTS... [--format md,html,csv] [--out DIR] [--paper]
[--base MACHINE] [--prices FILE]`"""

from __future__ import annotations

import sys
from pathlib import Path

from xfbench import command_line
from xfbench.errors import UsageError
from xfbench.report import FORMATS


def parser() -> command_line.ArgumentParser:
    p = command_line.ArgumentParser(
        prog="xfbench report",
        description="Render Table 7 of Shi et al. 2016 and more from xfbench results: "
        "runner folders (results/<date>-<host>/) or pytest-benchmark JSON files.",
    )
    p.add_argument(
        "results",
        nargs="+",
        metavar="RESULTS",
        type=command_line.RUN,
        help="runner folders or pytest --benchmark-json files; several machines "
        "are shown side by side",
    )
    p.add_argument(
        "--format",
        default="md,html,csv",
        type=command_line.WORD,
        help="comma-separated: md, html, csv (default: all three)",
    )
    p.add_argument(
        "--out",
        default=None,
        type=command_line.OUTPUT_FOLDER,
        help="folder for the report (default: the results folder when one folder is "
        "given, else ./xfbench-report)",
    )
    p.add_argument(
        "--paper", action="store_true", help="show Shi et al.'s own Table 7 numbers beside ours"
    )
    p.add_argument(
        "--base",
        default=None,
        metavar="MACHINE",
        type=command_line.TEXT,
        help="the machine the others are compared with, side by side (label, host or run "
        "name; default: the first)",
    )
    p.add_argument(
        "--prices",
        default=None,
        metavar="FILE",
        type=command_line.FILE,
        help="TOML or JSON prices and power per machine, for the procurement view "
        "(see report/data/prices.example.toml)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    from xfbench.report import render
    from xfbench.report.load import LoadError
    from xfbench.report.procurement import PricesError

    args = command_line.parse_command_line(parser(), argv)
    if isinstance(args, int):
        return args
    try:
        formats, out = _formats(args.format), _out(args)
    except UsageError as e:
        print(f"xfbench report: {e}", file=sys.stderr)
        return 2
    problems: list[str] = []
    try:
        written = render(
            args.results,
            out,
            formats,
            with_paper=args.paper,
            base=args.base,
            prices=args.prices,
            problems=problems,
        )
    except (LoadError, PricesError, ValueError) as e:
        print(f"xfbench report: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        where = e.filename or out
        print(f"xfbench report: cannot write {where}: {e.strerror or e}", file=sys.stderr)
        return 1
    for path in written:
        if path.suffix != ".png":
            print(path)
    plots = sum(1 for p in written if p.suffix == ".png")
    if plots:
        print(f"{out / 'plots'}/ ({plots} plots)")
    # Written, but not from everything given: each file left out is named (the report's
    # "Left out" section says the same), and the exit status says it.
    for problem in problems:
        print(f"xfbench report: left out: {problem}", file=sys.stderr)
    return 1 if problems else 0


def _formats(given: str) -> list[str]:
    from xfbench.harness.selection import comma_list

    formats = comma_list(given)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise UsageError(
            f"unknown format {', '.join(unknown) or '(none)'}; known: {', '.join(FORMATS)}"
        )
    return formats


def _out(args) -> Path:
    """--out, checked; else a runner folder given alone; else xfbench-report."""
    if args.out:
        return command_line.output_path("--out", args.out, folder=True)
    if len(args.results) == 1 and Path(args.results[0]).is_dir():
        return Path(args.results[0])
    return Path("xfbench-report")


if __name__ == "__main__":
    sys.exit(main())
