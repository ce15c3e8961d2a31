"""Verdicts over runs: `xfbench compare` calls a copy of a run made 20 % slower a
regression and exits 1, a run against itself within noise and exits 0; intervals over runs
are t-intervals on the logs; `xfbench score` scores several runs of one machine together."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from xfbench.report import compare, runs

REFERENCE = next(
    p
    for p in (Path(__file__).resolve().parents[1] / "xfbench" / "report" / "references").iterdir()
    if p.is_dir()
)
# a real run: the checked-in reference's 54 full-size cells, 3 rounds each
RUN = REFERENCE / "merged.json"


def _slower(tmp_path: Path, factor: float, name: str = "slower") -> Path:
    """RUN with every timed round, and so every median, `factor` times as long (the same
    machine label: a second run of it)."""
    doc = json.loads(RUN.read_text())
    out = copy.deepcopy(doc)
    for b in out["benchmarks"]:
        s = b["stats"]
        s["data"] = [x * factor for x in s["data"]]
        for k in ("min", "max", "mean", "median", "q1", "q3", "iqr", "stddev", "total"):
            if isinstance(s.get(k), (int, float)):
                s[k] *= factor
        info = b["extra_info"]
        if isinstance(info.get("seconds_per_batch"), (int, float)):
            info["seconds_per_batch"] *= factor
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(out))
    return path


def test_a_run_twenty_percent_slower_is_a_regression_and_fails(tmp_path, capsys):
    code = compare.main([str(RUN), str(_slower(tmp_path, 1.2)), "--json", str(tmp_path / "v.json")])
    out = capsys.readouterr().out
    assert code == 1, out
    verdicts = json.loads((tmp_path / "v.json").read_text())["cells"]
    assert len(verdicts) == 54 and all(v["ratio"] == pytest.approx(1.2) for v in verdicts)
    said = [v["verdict"] for v in verdicts]
    # a cell whose own 3 rounds spread wider than 20 % stays within noise, as it should
    assert said.count("regression") >= 45 and set(said) <= {"regression", "within noise"}
    for v in verdicts:
        if v["verdict"] == "within noise":
            assert v["high"] / v["low"] > (1 + runs.floor(v["network"])) ** 2
    assert "regression(s) beyond 5%: failing" in out.splitlines()[-1]


def test_a_run_against_itself_is_within_noise_and_passes(tmp_path, capsys):
    code = compare.main(
        [
            str(RUN),
            str(RUN),
            "--bmf",
            str(tmp_path / "bmf.json"),
            "--json",
            str(tmp_path / "v.json"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    verdicts = json.loads((tmp_path / "v.json").read_text())["cells"]
    assert verdicts and all(v["verdict"] == "within noise" for v in verdicts)
    assert "0 regression," in out.splitlines()[-1]
    bmf = json.loads((tmp_path / "bmf.json").read_text())
    for measures in bmf.values():
        assert measures["latency"]["value"] > 0
        assert measures["ratio-to-base"]["value"] == pytest.approx(1.0)
        low, high = (
            measures["ratio-to-base"]["lower_value"],
            measures["ratio-to-base"]["upper_value"],
        )
        assert low < 1 < high


def test_a_small_slowdown_within_the_floor_is_within_noise(tmp_path, capsys):
    assert compare.main([str(RUN), str(_slower(tmp_path, 1.03))]) == 0
    assert "within noise" in capsys.readouterr().out


def test_the_threshold_decides_the_exit_not_the_verdict(tmp_path, capsys):
    slower = str(_slower(tmp_path, 1.2))
    assert compare.main([str(RUN), slower, "--fail-above", "25%"]) == 0
    assert "regression" in capsys.readouterr().out
    assert compare.main([str(RUN), slower, "--fail-above", "0.1"]) == 1


def test_sets_of_runs_use_the_spread_over_runs(tmp_path, capsys):
    base = ",".join(str(_slower(tmp_path, f, f"b{i}")) for i, f in enumerate((1.0, 1.02, 0.99)))
    new = ",".join(str(_slower(tmp_path, f, f"n{i}")) for i, f in enumerate((1.01, 0.98, 1.0)))
    assert compare.main([base, new, "--json", str(tmp_path / "v.json")]) == 0
    doc = json.loads((tmp_path / "v.json").read_text())
    cells = doc["cells"]
    assert all(v["base_runs"] == 3 and v["new_runs"] == 3 for v in cells)
    assert all(v["verdict"] == "within noise" and "Welch" in v["how"] for v in cells)
    assert "NEW's time over BASE's" in doc["summary"]
    worse = ",".join(str(_slower(tmp_path, f, f"w{i}")) for i, f in enumerate((1.21, 1.19, 1.2)))
    assert compare.main([base, worse]) == 1
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["nowhere", str(RUN)], "no such file or folder"),
        ([str(RUN), str(RUN), "--fail-above", "lots"], "--fail-above"),
        ([",", str(RUN)], "each name at least one run"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, words, capsys):
    assert compare.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_the_interval_over_runs_is_a_t_interval_on_the_logs():
    o = runs.over_runs([0.5, 0.55, 0.6])
    logs = [math.log(x) for x in (0.5, 0.55, 0.6)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    half = 4.302652729911275 * sd / math.sqrt(3)  # t(0.975, 2)
    assert o.value == pytest.approx(math.exp(mean))
    assert (o.low, o.high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    assert o.spread == pytest.approx(0.2) and runs.over_runs([2.0]).low is None
    ratio, low, high = runs.ratio_over_runs([1.0, 1.1, 0.9], [1.2, 1.32, 1.08])
    assert ratio == pytest.approx(1.2) and low < 1.2 < high
    assert runs.ratio_over_runs([1.0], [1.2, 1.3]) is None


def test_score_takes_several_runs_of_one_machine(tmp_path, capsys):
    from xfbench.report import score

    reference = tmp_path / "ref.json"
    reference.write_text(RUN.read_text())
    paths = [str(_slower(tmp_path, f, f"r{i}")) for i, f in enumerate((1.0, 1.1, 0.95))]
    assert score.main([*paths, "--reference", str(reference)]) == 0
    out = capsys.readouterr().out
    assert "3 runs against ref" in out
    assert "machine score over the runs:" in out and "CI over 3 runs" in out


def _scaled_copy(folder: Path, factor: float) -> Path:
    """The checked-in reference run, every round `factor` times as long, as a run of its own."""
    doc = json.loads((REFERENCE / "merged.json").read_text())
    for b in doc["benchmarks"]:
        s = b["stats"]
        s["data"] = [x * factor for x in s.get("data") or []]
        for k in ("min", "max", "mean", "median", "q1", "q3"):
            if isinstance(s.get(k), (int, float)):
                s[k] *= factor
        info = b["extra_info"]
        if isinstance(info.get("seconds_per_batch"), (int, float)):
            info["seconds_per_batch"] *= factor
    folder.mkdir(parents=True)
    (folder / "merged.json").write_text(json.dumps(doc))
    return folder


def test_the_report_gives_scores_and_the_fastest_over_runs(tmp_path):
    """Three runs of one machine, 1.0, 1.1 and 1.2 times the reference's times: the report
    scores them over the runs (about 1 / 1.1) and names the fastest per network over them."""
    from xfbench.report.load import load
    from xfbench.report.model import build
    from xfbench.report.score import machine_scores

    paths = [_scaled_copy(tmp_path / f"run-{i}", f) for i, f in enumerate((1.0, 1.1, 1.2))]
    report = build([load(p) for p in paths])
    report.scores = machine_scores(report)
    table = runs.scores_table(report)
    assert table is not None and len(table.rows) == 1
    row = [c.text for c in table.rows[0]]
    assert row[1] == "3" and "CI over 3 runs" in row[2]
    value = float(row[2].split()[0])
    assert value == pytest.approx(
        math.exp(-sum(math.log(f) for f in (1.0, 1.1, 1.2)) / 3), rel=0.02
    )
    fastest = runs.fastest_table(report)
    assert fastest is not None and fastest.rows
    assert all(c.text for c in fastest.rows[0])
