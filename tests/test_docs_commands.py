"""Every command in the fenced code blocks of README.md and docs/*.md still runs as written:
its subcommand exists and every option it names is one the command accepts, so a renamed
or removed option, subcommand, preset, network or test file fails here.

`xfbench ...` and `python -m xfbench...` lines are checked in-process against the argparse
parser their main() builds (captured as main parses `--help`), one `xfbench <sub> --help`
subprocess per subcommand proves the console entry works; pytest lines against one
`pytest --help` (which lists xfbench's plugin options) and the test files they name.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_FENCES = {"", "bash", "sh", "shell", "console"}
# Setup steps, not xfbench's commands: nothing of this project's to check in them.
SETUP = (("python3", "-m", "venv"), ("python", "-m", "venv"), ("pip", "install"), ("git", "clone"))
SHELL_BUILTINS = {"export", "cd", "source"}
# Values that stand for what the reader fills in.
# A line that starts a command (the rest, such as a map of folders, is not one).
STARTS = re.compile(r"^\s*([A-Za-z_]\w*=|(\S*/)?(xfbench|pytest|python3?|pip|git|export|cd)(\s|$))")
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|^[A-Z][A-Z0-9_]*$|^[A-Z]+:\d+$|\$")


@dataclass
class Command:
    page: str
    line: int
    argv: list[str]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {' '.join(self.argv)}"


def _complete(text: str) -> bool:
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:  # an open quote: the command goes on
        return False
    return True


def _segments(tokens: list[str]) -> list[list[str]]:
    """Split at &&, ;, || and | (a | inside a synopsis's [...] is an alternative)."""
    out, cur, depth = [], [], 0
    for tok in tokens:
        if depth == 0 and tok in ("&&", ";", "||", "|"):
            out.append(cur)
            cur = [] if tok != "|" else None
            if cur is None:  # what a pipe feeds is another program
                break
            continue
        depth += tok.count("[") - tok.count("]")
        cur.append(tok)
    if cur:
        out.append(cur)
    return out


def _synopsis(tokens: list[str]) -> list[str]:
    """Drop a usage synopsis's brackets, alternatives and ellipses."""
    out = []
    for tok in tokens:
        tok = tok.strip("[]")
        if tok.endswith("...") and tok != "...":
            tok = tok[:-3]
        if not tok or tok in ("|", "..."):
            continue
        if tok.startswith("--"):  # --a|--b: alternatives
            out.extend(t for t in tok.split("|") if t)
        else:
            out.append(tok)
    return out


def shell_commands() -> list[Command]:
    found = []
    for page in PAGES:
        rel = str(page.relative_to(ROOT))
        fence, pending, start = None, None, 0
        blocks: list[tuple[int, str]] = []
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                if pending:
                    blocks.append((start, pending))
                    pending = None
                fence = line.strip()[3:].strip() if fence is None else None
                continue
            if fence is None or fence not in SHELL_FENCES:
                continue
            if pending is not None and (not _complete(pending) or line[:1].isspace()):
                pending += "\n" + line
                continue
            if pending:
                blocks.append((start, pending))
            pending, start = (line, n) if STARTS.match(line) else (None, n)
        for start, text in blocks:
            tokens = shlex.split(text.replace("\\\n", " "), comments=True)
            for seg in _segments(tokens):
                while seg and re.match(r"^[A-Za-z_]\w*=", seg[0]):  # VAR=value prefixes
                    seg = seg[1:]
                if seg:
                    found.append(Command(rel, start, seg))
    return found


def kind(argv: list[str]) -> str:
    exe = Path(argv[0]).name
    if (
        any(
            tuple(Path(a).name if i == 0 else a for i, a in enumerate(argv[: len(s)])) == s
            for s in SETUP
        )
        or exe in SHELL_BUILTINS
    ):
        return "setup"
    if exe == "xfbench":
        return "xfbench"
    if exe == "pytest" or (exe.startswith("python") and argv[1:3] == ["-m", "pytest"]):
        return "pytest"
    if exe.startswith("python") and _inner_module(argv):
        return "module"
    if exe.startswith("python") and len(argv) > 1 and argv[1].endswith(".py"):
        return "script"
    return "other"  # another program (chromium, torchrun's own options): not ours to check


def _inner_module(argv: list[str]) -> int | None:
    """Index of the xfbench module after a `-m` (also inside `python -m torch.distributed.run`)."""
    for i in range(1, len(argv) - 1):
        if argv[i] == "-m" and argv[i + 1].startswith("xfbench"):
            return i + 1
    return None


COMMANDS = shell_commands()
CHECKED = [c for c in COMMANDS if kind(c.argv) in ("xfbench", "pytest", "module", "script")]


# -- argparse, in-process -------------------------------------------------------------------
class _Captured(Exception):
    def __init__(self, parser):
        self.parser = parser


@cache
def captured_parser(module_name: str) -> argparse.ArgumentParser:
    """The parser module.main() builds, caught when main parses its arguments."""
    module = importlib.import_module(module_name)

    def capture(self, *args, **kwargs):
        raise _Captured(self)

    saved = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
    argparse.ArgumentParser.parse_args = argparse.ArgumentParser.parse_known_args = capture
    try:
        module.main(["--help"])
    except _Captured as c:
        return c.parser
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = saved
    raise AssertionError(f"{module_name}.main() parsed no arguments with argparse")


@cache
def known_values() -> dict[str, set[str]]:
    from xfbench.frameworks import FRAMEWORKS
    from xfbench.harness.presets import PRESETS
    from xfbench.models import DECODERS, NETWORKS

    frameworks = {n for f in FRAMEWORKS.values() for n in (f.name, *f.aliases)}
    return {
        "--preset": set(PRESETS),
        "--model": {*NETWORKS, *DECODERS},  # a decoder: the generation suite's --model
        "--network": set(NETWORKS),
        "--framework": frameworks,
    }


def _values(text: str) -> list[str]:
    return [v for v in re.split(r"[,|]", text) if v and not PLACEHOLDER.search(v)]


def _check_value(option: str, value: str | None, choices, problems: list[str]) -> None:
    if value is None or PLACEHOLDER.search(value):
        return
    allowed = set(choices) if choices else known_values().get(option)
    if allowed is None:
        return
    wrong = [v for v in ([value] if value in allowed else _values(value)) if v not in allowed]
    if wrong:
        problems.append(f"{option} {value}: {', '.join(wrong)} not among {sorted(allowed)}")


def check_argparse(parser: argparse.ArgumentParser, args: list[str]) -> list[str]:
    """Problems with args for parser: unknown options, subcommands or choices. Walks the
    tokens as argparse would, but takes placeholders as values and needs no real files."""
    problems: list[str] = []
    options = parser._option_string_actions
    positionals = [a for a in parser._actions if not a.option_strings]
    i = 0
    while i < len(args):
        tok = args[i]
        if tok.startswith("-") and len(tok) > 1 and not PLACEHOLDER.search(tok[:2]):
            name, eq, value = tok.partition("=")
            action = options.get(name)
            if action is None:
                problems.append(f"unknown option {name} (known: {', '.join(sorted(options))})")
                i += 1
                continue
            if not eq and action.nargs != 0:
                nxt = args[i + 1] if i + 1 < len(args) else None
                if nxt is not None and not nxt.startswith("--"):
                    value, i = nxt, i + 1
                else:
                    value = None
            _check_value(name, value if action.nargs != 0 else None, action.choices, problems)
            i += 1
            continue
        if not positionals:
            problems.append(f"unexpected argument {tok!r}")
            break
        action = positionals[0]
        if isinstance(action, argparse._SubParsersAction):
            if tok not in action.choices:
                problems.append(f"unknown subcommand {tok!r} (known: {', '.join(action.choices)})")
                break
            return problems + check_argparse(action.choices[tok], args[i + 1 :])
        if action.choices and not PLACEHOLDER.search(tok) and tok not in action.choices:
            problems.append(f"{tok!r} is not one of {list(action.choices)}")
        if action.nargs in (None, 1, "?"):
            positionals.pop(0)
        i += 1
    return problems


def xfbench_module(sub: str) -> str:
    from xfbench.harness.cli import SUBCOMMANDS

    if sub not in SUBCOMMANDS:
        raise AssertionError(f"no subcommand {sub!r} (xfbench has: {', '.join(SUBCOMMANDS)})")
    return SUBCOMMANDS[sub][0]


def module_main(name: str) -> str:
    """The module whose main() `python -m name` runs."""
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise AssertionError(f"no module {name}")
    return f"{name}.__main__" if spec.submodule_search_locations else name


# -- pytest, one --help ---------------------------------------------------------------------
@cache
def pytest_options() -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    names = set()
    for line in out.stdout.splitlines():
        m = re.match(r"^\s{2,4}(-[\w-]+(?:[= ]\S+)?(?:, -[\w-]+(?:[= ]\S+)?)*)", line)
        if m:
            names |= set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", m[1]))
    return names


def check_pytest(args: list[str]) -> list[str]:
    problems = []
    known = pytest_options()
    for i, tok in enumerate(args):
        if tok.startswith("--"):
            name = tok.partition("=")[0]
            if name not in known:
                problems.append(f"pytest has no option {name}")
            elif name in known_values():
                nxt = args[i + 1] if i + 1 < len(args) else None
                value = tok.partition("=")[2] or nxt
                if value and not value.startswith("-"):
                    _check_value(name, value, None, problems)
        elif tok.startswith("-") and len(tok) > 1:
            if tok[:2] not in known:  # -rs is -r with its value
                problems.append(f"pytest has no option {tok[:2]}")
        elif re.match(r"^(xfbench|tests)/", tok) and not (ROOT / tok.split("::")[0]).exists():
            problems.append(f"no such test path {tok}")
    return problems


def check_script(argv: list[str]) -> list[str]:
    """A checkout script (crosscheck/*.py): it exists, and its add_argument calls name each
    option (read with ast: running it would start a framework)."""
    path = ROOT / argv[1]
    if not path.exists():
        return [f"no such script {argv[1]}"]
    declared = {
        arg.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    }
    return [
        f"{argv[1]} has no option {t.partition('=')[0]}"
        for t in argv[2:]
        if t.startswith("-") and t.partition("=")[0] not in declared | {"-h", "--help"}
    ]


def problems_of(c: Command) -> list[str]:
    argv, what = c.argv, kind(c.argv)
    if what == "xfbench":
        args = _synopsis(argv[1:])
        if not args:
            return []
        return check_argparse(captured_parser(xfbench_module(args[0])), args[1:])
    if what == "module":
        at = _inner_module(argv)
        return check_argparse(captured_parser(module_main(argv[at])), _synopsis(argv[at + 1 :]))
    if what == "pytest":
        start = 1 if Path(argv[0]).name == "pytest" else 3
        return check_pytest(_synopsis(argv[start:]))
    if what == "script":
        return check_script(_synopsis(argv))
    return []


# -- the tests ------------------------------------------------------------------------------
def test_the_docs_commands_are_found():
    """The parser sees the README's two commands and a fair number of the others, so the
    checks below are not vacuous."""
    seen = {(c.page, " ".join(c.argv)) for c in COMMANDS}
    assert ("README.md", ".venv/bin/xfbench run --preset table7 --minutes 8") in seen
    assert ("README.md", ".venv/bin/python -m pytest") in seen
    kinds = [kind(c.argv) for c in COMMANDS]
    assert kinds.count("xfbench") >= 8 and kinds.count("pytest") >= 15, kinds
    assert kinds.count("module") >= 8 and "setup" in kinds


@pytest.mark.parametrize("command", CHECKED, ids=lambda c: f"{c.page}:{c.line}")
def test_a_documented_command_names_only_what_exists(command):
    problems = problems_of(command)
    assert not problems, f"{command}\n  " + "\n  ".join(problems)


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_each_documented_xfbench_subcommand_answers_help():
    """The installed entry point itself, once per subcommand the docs use."""
    subs = sorted(
        {_synopsis(c.argv[1:])[0] for c in CHECKED if kind(c.argv) == "xfbench" and c.argv[1:]}
    )
    assert subs
    for sub in subs:
        out = subprocess.run(
            [sys.executable, "-m", "xfbench.harness.cli", sub, "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0 and "usage:" in out.stdout, (sub, out.stderr[-2000:])


def test_the_checker_catches_a_renamed_option_and_subcommand():
    run = captured_parser(xfbench_module("run"))
    assert check_argparse(run, ["--preset", "table7"]) == []
    assert check_argparse(run, ["--presets", "table7"])
    assert check_argparse(run, ["--preset", "table8"])
    assert check_argparse(run, ["--results", "results/<date>-<host>/", "--threads", "N"]) == []
    with pytest.raises(AssertionError, match="no subcommand"):
        xfbench_module("runn")
    assert check_pytest(["xfbench/suites/test_train.py", "--framework", "torch", "-rs"]) == []
    assert check_pytest(["xfbench/suites/test_trains.py"])
    assert check_pytest(["xfbench/suites/", "--frameworks", "torch"])
