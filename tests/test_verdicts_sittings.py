"""benchmarks/verdicts.py sittings: the checked-in sittings are read as the procedure reads
them, what it says of a second stage counts the cells it asks too much of, and its emulated
second stage (stages) pairs the runs a comparison left as alternate.py would."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITTINGS = {"zen5": 6, "zen5-b": 10, "zen5-c": 16}


def _verdicts():
    spec = importlib.util.spec_from_file_location("verdicts", ROOT / "benchmarks/verdicts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_second_stage_says_median_range_and_too_many():
    second_stage = _verdicts().second_stage
    assert second_stage([]) == "none cannot tell"
    assert second_stage([None, None]) == "2 cannot tell, 2 need more than 50"
    said = second_stage([40, 6, None, 12])
    assert said == "4 cannot tell, second stage 12 pairs (median; 6-40), 1 need more than 50"


def test_checked_in_sittings_are_whole_and_say_where_they_ran():
    for folder, runs in SITTINGS.items():
        found = sorted((ROOT / "benchmarks/runs" / folder).glob("run-*/merged.json"))
        assert len(found) == runs, folder
    for folder in ("zen5-b", "zen5-c"):  # A was made before make wrote sitting.json
        sitting = json.loads((ROOT / "benchmarks/runs" / folder / "sitting.json").read_text())
        assert sitting["boot_id"] and sitting["commit"] and sitting["cpu"]["family"] == 26


def test_the_zen3_sittings_are_whole_and_one_sweep():
    """benchmarks/runs/zen3-b, zen3-c and zen3-d: the runs the plans count (36 one-a-side
    comparisons on B and C, 36 on D), each sitting made by make --sweep on the Zen 3 the
    history ran on."""
    for folder, runs in (("zen3-b", 30), ("zen3-c", 42), ("zen3-d", 72)):
        found = list((ROOT / "benchmarks/runs" / folder).glob("run-*/merged.json"))
        assert len(found) == runs, folder
        sitting = json.loads((ROOT / "benchmarks/runs" / folder / "sitting.json").read_text())
        assert sitting["cpu"]["family"] == 25 and len(sitting["sweep"]) == 1


def test_the_real_two_stages_are_whole_and_say_where_they_ran():
    """benchmarks/runs/zen3-two-stages: a history of ten runs, and each stage's four pairs
    with the pairing alternate.py wrote, pointing at the runs checked in."""
    folder = ROOT / "benchmarks/runs/zen3-two-stages"
    assert len(list(folder.glob("history/run-*/merged.json"))) == 10
    for stage in ("stage1", "stage2"):
        pairs = json.loads((folder / stage / "pairs.json").read_text())
        assert pairs["pairs"] == 4 and len(pairs["runs"]) == 8
        assert all((ROOT / r["run"] / "merged.json").is_file() for r in pairs["runs"])
    sitting = json.loads((folder / "sitting.json").read_text())
    assert sitting["boot_id"] and sitting["cpu"]["family"] == 25


def test_disjoint_uses_each_run_once():
    disjoint = _verdicts().disjoint
    pairs = disjoint(list(range(16)), 3)
    assert pairs == [([0, 1, 2], [3, 4, 5]), ([6, 7, 8], [9, 10, 11])]
    used = [i for base, new in disjoint(list(range(16)), 1) for i in base + new]
    assert sorted(used) == list(range(16))


def test_a_second_stage_is_emulated_on_the_runs_a_comparison_left_in_alternated_pairs():
    verdicts = _verdicts()
    # runs 1-6 are the comparison's; the others paired as alternate.py orders them
    assert verdicts.spare_pairs(16, range(0, 6)) == [(6, 7), (9, 8), (10, 11), (13, 12), (14, 15)]
    # a comparison in the middle: pairs within each stretch, never across it
    assert verdicts.spare_pairs(16, range(6, 12)) == [(0, 1), (3, 2), (4, 5), (13, 12), (14, 15)]
    assert verdicts.spare_pairs(6, range(0, 6)) == []
    from xfbench.report.compare import Cell

    runs = [{name: Cell("fcn5", "infer", [1.0 + i / 100], [[1.0]]) for name in ("a", "b")}
            for i in range(8)]  # fmt: skip
    pool = verdicts.spare_pairs(8, range(0))
    pairs = verdicts.stage_two_pairs(runs, pool, {"a": 3, "b": None}, "a", 1.2)
    # "a" asked three pairs, run in four (made even); "b" more than compare counts: all
    assert [sorted(base) for base, _ in pairs] == [["a", "b"]] * 4
    pairs = verdicts.stage_two_pairs(runs, pool, {"a": 2, "b": None}, "a", 1.2)
    assert [sorted(new) for _, new in pairs] == [["a", "b"], ["a", "b"], ["b"], ["b"]]
    (base, new), *_ = pairs
    assert new["a"].medians == [pytest.approx(1.01 * 1.2)] and base["a"].medians == [1.0]


def test_stated_power_is_checked_cell_by_cell():
    cell_by_cell = _verdicts().cell_by_cell
    nan = float("nan")
    # a: stated 0.5, caught 3 of 4 (25 points off); b: stated 0.2, caught 1 of 4 (5 off)
    said = cell_by_cell({"a": [3, 4, [0.5, 0.5, nan, 0.5]], "b": [1, 4, [0.2] * 4]})
    assert said.startswith("cell by cell: stated - caught 15.0 points on average over 2 cells")
    assert "(4 tries a cell); most: a -25, b -5" in said
    assert cell_by_cell({"a": [0, 3, [nan] * 3]}) == "cell by cell: no stated power to check"
