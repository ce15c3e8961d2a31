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
