"""The `xfbench` command: `xfbench run ...` (the sweep runner), `xfbench report ...`,
`xfbench score ...`, `xfbench profile ...`, `xfbench data check ...`,
`xfbench acceptance ...` and `xfbench reference ...`.

Each subcommand lives in its own package and is imported only when called.
"""

from __future__ import annotations

import importlib
import os
import sys

from xfbench import environment
from xfbench.errors import UsageError

SUBCOMMANDS = {
    "run": (
        "xfbench.runner.cli",
        "run cells in fresh processes, one per (framework, device, threads)",
    ),
    "report": ("xfbench.report.cli", "render tables and plots from pytest-benchmark JSON"),
    "score": (
        "xfbench.report.score",
        "the machine and per-core scores, with intervals, against a reference result set",
    ),
    "compare": (
        "xfbench.report.compare",
        "two runs or sets of runs, cell by cell: ratios, intervals, verdicts, an exit code",
    ),
    "noise": (
        "xfbench.report.history",
        "keep one machine's runs as its history, three or more (ten calibrate compare --noise)",
    ),
    "bundle": ("xfbench.bundle.cli", "pack runner folders into checked, self-describing bundles"),
    "collect": (
        "xfbench.bundle.collect",
        "merge bundles into one SQLite database that report, score and compare read",
    ),
    "profile": (
        "xfbench.roofline.cli",
        "a network's layers: FLOPs, bytes moved, arithmetic intensity (from its spec)",
    ),
    "data": ("xfbench.data.check", "check the real data sets under --data-dir (data check)"),
    "acceptance": ("xfbench.acceptance.cli", "the GPU acceptance run: probe, steps, summary"),
    "reference": (
        "xfbench.acceptance.reference",
        "make what GPU windows brought back checked-in references",
    ),
}


def usage() -> str:
    lines = ["usage: xfbench COMMAND [options] | xfbench --version", "", "commands:"]
    lines += [f"  {name:<10} {text}" for name, (_, text) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        import xfbench

        print(f"xfbench {xfbench.__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(
            f"xfbench: unknown command {name!r}; commands: {', '.join(SUBCOMMANDS)}",
            file=sys.stderr,
        )
        return 2
    try:
        from xfbench.plugin import declared

        declared()  # the suites' own variables are checked with xfbench's
        environment.check_environment()
    except UsageError as e:
        print(f"xfbench: {e}", file=sys.stderr)
        return 2
    except ImportError as e:  # a suite named in PYTEST_PLUGINS that cannot be imported
        print(f"xfbench: cannot import the suites: {e}", file=sys.stderr)
        return 2
    module = SUBCOMMANDS[name][0]
    try:
        sub = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            print(
                f"xfbench: the {name!r} command is not part of this checkout yet", file=sys.stderr
            )
            return 2
        raise
    return _run_command(name, sub.main, rest)


def _run_command(name: str, command_main, rest: list[str]) -> int:
    """A command's main on its arguments, its late usage errors and a closed pipe answered."""
    try:
        rc = command_main(rest)
        sys.stdout.flush()  # here, where a closed pipe can still be answered
        return rc
    except UsageError as e:
        # A usage error that a command's own code let through (checked later than its
        # parsing) is still one line and exit 2, never a traceback.
        print(f"xfbench {name}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`xfbench score ... | head -1`): nothing left to say to it,
        # and Python's own flush at exit must not fail again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
