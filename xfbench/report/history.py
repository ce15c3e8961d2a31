"""`xfbench noise RUN RUN RUN... --into FILE`: one machine's history, for `xfbench compare
--noise FILE` (report/compare.py): each cell's log median in each of three or more of its
runs (ten or more: compare's A/A critical values, report/family.py), their spread, and each
kind's model of its run-to-run noise (report/noise.py). A run given twice is refused. It
writes where it is told, never into the package, whose noise file is a prior.
"""

from __future__ import annotations

import sys
from pathlib import Path

from xfbench import command_line
from xfbench.errors import UsageError
from xfbench.report import noise
from xfbench.report.compare import _cells
from xfbench.report.family import HISTORY_RUNS
from xfbench.report.load import LoadError, load_many

LEAST_RUNS = 3  # a machine's history: every pair of three runs, three log ratios a cell


def main(argv: list[str] | None = None) -> int:
    """`xfbench noise RUN RUN RUN... --into FILE`: one machine's between-run noise, fitted
    on its runs, for `xfbench compare --noise FILE`."""

    p = command_line.ArgumentParser(
        prog="xfbench noise",
        description="One machine's history for xfbench compare --noise FILE: three or more "
        "of its runs (runner folders or JSON files), each given once; each cell's log "
        "median in each run, its spread, and each kind's noise model. With ten runs or "
        "more, compare takes its critical values from A/A splits of them.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", type=command_line.RUN)
    p.add_argument("--into", required=True, metavar="FILE", type=command_line.OUTPUT_FILE,
                   help="the noise file to write")  # fmt: skip
    args = command_line.parse_command_line(p, argv)
    if isinstance(args, int):
        return args
    try:
        command_line.output_path("--into", args.into)
        runs = [r for path in args.runs for r in load_many(path)]
        if len(runs) < LEAST_RUNS:
            raise UsageError(f"{len(runs)} run(s): the noise needs {LEAST_RUNS} or more")
        machines = sorted({r.machine.get("label", "?") for r in runs})
        if len(machines) > 1:
            raise UsageError(f"the runs are of {len(machines)} machines: {', '.join(machines)}")
        if Path(args.into).resolve() == noise.NOISE.resolve():
            raise UsageError("--into names the package's own prior; write elsewhere")
    except (UsageError, LoadError) as e:
        print(f"xfbench noise: {e}", file=sys.stderr)
        return 2
    cells = [_cells(r) for r in runs]
    names = [r.path for r in runs]
    twice = noise.duplicate(list(zip(names, cells)))
    if twice:
        print(f"xfbench noise: {twice[1]} is {twice[0]} again (every median the same): "
              "give each run once", file=sys.stderr)  # fmt: skip
        return 2
    models = noise.fit_all(noise.log_ratios(cells))
    noise.write(models, {"runs": args.runs, "machine": machines[0], "by": "xfbench noise"},
          Path(args.into), noise.cell_spreads(cells), runs=noise.history(names, cells))  # fmt: skip
    for key, m in sorted(models.items()):
        print(f"{key:28s} scale {m.scale:.4f}  t({m.df:.1f})  from {m.pairs} log ratios")
    if len(runs) < HISTORY_RUNS:
        print(f"{len(runs)} runs: compare takes its critical values from A/A splits of "
              f"{HISTORY_RUNS} or more; with these, from each cell's t (Sidak)")  # fmt: skip
    print(f"wrote {args.into}: xfbench compare BASE NEW --noise {args.into}")
    return 0
