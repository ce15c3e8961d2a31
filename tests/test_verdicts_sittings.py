"""benchmarks/verdicts.py sittings: the checked-in sittings are read as the procedure reads
them, and what it says of a second stage counts the cells it asks too much of."""

import importlib.util
import json
from pathlib import Path

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


def test_disjoint_uses_each_run_once():
    disjoint = _verdicts().disjoint
    pairs = disjoint(list(range(16)), 3)
    assert pairs == [([0, 1, 2], [3, 4, 5]), ([6, 7, 8], [9, 10, 11])]
    used = [i for base, new in disjoint(list(range(16)), 1) for i in base + new]
    assert sorted(used) == list(range(16))
