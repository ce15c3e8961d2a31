"""Every option declared once (xfbench/options.py; xfbench run's own in
xfbench/runner/arguments.py), docs/running.md's tables made from the declaration, and every
number and environment value checked in one line."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from xfbench import command_line, environment, options
from xfbench.errors import UsageError
from xfbench.harness.cli import SUBCOMMANDS
from xfbench.harness.presets import PRESETS
from xfbench.runner import arguments, cli

ROOT = Path(__file__).resolve().parents[1]
RUNNING = (ROOT / "docs" / "running.md").read_text()


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def test_docs_options_table_is_the_declaration():
    table = _between(
        RUNNING,
        "<!-- options table: made from xfbench/options.py and xfbench/runner/arguments.py -->",
        "<!-- end of options",
    )
    assert table == arguments.markdown_table(), (
        "docs/running.md's options table differs from the declared options; paste "
        "arguments.markdown_table() there"
    )
    env = _between(
        RUNNING, "<!-- environment table: made from xfbench/environment.py -->", "<!-- end of env"
    )
    assert env == environment.environment_table()


def test_the_pages_synopsis_and_presets_table_are_the_declarations():
    """running.md's synopsis of xfbench run and measurement.md's presets table are made
    from the code (arguments.run_synopsis, presets.markdown_table): paste them again after a
    change."""
    from xfbench.harness import presets

    synopsis = _between(
        RUNNING,
        "<!-- synopsis: made from xfbench/options.py and xfbench/runner/arguments.py -->",
        "<!-- end",
    )
    assert synopsis.strip("`\n") == arguments.run_synopsis()
    measurement = (ROOT / "docs" / "measurement.md").read_text()
    table = _between(
        measurement, "<!-- presets table: made from xfbench/harness/presets.py -->", "<!-- end"
    )
    assert table == presets.markdown_table()


def test_xfbench_run_help_is_the_declaration():
    """Every option of `xfbench run --help` comes from the table, and the table's run
    options are all there."""
    shown = {s for a in cli.parser()._actions for s in a.option_strings if s.startswith("--")} - {
        "--help"
    }
    assert shown == {f"--{o.name}" for o in arguments.run_options()}


def test_no_option_is_declared_anywhere_else():
    """No pytest option is added outside options.py, and neither the runner nor a suite's
    plugin declares one of the declared options again: adding or changing an option is one
    entry, the common ones' in options.py, the runner's own in runner/arguments.py, a
    suite's own in its Suite. (Other commands, such as xfbench acceptance or the workers'
    own argv, have options of their own.)"""
    declared = {f"--{o.name}" for o in arguments.every()}
    elsewhere = []
    for path in sorted((ROOT / "xfbench").rglob("*.py")):
        if path.name == "options.py":
            continue
        suite_side = path.name == "plugin.py" or "runner" in path.parts
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            names = {a.value for a in node.args if isinstance(a, ast.Constant)}
            if node.func.attr == "addoption" or (
                node.func.attr == "add_argument" and suite_side and names & declared
            ):
                elsewhere.append(f"{path.relative_to(ROOT)}:{node.lineno} {sorted(names)}")
    assert not elsewhere, elsewhere


def test_children_are_given_only_options_they_know():
    pytest_names = {o.name for o in options.pytest_options()}
    assert set(options.child_options()) <= pytest_names
    assert set(options.selection_options()) <= {o.dest for o in options.pytest_options()}


def test_what_a_suite_takes_is_an_option_and_its_notes_are_on_common_ones():
    """A suite's `takes` and `notes` name declared options (a misspelt one would silently
    take nothing), and every option a suite takes is one of `xfbench run`'s."""
    from xfbench.plugin import declared

    known = options.by_name()
    for suite in declared().values():
        assert set(suite.options.takes) <= set(known), (
            suite.name,
            set(suite.options.takes) - set(known),
        )
        assert set(suite.options.notes) <= {o.name for o in options.COMMON}, suite.name
        assert all(known[name].run == options.TAKEN for name in suite.options.takes), suite.name


def test_one_suite_is_the_default():
    """`xfbench run` without --suite, the names of its groups' logs and the suite a failed
    cell no suite claims all take the one default suite: a second is refused."""
    from xfbench.plugin import declared

    declared()
    assert options.default_sweep() == "single"
    options.declare("single", default=True)  # declaring it again is no second one
    with pytest.raises(ValueError, match="the default suite is declared already: single"):
        options.declare("another", default=True)
    assert options.default_sweep() == "single"


