"""`xfbench compare`'s verdict agrees with the interval it prints, and nothing it cannot
measure becomes a verdict: a cell slowed 20 % in the Zen 4 reference's three runs a side is
a regression (exit 1); a significant +4 % whose interval reaches +20 % fails; a median of
zero is no time and moves no other cell; a cell that failed in some NEW runs fails; a run
given twice is refused (compare and noise), not read as a spread of zero."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from xfbench.report import compare, history, noise

ZEN4 = Path(__file__).resolve().parents[1] / "xfbench" / "report" / "references"
ZEN4 = ZEN4 / "2026-11-26-amd-epyc-zen4-2c"
RESNET50 = "test_infer[torch-resnet50-eager-fp32-cpu-t2-b16]"


def _planted(tmp_path: Path, run: Path, name: str, test: str, factor: float) -> Path:
    """A copy of a checked-in run with one benchmark's times `factor` times as long."""
    doc = json.loads((run / "merged.json").read_text())
    [b] = [b for b in doc["benchmarks"] if b["name"] == test]
    b["stats"]["data"] = [x * factor for x in b["stats"]["data"]]
    for k in ("min", "max", "mean", "median"):
        b["stats"][k] *= factor
    folder = tmp_path / name
    folder.mkdir()
    (folder / "merged.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize("factor", [1.2, 1.3])
def test_a_cell_slowed_in_three_runs_a_side_is_a_regression_its_interval_says(
    tmp_path, factor, capsys
):
    """It had been "cannot tell", exit 3, beside an interval of +15.1 % to +25.1 %."""
    runs = [ZEN4 / f"run-{i}" for i in (1, 2, 3)]
    slowed = [_planted(tmp_path, r, f"new-{i}", RESNET50, factor) for i, r in enumerate(runs)]
    out = tmp_path / "v.json"
    argv = [",".join(map(str, runs)), ",".join(map(str, slowed)), "--json", str(out)]
    assert compare.main(argv) == 1, capsys.readouterr().out
    [cell] = [v for v in json.loads(out.read_text())["cells"] if v["ratio"] != 1.0]
    assert cell["cell"].startswith("resnet50 infer, PyTorch eager fp32")
    assert cell["verdict"] == "regression" and cell["low"] > 1 and cell["high"] > 1.05
    printed = next(line for line in capsys.readouterr().out.splitlines() if "resnet50 infer, PyTorch" in line)  # fmt: skip
    assert f"{(cell['low'] - 1) * 100:+.1f} %" in printed and "regression" in printed


def _cell(medians, task="infer", network="resnet50", **kw) -> compare.Cell:
    return compare.Cell(network, task, list(medians), [[m] for m in medians], **kw)


def test_a_significant_small_regression_whose_interval_reaches_past_the_limit_fails():
    """+4 %, its interval clear of 1 and reaching past 5 %: it had exited 0 (the point below
    the limit); the interval cannot say it is within, so it fails."""
    spread = (1.0, 1.015, 0.985)
    base = {"a": _cell(spread)}
    new = {"a": _cell([1.04 * x for x in spread])}
    verdicts, _ = compare.compare_cells(base, new, 0.05)
    [v] = verdicts
    assert v.verdict == "regression" and 1 < v.low and v.high > 1.05, v
    assert compare.exit_code(verdicts, 0.05, cannot_tell_ok=True) == 1


def test_a_median_that_is_no_time_is_a_failure_and_moves_no_other_cell(monkeypatch):
    """A record with e2e or rate 0 has no log: it had made a NaN p-value that
    Benjamini-Hochberg sorted among the others, turning an unmoved cell into a regression."""
    import xfbench.report.score as score

    class Result:  # what report/score.py's scored results hold, as much as compare reads
        def __init__(self, network: str, median: float):
            self.network, self.task, self.median, self.ok, self.status = network, "infer", median, True, "ok"  # fmt: skip
            self.scale, self.batch_size, self.rounds, self.accelerator = "full", 1, [], False

    # through the path compare reads a run by: its scored results in, its cells out
    monkeypatch.setattr(score, "scored_results", lambda run: run)
    monkeypatch.setattr(score, "cell_key", lambda r: (r.network,))
    monkeypatch.setattr(score, "workload_name", lambda key, kind: key[0])
    cells = compare._cells([Result("zero", 0.0), Result("inf", math.inf), Result("minus", -1.0)])
    assert len(cells) == 3
    assert all(not c.medians and c.failed.startswith("not a time") for c in cells.values())
    zero = "zero, batch 1"
    base = {name: _cell([1.0, 1.01]) for name in (zero, "moved", "still")}
    new = {zero: cells[zero], "moved": _cell([1.0, 1.01]), "still": _cell([1.005, 0.995])}
    verdicts, _ = compare.compare_cells(base, new, 0.05)
    said = {v.cell: v.verdict for v in verdicts}
    assert said[zero] == "failed in NEW"
    assert said["moved"] != "regression" and said["still"] != "regression"


def test_a_cell_failed_in_some_new_runs_fails_and_says_so():
    """Compared on the runs that measured it, it had passed with no word."""
    measured = _cell([1.0])
    failed = compare.Cell("resnet50", "infer", [], [], failed="timeout", failed_runs=1)
    base = compare.side([{"a": _cell([1.0])}, {"a": _cell([1.01])}, {"a": _cell([0.99])}])
    new = compare.side([{"a": measured}, {"a": failed}, {"a": _cell([1.005])}])
    verdicts, _ = compare.compare_cells(base, new, 0.05)
    [v] = verdicts
    assert v.new_failed == 1 and v.new_runs == 2
    assert compare.exit_code(verdicts, 0.05, cannot_tell_ok=True) == 1
    assert "failed or lost in NEW: failing" in compare.summary(verdicts, None, 0.05)
    assert "failed in 1 NEW run(s)" in compare.table(verdicts)


def test_a_run_given_twice_is_refused_not_read_as_no_spread(tmp_path, capsys):
    """The same run twice on a side had given a spread of zero and p = 0."""
    run = str(ZEN4 / "run-1")
    other = str(ZEN4 / "run-2")
    assert compare.main([f"{run},{run}", f"{other},{other}"]) == 2
    assert compare.main([f"{run},{other}", f"{run},{other}", "--cannot-tell-ok"]) == 0
    into = str(tmp_path / "noise.json")
    assert history.main([run, other, run, "--into", into]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "BASE gives one run twice" in err[0] and "again" in err[1]
    # and where copies slip past (cells equal to the last digit), no verdict rests on them
    same = {"a": _cell([1.0, 1.0, 1.0])}
    [v] = compare.compare_cells(same, {"a": _cell([1.2, 1.2, 1.2])}, 0.05)[0]
    assert v.verdict == "cannot tell" and v.p is None and "no spread" in v.how


def test_a_history_keeps_its_runs_for_the_a_a_splits(tmp_path, capsys):
    """`xfbench noise` keeps each run's log medians; compare reads them back."""
    runs = [str(ZEN4 / f"run-{i}") for i in (1, 2, 3)]
    into = tmp_path / "noise.json"
    assert history.main([*runs, "--into", str(into)]) == 0
    assert "A/A splits of 10 or more" in capsys.readouterr().out
    kept = noise.load_history(into)
    assert kept.size == 3 and len(kept.logs) > 80
    assert all(len(v) == 3 for v in kept.logs.values())
    assert noise.load_history(noise.NOISE) is None  # the package's prior keeps no runs


def test_pairs_made_back_to_back_are_judged_on_their_differences(tmp_path, capsys):
    """Four pairs ordered B N N B on a machine drifting 3 % a run: judged on the pairs'
    differences, nothing changed is not a regression and a cell slowed 20 % is."""
    names = [f"fcn5 train #{i}" for i in range(6)]

    def made(position: int, slow: str = "") -> dict:
        drift = 1.03**position
        return {n: _cell([drift * (1.2 if n == slow else 1.0) * (1 + 0.002 * (i % 3))],
                         task="train", network="fcn5") for i, n in enumerate(names)}  # fmt: skip

    for slow in ("", names[0]):
        order = [("b", 1), ("n", 1), ("n", 2), ("b", 2), ("b", 3), ("n", 3), ("n", 4), ("b", 4)]
        runs = {(s, i): made(pos, slow if s == "n" else "") for pos, (s, i) in enumerate(order)}
        base = [runs[("b", i)] for i in range(1, 5)]
        new = [runs[("n", i)] for i in range(1, 5)]
        verdicts, _ = compare.compare_cells(compare.side(base), compare.side(new), 0.05,
                                            pairs=list(zip(base, new)))  # fmt: skip
        called = [v.cell for v in verdicts if v.verdict == "regression"]
        assert called == ([slow] if slow else []), [(v.cell, v.verdict, v.low) for v in verdicts]
        assert all("4 pairs' differences" in v.how for v in verdicts)
    run = str(ZEN4 / "run-1")
    other = str(ZEN4 / "run-2")
    assert compare.main([f"{run},{other}", run, "--paired"]) == 2
    assert "--paired: 2 BASE runs and 1 NEW runs" in capsys.readouterr().err


def test_a_history_calibrates_only_the_cells_ten_of_its_runs_measured():
    """A cell absent from half the history's runs is judged by Sidak, not by A/A splits
    whose empty ones would have counted as below every critical value."""
    from xfbench.report.family import History

    logs = {"every": [0.01 * (i % 3) for i in range(12)],
            "half": [0.01 * (i % 3) if i % 2 else math.nan for i in range(12)]}  # fmt: skip
    noises = compare.Noises(prior=noise.load(), runs=History(runs=[f"r{i}" for i in range(12)],
                            logs=logs, kinds=dict.fromkeys(logs, "training")))  # fmt: skip
    assert noises.calibrates("every") and not noises.calibrates("half")


def test_the_second_stage_asks_for_the_pairs_its_own_degrees_of_freedom_allow():
    """Judged on its pairs' differences (k - 1 degrees of freedom with no history), a cell
    needs more pairs than its first stage's many degrees of freedom would say (2 had been
    asked where 2 pairs give t(1))."""
    v = compare.Verdict(cell="a", network="fcn5", task="train", base_s=1.0, new_s=1.03,
                        ratio=1.03, low=None, high=None, p=None, verdict="cannot tell", how="",
                        base_runs=3, new_runs=3, df=200.0, se=0.01)  # fmt: skip
    without = compare.second_stage_runs(v, 3, 0.05, history_dof=0)
    with_history = compare.second_stage_runs(v, 3, 0.05, history_dof=20)
    assert without > with_history >= 2 and without >= 4
    v.se = None  # no noise known: the pairs that measure one
    assert compare.second_stage_runs(v, 3, 0.05, history_dof=0) == compare.UNKNOWN_NOISE_PAIRS


def test_a_second_stage_sized_to_catch_a_larger_slowdown_asks_fewer_pairs_and_says_so(
    tmp_path, capsys
):
    """At --fail-above (5 %) a noisy machine's second stage runs for hours; --detect 20 %
    sizes it to catch that slowdown with 80 % power (each cell its own pairs), and the
    summary says an unchanged cell may then stay undecided."""
    v = compare.Verdict(cell="a", network="fcn5", task="infer", base_s=1.0, new_s=1.03,
                        ratio=1.03, low=None, high=None, p=None, verdict="cannot tell", how="",
                        base_runs=3, new_runs=3, df=20.0, se=0.06)  # fmt: skip
    at_limit = compare.second_stage_runs(v, 30, 0.05, history_dof=9)
    at_twenty = compare.second_stage_runs(v, 30, 0.2, history_dof=9)
    assert at_twenty >= 2 and (at_limit is None or at_limit > 4 * at_twenty)
    runs = ",".join(str(ZEN4 / f"run-{i}") for i in (1, 2))
    other = str(ZEN4 / "run-3")
    asked = {}
    for detect in (None, "20%"):
        out = tmp_path / f"{detect}.json"
        argv = [runs, other, "--json", str(out), *(["--detect", detect] if detect else [])]
        assert compare.main(argv) in (0, 3)
        doc = json.loads(out.read_text())
        asked[detect] = {v["cell"]: v["runs_needed"] for v in doc["cells"]
                         if v["verdict"] == "cannot tell"}  # fmt: skip
        last = capsys.readouterr().out.splitlines()[-1]
        shown = "20%" if detect else "5%"
        assert f"catches a +{shown} slowdown of each with 80% power" in last, last
        assert ("may still not show within 5%" in last) == bool(detect)
    assert doc["detect"] == 0.2 and asked["20%"] and set(asked["20%"]) == set(asked[None])
    assert all((asked[None][c] or 51) >= n for c, n in asked["20%"].items())
    assert compare.main([runs, other, "--detect", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("xfbench compare: --detect")
