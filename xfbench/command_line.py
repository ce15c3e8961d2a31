"""How every xfbench command reads its command line: argparse whose bad argument is one
line and a non-zero exit, never a usage block or a traceback, and the checks of a value
that its code runs before any work (a path to write to, a number within bounds, a time
limit). The options of the suites and of `xfbench run` themselves are declared in
xfbench/options.py."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from xfbench.errors import UsageError


class ArgumentParser(argparse.ArgumentParser):
    """argparse for every xfbench command: a bad argument is a UsageError, one line, instead
    of argparse's usage block and exit."""

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")


def parse_command_line(parser: ArgumentParser, argv: list[str] | None):
    """The parsed arguments, or the exit status when there is nothing to run: 0 after
    --help, 2 after one line naming a bad argument."""
    try:
        return parser.parse_args(argv)
    except UsageError as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help
        return int(e.code or 0) if not isinstance(e.code, str) else 2


def output_path(option: str, value: str | None, *, folder: bool = False) -> Path | None:
    """An output option's path, checked before any work: its folder (the path itself,
    folder=True) made and written to once; UsageError in one line where it cannot be."""
    import tempfile

    if not value:
        return None
    path = Path(value)
    where = path if folder else path.parent
    try:
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=where):
            pass
    except OSError as e:
        raise UsageError(f"{option} {value}: cannot write there ({e.strerror or e})") from None
    return path


def number(
    option: str,
    value,
    *,
    low: float = 0.0,
    high: float = math.inf,
    low_inclusive: bool = False,
    what: str = "a number",
) -> float:
    """A finite number within (low, high) (low included when low_inclusive), or
    UsageError in one line: nan, inf and out-of-range values never pass, since each would
    quietly switch off a limit or run without end."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    above = x >= low if low_inclusive else x > low
    if not (math.isfinite(x) and above and x < high):
        bound = f"{'at least' if low_inclusive else 'above'} {low:g}"
        bound += f" and below {high:g}" if math.isfinite(high) else ""
        raise UsageError(f"{option} must be {what} {bound}, not {value!r}")
    return x


def whole_number(low: int):
    """An argparse type: a whole number, at least low (argparse names the option)."""

    def whole(text: str) -> int:
        if not text.strip().isdigit() or int(text) < low:
            raise argparse.ArgumentTypeError(f"a whole number, {low} or more, not {text!r}")
        return int(text)

    return whole


def seconds(option: str, value) -> float | None:
    """A time limit: None when not given, else a positive finite number of seconds."""
    if value is None:
        return None
    try:
        return number(option, value)
    except UsageError:
        raise UsageError(
            f"{option} must be a positive, finite number of seconds, not {value!r}"
        ) from None
