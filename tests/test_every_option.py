"""Every option of every xfbench command, fed values of the wrong kind (issue 72).

The test is made from the declarations: it walks each command's argparse parser, reads
what each option takes from its `type` (command_line.Kind's `kind`; argparse's `choices`),
and feeds it that kind's wrong values: a negative number, a word where a number goes, an
empty string, a missing file, a folder where a file goes, a file where a folder goes, a
path that cannot be written. Each must be refused in one line on stderr with exit 2,
before anything is written and without a traceback. A new option is covered as soon as it
is declared; one whose type says nothing of what it takes is fed every wrong value.

Each case runs in this process through the `xfbench` entry point (harness/cli.py), in a
folder of its own that must be left as it was. `xfbench run` is given --dry-run and
`xfbench acceptance` --list, which measure and write nothing, so that a value let through
shows as exit 0 rather than as a sweep; their values are checked before either
(test_the_reported_cases runs `xfbench run` without).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import shutil
import traceback
from pathlib import Path

import pytest

from xfbench import command_line, options
from xfbench.errors import UsageError
from xfbench.harness import cli
from xfbench.plugin import declared
from xfbench.runner import arguments

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "xfbench" / "report" / "references" / "2026-11-24-amd-epyc-zen5-2c"
WINDOW = ROOT / "gpu" / "returns" / "2026-11-28-h200-window-2"

# Stand-ins for paths, made in each case's own folder (work()).
MISSING, FOLDER, FILE, UNWRITABLE = "<missing>", "<folder>", "<file>", "<unwritable>"

# The wrong values of each kind of value (command_line.Kind's `kind`).
WRONG = {
    "number": ["-3", "soon", "", "nan"],
    "whole number": ["-3", "soon", "", "1.5"],
    "whole numbers": ["-3", "soon", ""],
    "word": ["", "-3", "soon"],
    "text": [""],
    "file": ["", MISSING, FOLDER],
    "folder": ["", MISSING, FILE],
    "path": ["", MISSING],
    "run": ["", MISSING],
    "runs": ["", MISSING],
    "output file": ["", FOLDER, UNWRITABLE],
    "output folder": ["", FILE, UNWRITABLE],
}
EVERY = list(dict.fromkeys(v for values in WRONG.values() for v in values))

# What each command is given besides the value under test: its required arguments, valid,
# and options that keep it from working (run's --dry-run, acceptance's --list) or from
# writing outside its folder (reference's --into). Paths are made by work().
BASE = {
    "run": {"options": ["--preset", "smoke", "--dry-run"]},
    "report": {"positional": {"results": ["<run>"]}},
    "score": {"positional": {"results": ["<run>"]}},
    "compare": {"positional": {"base": ["<run>"], "new": ["<run>"]}},
    "noise": {
        "positional": {"runs": ["<run>", "<run>", "<run>"]},
        "options": ["--into", "<out>/noise.json"],
    },
    "bundle": {"positional": {"folders": ["<run>"]}, "options": ["--out", "<out>/run.zip"]},
    "collect": {"positional": {"bundles": ["<bundle>"]}, "options": ["--db", "<out>/db.sqlite"]},
    "profile": {"positional": {"network": ["fcn5"]}},
    "data": {"positional": {"action": ["check"]}, "options": ["--data-dir", FOLDER]},
    "acceptance": {"options": ["--device", "cpu", "--list"]},
    "reference": {
        "positional": {"back": [str(WINDOW)]},
        "options": ["--into", "<out>/references"],
    },
}


class _Parser(BaseException):
    """Carries a command's parser out of its main (no command catches a BaseException)."""


@functools.cache
def parser_of(command: str) -> argparse.ArgumentParser:
    """The parser the command builds: its main is called and stopped where it parses."""
    module = importlib.import_module(cli.SUBCOMMANDS[command][0])

    def stop(self, *args, **kwargs):
        raise _Parser(self)

    real = command_line.ArgumentParser.parse_known_args
    command_line.ArgumentParser.parse_known_args = stop
    try:
        module.main([])
    except _Parser as caught:
        return caught.args[0]
    finally:
        command_line.ArgumentParser.parse_known_args = real
    raise AssertionError(f"xfbench {command} parses no command line with command_line")


