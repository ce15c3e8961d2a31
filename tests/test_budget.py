"""xfbench run --minutes (runner/budget.py): the rounds a cell each process group may time,
each framework foretold by its own groups."""

from dataclasses import dataclass

import pytest

from xfbench.runner import budget as budget_module
from xfbench.runner.budget import Budget


@dataclass(frozen=True)
class Cell:
    framework: str


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves only when told; each cell is foretold 10 s plus 10 s a round."""
    now = [0.0]
    monkeypatch.setattr(budget_module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(budget_module, "estimate", lambda cells, _p, r: len(cells) * 10.0 * (1 + r))
    return now


def groups(*frameworks, size=2):
    return [[Cell(f)] * size for f in frameworks]


def test_the_most_rounds_that_fit_and_one_where_none_do(clock):
    plan = groups("torch", "jax")  # 4 cells: 80 s at 1 round, 160 s at 3 (table7's most)
    assert Budget(seconds=160, preset_name="table7").rounds(plan) == 3
    assert Budget(seconds=159, preset_name="table7").rounds(plan) == 2
    assert Budget(seconds=60, preset_name="table7").rounds(plan) == 1  # the floor
    assert Budget(seconds=60, preset_name="table7").needed(plan, 1) == 80


def test_each_framework_is_foretold_by_its_own_groups_and_a_new_one_by_all(clock):
    b = Budget(seconds=1000, preset_name="table7")
    b.done(groups("torch")[0], rounds=1, seconds=40)  # its estimate, 40 s: 1.0 x
    clock[0] = 40
    b.done(groups("jax")[0], rounds=1, seconds=100)  # 2.5 x
    clock[0] = 140
    assert b.scale_of("torch") == 1.0 and b.scale_of("jax") == 2.5
    assert b.scale_of("tensorflow") == pytest.approx(140 / 80)  # not run yet: all so far
    # JAX's next group at 2.5 x, TensorFlow's at 1.75 x: 3 rounds (340 s) fit the 860 s left
    later = groups("jax", "tensorflow")
    assert b.needed(later, 2) == pytest.approx(2.5 * 60 + 1.75 * 60)
    assert b.rounds(later) == 3
    clock[0] = 1000 - 340 + 1  # a second short of 3 rounds
    assert b.rounds(later) == 2


def test_a_group_of_two_frameworks_shares_its_time_by_cells(clock):
    b = Budget(seconds=100, preset_name="table7")
    b.done([Cell("torch"), Cell("torch"), Cell("jax"), Cell("jax")], rounds=1, seconds=160)
    assert b.scale_of("torch") == b.scale_of("jax") == b.scale == 2.0


def test_the_line_before_a_group_reaches_its_log_and_stderr(clock, tmp_path, capsys):
    """What the budget chose for a group, and its overrun, is said on stderr and kept in
    the group's log in the results folder; under --quiet only in the log."""
    from xfbench.plugin import declared
    from xfbench.runner import cli
    from xfbench.runner.group import Group, Job
    from xfbench.runner.store import RunFolder

    declared()
    folder = RunFolder(tmp_path / "run")
    job = Job(Group(framework="torch", device="cpu", threads=1), [Cell("torch")] * 2, {}, [])
    b = Budget(seconds=30, preset_name="table7")  # 40 s at one round a cell: 10 s over
    settings, rounds = cli._budgeted(b, job, [job.cells], quiet=False, folder=folder)
    assert settings["rounds"] == "1" and rounds == 1
    said = capsys.readouterr().err.strip()
    assert said.startswith("--minutes: torch-cpu-t1 at 1 timed round a cell")
    assert said.endswith("over the budget by about 0.2 min at one round a cell, the fewest: "
                         "every cell still runs")  # fmt: skip
    log = folder.logs / "torch-cpu-t1.log"
    assert log.read_text() == f"# {said}\n"
    cli._budgeted(b, job, [job.cells], quiet=True, folder=folder)  # --quiet
    assert capsys.readouterr().err == "" and log.read_text() == f"# {said}\n" * 2


def test_the_minutes_taken_against_those_planned():
    from xfbench.runner.cli import _spent

    b = Budget(seconds=480, preset_name="table7")
    assert _spent(b, 690) == "--minutes 8: the sweep took 11.5 min against the 8 planned, 3.5 over"
    assert _spent(b, 431) == "--minutes 8: the sweep took 7.2 min against the 8 planned"


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_budgeted_sweep_ends_with_its_minutes_also_under_quiet(tmp_path, capsys):
    """`xfbench run --minutes M --quiet`: the last line on stderr gives the minutes taken
    against M, and the group's log keeps what the budget chose (no group line is printed)."""
    import re

    from xfbench.runner import cli

    results = tmp_path / "r"
    argv = ["--framework", "null", "--preset", "smoke", "--task", "train", "--device", "cpu",
            "--model", "fcn5", "--threads", "1", "--skip-roofs", "--minutes", "0.001",
            "--results", str(results), "--quiet"]  # fmt: skip
    assert cli.main(argv) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(r"--minutes 0\.001: the sweep took \d+\.\d min against the 0\.001 "
                        r"planned(, \d+\.\d over)?", err[-1]), err  # fmt: skip
    assert not any(line.startswith("--minutes: ") for line in err)  # quiet: no group line
    log = (results / "logs" / "null-cpu-t1.log").read_text()
    assert "# --minutes: null-cpu-t1 at 1 timed round a cell" in log
    assert "over the budget by about" in log
