"""How every xfbench command reads its command line: argparse whose bad argument is one
line and a non-zero exit, never a usage block or a traceback; the kinds of value an option
takes (Kind), each checked where the command line is parsed; and the checks of a value
that a command's code runs before any work (a path to write to, a number within bounds, a
time limit). The options of the suites and of `xfbench run` themselves are declared in
xfbench/options.py."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from xfbench.errors import UsageError


class ArgumentParser(argparse.ArgumentParser):
    """argparse for every xfbench command: a bad argument is a UsageError, one line, instead
    of argparse's usage block and exit."""

    def error(self, message):
        # argparse says "argument --minutes: must be ..."; a Kind's refusal reads as a
        # sentence after the option's name: "--minutes must be ..."
        message = re.sub(r"^argument (\S+): (?=must |is )", r"\1 ", message)
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


class Kind:
    """An option's argparse `type`: the kind of value it takes, checked where the command
    line is parsed, so that a wrong one is one line before any work.

    `kind` names what it takes ("number", "whole number", "whole numbers", "word", "text",
    "file", "folder", "path", "run", "runs", "output file", "output folder"):
    tests/test_every_option.py reads it from each parser and feeds that kind's wrong values.
    `check` gives the value the command reads, or raises UsageError with a message that
    follows the option's name ("must be ...", "is ..."); without one the text is kept, and
    the command checks it against what only it knows (a network, a framework) right after
    parsing. An empty value is refused for every kind: it would silently mean the default."""

    def __init__(self, kind: str, check: Callable[[str], object] | None = None):
        self.kind = kind
        self.check = check
        self.__name__ = kind  # argparse names a type by it

    def __call__(self, text: str):
        if not text.strip():
            raise argparse.ArgumentTypeError("is empty")
        if self.check is None:
            return text
        try:
            return self.check(text)
        except UsageError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        except OSError as e:  # a name too long, a folder this user may not enter
            raise argparse.ArgumentTypeError(
                f"cannot be read: {text} ({e.strerror or e})"
            ) from None

    def __repr__(self) -> str:
        return f"Kind({self.kind!r})"


def _number(
    value,
    *,
    low: float = 0.0,
    high: float = math.inf,
    low_inclusive: bool = False,
    what: str = "a number",
) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    above = x >= low if low_inclusive else x > low
    if not (math.isfinite(x) and above and x < high):
        bound = f"{'at least' if low_inclusive else 'above'} {low:g}"
        bound += f" and below {high:g}" if math.isfinite(high) else ""
        raise UsageError(f"must be {what} {bound}, not {value!r}")
    return x


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
        return _number(value, low=low, high=high, low_inclusive=low_inclusive, what=what)
    except UsageError as e:
        raise UsageError(f"{option} {e}") from None


def number_kind(
    what: str = "a number", *, low: float = 0.0, high: float = math.inf, low_inclusive=False
) -> Kind:
    """A number within bounds (as number()), kept as the text given: the command reads it
    with number(), and `xfbench run` hands it to its children as it came."""

    def check(text: str) -> str:
        _number(text, low=low, high=high, low_inclusive=low_inclusive, what=what)
        return text

    return Kind("number", check)


def share(text: str) -> str:
    """A share, 5% or 0.05 (at least 0), kept as the text given."""
    _number(text.strip().removesuffix("%"), low_inclusive=True, what="a share (5% or 0.05)")
    return text


def whole_number(low: int) -> Kind:
    """An argparse type: a whole number, at least low, as an int."""

    def whole(text: str) -> int:
        if not text.strip().isdigit() or int(text) < low:
            raise UsageError(f"must be a whole number, {low} or more, not {text!r}")
        return int(text)

    return Kind("whole number", whole)


def whole_number_text(low: int) -> Kind:
    """A whole number, at least low, kept as the text given (`xfbench run`'s options)."""
    whole = whole_number(low).check

    def check(text: str) -> str:
        whole(text)
        return text

    return Kind("whole number", check)


def _seconds_text(text: str) -> str:
    seconds("", text)
    return text