def takes(action: argparse.Action) -> list[str]:
    """The wrong values of what an option takes, from its declaration."""
    kind = getattr(action.type, "kind", None)
    if kind is not None:
        return WRONG[kind]
    if action.choices:
        return ["", "soon"]
    return EVERY


def value_options(parser: argparse.ArgumentParser):
    return [
        a
        for a in parser._actions
        if a.nargs != 0 and not isinstance(a, argparse._HelpAction)  # not a flag
    ]


def name_of(action: argparse.Action) -> str:
    return "/".join(action.option_strings) or action.metavar or action.dest


def suite_for(action: argparse.Action) -> str:
    """The first `xfbench run` suite the option applies to (an option of another suite's
    is refused as not applying, which would test nothing of its value)."""
    if action.dest == "suite":
        return options.default_sweep()
    option = {o.name: o for o in arguments.every()}[action.dest.replace("_", "-")]
    return next(s for s in options.SWEEPS if option.applies(s))


def cases():
    declared()  # every suite's options
    out = []
    for command in cli.SUBCOMMANDS:
        for action in value_options(parser_of(command)):
            for value in takes(action):
                out.append(
                    pytest.param(
                        command, action.dest, value, id=f"{command} {name_of(action)} {value!r}"
                    )
                )
    return out


def argv_of(command: str, dest: str, value: str) -> list[str]:
    parser = parser_of(command)
    base = BASE[command]
    positional = {k: list(v) for k, v in base.get("positional", {}).items()}
    given = list(base.get("options", []))
    action = next(a for a in parser._actions if a.dest == dest)
    if command == "run":
        given = ["--suite", suite_for(action), *given]
    if action.option_strings:
        given += [action.option_strings[-1], value]
    else:
        positional[dest][0] = value
    ordered = [a.dest for a in parser._actions if not a.option_strings]
    return [v for d in ordered for v in positional.get(d, [])] + given


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    """A runner folder and its bundle, copied once: the commands read them, never write."""
    from xfbench.bundle.pack import pack

    where = tmp_path_factory.mktemp("sources")
    run = where / "run"
    shutil.copytree(RUN, run)
    shutil.copytree(RUN, where / "packed")
    bundle = pack(where / "packed")[0]
    return {"run": run, "bundle": bundle}


def work(root: Path, sources: dict[str, Path]) -> dict[str, str]:
    """A case's folder: the run and bundle to read, a folder, a file, and where an output
    goes; the stand-ins' paths."""
    shutil.copytree(sources["run"], root / "run")
    shutil.copy(sources["bundle"], root / "run.xfbench.zip")
    (root / "a-folder").mkdir()
    (root / "a-file.txt").write_text("not what any option wants\n")
    (root / "out").mkdir()
    return {
        "<run>": str(root / "run"),
        "<bundle>": str(root / "run.xfbench.zip"),
        "<out>": str(root / "out"),
        MISSING: str(root / "no-such-thing"),
        FOLDER: str(root / "a-folder"),
        FILE: str(root / "a-file.txt"),
        UNWRITABLE: str(root / "a-file.txt" / "inside"),  # under a file: not even root can
    }