def test_cell_timeout_default_says_the_presets():
    default = options.by_name()["cell-timeout"].default
    for name, preset in PRESETS.items():
        assert f"{name} {int(preset.cell_timeout_s)}" in default


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e999", "x"])
def test_numbers_refuse_nan_inf_and_out_of_range(value):
    with pytest.raises(UsageError, match="must be"):
        command_line.number("--x", value)
    with pytest.raises(UsageError, match="--x must be"):
        command_line.seconds("--x", value)


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--cell-timeout", "nan"],
        ["run", "--cell-timeout", "inf"],
        ["run", "--ci-target", "nan", "--framework", "null", "--preset", "smoke"],
        ["run", "--ci-target", "100", "--framework", "null", "--preset", "smoke"],
        ["run", "--batch-size", "nan", "--framework", "null", "--preset", "smoke"],
        ["run", "--batch-size", "inf", "--framework", "null", "--preset", "smoke"],
        ["run", "--threads", "nan", "--framework", "null", "--preset", "smoke"],
        ["run", "--suite", "scaling", "--workers", "inf", "--preset", "smoke"],
        ["run", "--suite", "allreduce", "--world-sizes", "nan", "--preset", "smoke"],
        ["acceptance", "--budget", "nan", "--list"],
        ["acceptance", "--budget", "inf", "--list"],
        ["acceptance", "--budget", "-3", "--list"],
        ["data", "check"],
        ["score"],
        ["report"],
    ],
)
def test_every_command_answers_bad_numbers_in_one_line(command, capsys, tmp_path):
    from xfbench.harness.cli import main

    os.chdir(tmp_path)  # nothing is written; if it were, not into the checkout
    rc = main(command)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, (rc, err)


@pytest.mark.parametrize(
    "argv",
    [
        ["write", "fcn5", "--seed", "nan"],
        ["write", "fcn5", "--batch-size", "inf"],
        ["write", "fcn5", "--batch-size", "0"],
        ["bogus"],
        ["write", "nonet"],
    ],
)
def test_exchange_answers_bad_values_in_one_line(argv, capsys):
    from xfbench.exchange.__main__ import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m xfbench.exchange:"), err


def test_gemm_compare_refuses_nan(capsys, tmp_path):
    from xfbench.gemm.compare import main

    assert main(["--min-ratio", "nan", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(
    "variable, value",
    [
        ("XFBENCH_MALLOC", "yes"),
        ("XFBENCH_MALLOC", "Default"),
        ("XFBENCH_FAULT", "train-x:explode"),
        ("XFBENCH_FAULT", "no-colon"),
        ("XFBENCH_ALLREDUCE_FAULT", "min"),
        ("XFBENCH_SCALING_CPUS", "0,a"),
        ("XFBENCH_REQUIRE_BROWSER", "yes"),
    ],
)
def test_unknown_environment_values_are_refused(variable, value, monkeypatch, capsys):
    from xfbench.harness.cli import main

    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError, match=variable):
        environment.check_environment()
    assert main(["run", "--help"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and variable in err


def test_every_variable_xfbench_reads_is_declared():
    """Each XFBENCH_ name in the package's code is in environment.ENVIRONMENT (so in the docs)."""
    used = set()
    for path in (ROOT / "xfbench").rglob("*.py"):
        used |= set(re.findall(r"\bXFBENCH_[A-Z_]+\b", path.read_text()))
    known = set(environment.by_name())
    assert used <= known, used - known


def test_a_pytest_session_refuses_an_unknown_environment_value(tmp_path):
    env = {**os.environ, "XFBENCH_MALLOC": "sometimes"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "xfbench" / "suites" / "test_train.py")]
        + ["--framework", "null", "--preset", "smoke", "--co", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "XFBENCH_MALLOC='sometimes'" in lines[0], proc.stderr


def test_scaling_launcher_refuses_a_timeout_that_is_no_limit(capsys):
    from xfbench.scaling.launch import main

    for value in ("nan", "inf", "0"):
        with pytest.raises(SystemExit) as end:
            main(
                ["--network", "fcn_r", "--framework", "torch", "--workers", "1"]
                + ["--out", "-", "--timeout", value]
            )
        assert end.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--timeout must be a positive" in err, err


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_commands_help_prints_what_it_means(command, capsys):
    """--help of every command: exit 0, and no argparse escape left in it ("95 %%" had
    stood in compare's and score's descriptions, which argparse prints as written)."""
    from xfbench.harness.cli import main as xfbench

    if command == "data":
        argv = ["data", "check", "--help"]
    else:
        argv = [command, "--help"]
    try:
        code = xfbench(argv)
    except SystemExit as e:  # a command whose parser exits on --help itself
        code = e.code
    text = capsys.readouterr().out
    assert code in (0, None) and text.strip(), command
    assert "%%" not in text, command


def test_xfbench_version_is_the_packages(capsys):
    import importlib.metadata

    from xfbench.harness.cli import main as xfbench

    assert xfbench(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"xfbench {importlib.metadata.version('xfbench')}"