def _existing(text: str, want: str) -> str:
    """An input path that exists: a "file", a "folder", or either ("path")."""
    path = Path(text)
    if not path.exists():
        what = "a file or folder" if want == "path" else f"a {want}"
        raise UsageError(f"must name {what} that exists; no such file or folder: {text}")
    if want == "file" and path.is_dir():
        raise UsageError(f"must name a file: {text} is a folder")
    if want == "folder" and not path.is_dir():
        raise UsageError(f"must name a folder: {text} is a file")
    return text


def _run(text: str) -> str:
    """A run to read: a runner folder, a JSON file, or a database (FILE, or FILE:PATTERN
    for some of its runs: bundle/database.py)."""
    colons = [i for i, char in enumerate(text) if char == ":" and i]
    if Path(text).exists() or any(Path(text[:i]).is_file() for i in colons):
        return text
    raise UsageError(f"must name a run (a runner folder, a JSON file or a database); no such "
                     f"file or folder: {text}")  # fmt: skip


def _runs(text: str) -> str:
    """Runs joined by commas (each as _run; the command says when none is named)."""
    for part in text.split(","):
        if part:
            _run(part)
    return text


def _writable(text: str, folder: bool) -> str:
    """A path to write (a folder to write into, when folder): checked without writing
    anything, so that a command refused here leaves nothing behind. The folders it lacks
    are made by the command when it writes (output_path)."""
    path = Path(text)
    if path.exists():
        if folder and not path.is_dir():
            raise UsageError(f"must name a folder to write into: {text} is a file")
        if not folder and path.is_dir():
            raise UsageError(f"must name a file to write: {text} is a folder")
        if not os.access(path, os.W_OK):
            raise UsageError(f"is not writable: {text}")
        return text
    above = path.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise UsageError(f"is not writable: {text} is under the file {above}")
    if not os.access(above, os.W_OK | os.X_OK):
        raise UsageError(f"is not writable: {text} is in {above}, which is not writable")
    return text


NUMBER = number_kind()
WORD = Kind("word")  # a name the command knows (a network, a format), or several, comma-separated
TEXT = Kind("text")  # free text (a label, a commit)
WHOLE_NUMBERS = Kind("whole numbers")  # counts, comma-separated, checked by the command
FILE = Kind("file", lambda text: _existing(text, "file"))
FOLDER = Kind("folder", lambda text: _existing(text, "folder"))
PATH = Kind("path", lambda text: _existing(text, "path"))
RUN = Kind("run", _run)
RUNS = Kind("runs", _runs)
SHARE = Kind("number", share)
OUTPUT_FILE = Kind("output file", lambda text: _writable(text, folder=False))
OUTPUT_FOLDER = Kind("output folder", lambda text: _writable(text, folder=True))

# The kinds an option of the suites and of `xfbench run` declares by name (options.Option's
# `kind`): `xfbench run` checks them where it parses its command line.
KINDS: dict[str, Kind] = {
    "word": WORD,
    "whole numbers": WHOLE_NUMBERS,
    "count": whole_number_text(1),
    "count or zero": whole_number_text(0),
    "seconds": Kind("number", _seconds_text),
    "minutes": number_kind("a number of minutes"),
    "milliseconds": number_kind("a number of milliseconds"),
    "percentage": number_kind("a percentage", high=100),
    "folder": FOLDER,
    "output folder": OUTPUT_FOLDER,
}


# The same kinds without the disk: a plan made of a command line that ran elsewhere (a GPU
# window's, recorded: acceptance/reference.py) names that machine's folders, which need not
# exist or be writable here.
PLANNING_KINDS = {**KINDS, "folder": TEXT, "output folder": TEXT}


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


def seconds(option: str, value) -> float | None:
    """A time limit: None when not given, else a positive finite number of seconds."""
    if value is None:
        return None
    try:
        return _number(value)
    except UsageError:
        raise UsageError(
            f"{option} must be a positive, finite number of seconds, not {value!r}".lstrip()
        ) from None