def snapshot(root: Path) -> dict[str, tuple]:
    return {
        str(p.relative_to(root)): (p.is_dir(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
    }


def refused(argv: list[str], capsys) -> tuple[int | str, str]:
    """Exit status and stderr of `xfbench ARGV` run here; a traceback as its status."""
    try:
        code = cli.main(argv)
    except BaseException:  # a traceback is exactly what must not happen
        code = traceback.format_exc()
    return code, capsys.readouterr().err


@pytest.mark.parametrize("command, dest, value", cases())
def test_a_wrong_value_is_one_line_and_exit_2(command, dest, value, tmp_path, sources, capsys,
                                              monkeypatch):  # fmt: skip
    paths = work(tmp_path, sources)
    monkeypatch.chdir(tmp_path)

    def real(text: str) -> str:
        for stand_in, path in paths.items():
            text = text.replace(stand_in, path)
        return text

    argv = [command, *(real(a) for a in argv_of(command, dest, value))]
    before = snapshot(tmp_path)
    code, err = refused(argv, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert isinstance(code, int), f"xfbench {' '.join(argv)}: a traceback\n{code}"
    assert "Traceback" not in err, err
    assert code == 2, f"xfbench {' '.join(argv)} exited {code}; stderr: {err}"
    assert len(lines) == 1, err
    parser = parser_of(command)
    action = next(a for a in parser._actions if a.dest == dest)
    said = [name_of(action), *action.option_strings, action.dest, real(value) or "\0"]
    assert any(s and s in lines[0] for s in said), f"it does not name {said[0]}: {lines[0]}"
    assert snapshot(tmp_path) == before, f"xfbench {' '.join(argv)} wrote before refusing"


def test_every_option_says_what_it_takes():
    """Each option that takes a value declares its kind (a command_line.Kind, or choices),
    so that it is checked where it is parsed and fed its own wrong values here."""
    declared()
    vague = [
        f"xfbench {command} {name_of(a)}"
        for command in cli.SUBCOMMANDS
        for a in value_options(parser_of(command))
        if getattr(a.type, "kind", None) is None and not a.choices
    ]
    assert not vague, f"give these a type from command_line (what they take): {vague}"


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--preset", "quick", "--minutes", "-3"],
        ["run", "--preset", "quick", "--minutes", "soon"],
        ["noise", str(RUN), str(RUN), str(RUN), "--into", "."],
    ],
    ids=["run --minutes -3", "run --minutes soon", "noise --into FOLDER"],
)
def test_the_reported_cases(argv, tmp_path, monkeypatch, capsys):
    """The cases issue 72 found, as a user ran them (no --dry-run): each was a traceback."""
    monkeypatch.chdir(tmp_path)
    code, err = refused(argv, capsys)
    assert isinstance(code, int), code
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not list(tmp_path.iterdir()), "it wrote before refusing"


def test_a_usage_error_its_code_raises_late_is_still_one_line(monkeypatch, capsys):
    """A check a command's code runs after its parsing still ends in one line and exit 2,
    never a traceback (harness/cli.py)."""
    from xfbench.report import history

    def late(argv):
        raise UsageError("--into cannot be written, found late")

    monkeypatch.setattr(history, "main", late)
    assert cli.main(["noise", "x"]) == 2
    assert capsys.readouterr().err == "xfbench noise: --into cannot be written, found late\n"


def test_the_kinds_take_the_values_they_are_for(tmp_path):
    """Each kind refuses the wrong values above, and takes the right ones: a share as 5 %
    or 0.05, zero where a count may be, a path to write that does not exist yet, a run, and
    its checks of paths never touch another machine's disk when planning (PLANNING_KINDS)."""
    from xfbench import command_line as cl

    assert cl.SHARE("5%") == "5%" and cl.SHARE("0.05") == "0.05"
    assert cl.KINDS["count or zero"]("0") == "0" and cl.KINDS["count"]("4") == "4"
    assert cl.KINDS["whole numbers"]("1,2,4") == "1,2,4"  # --threads
    assert cl.KINDS["minutes"]("0.5") == "0.5" and cl.WORD("cuda:0") == "cuda:0"
    new = tmp_path / "not" / "yet"
    assert cl.OUTPUT_FOLDER(str(new)) == str(new) and not new.exists()
    (tmp_path / "run.json").write_text("{}")
    assert cl.RUN(str(tmp_path / "run.json")) == str(tmp_path / "run.json")
    elsewhere = "/nonexistent-machine/results/acceptance/results"
    assert cl.PLANNING_KINDS["output folder"](elsewhere) == elsewhere
    with pytest.raises(argparse.ArgumentTypeError, match="cannot be read"):
        cl.FILE("x" * 300)  # a name too long for the file system: one line, no traceback
