"""Verdicts over runs: `xfbench compare` calls a copy of a run made 20 % slower a
regression and exits 1, a run against itself within noise and exits 0; intervals over runs
are t-intervals on the logs; `xfbench score` scores several runs of one machine together."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from xfbench.report import compare, family, runs

REFERENCES = Path(__file__).resolve().parents[1] / "xfbench" / "report" / "references"
REFERENCE = REFERENCES / "2026-11-24-amd-epyc-zen5-2c"
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
    # one run a side, judged by the prior: the kinds whose tails it knows to be light are
    # regressions, their interval clear of 1 (the LSTMs' prior, t(2.2), cannot tell)
    caught = [v for v in verdicts if v["verdict"] == "regression"]
    assert len(caught) >= 40 and all(v["low"] > 1 and v["p"] < 0.05 for v in caught)
    assert all(v["verdict"] == "cannot tell" for v in verdicts if v not in caught)
    assert f"{len(caught)} regression(s) reaching past 5%" in out.splitlines()[-1]


def test_a_run_against_itself_is_no_regression_and_says_what_more_runs_would_tell(tmp_path, capsys):
    """One run a side cannot tell a 5 % regression from this machine's run-to-run noise:
    the verdict says so, and how many runs a side would."""
    argv = [str(RUN), str(RUN), "--bmf", str(tmp_path / "bmf.json")]
    code = compare.main([*argv, "--json", str(tmp_path / "v.json")])
    out = capsys.readouterr().out
    assert code == 3, out  # cannot tell: its own exit code
    verdicts = json.loads((tmp_path / "v.json").read_text())["cells"]
    assert verdicts and all(v["verdict"] == "cannot tell" for v in verdicts)
    assert all((v["runs_needed"] or 51) >= 2 and v["p"] == 0.5 for v in verdicts)
    last = out.splitlines()[-1]
    assert "0 regression," in last and "cannot tell a 5% regression: exit 3" in last
    assert "a second stage of" in last and "a false regression in at most 4%" in last
    assert "noise from the prior" in last
    assert compare.main([*argv, "--cannot-tell-ok"]) == 0
    bmf = json.loads((tmp_path / "bmf.json").read_text())
    for measures in bmf.values():
        assert measures["latency"]["value"] > 0
        assert measures["ratio-to-base"]["value"] == pytest.approx(1.0)
        low, high = (
            measures["ratio-to-base"]["lower_value"],
            measures["ratio-to-base"]["upper_value"],
        )
        assert low < 1 < high


def test_a_small_slowdown_is_not_called_a_regression(tmp_path, capsys):
    assert compare.main([str(RUN), str(_slower(tmp_path, 1.03)), "--cannot-tell-ok"]) == 0
    assert "0 regression," in capsys.readouterr().out.splitlines()[-1]


def test_the_threshold_decides_the_exit_by_the_interval_printed(tmp_path, capsys):
    """A regression fails where its interval, the one printed, reaches past --fail-above
    (+20 % one run a side: +1.9 % to +41.3 % at the widest judged by the prior)."""
    slower = str(_slower(tmp_path, 1.2))
    assert compare.main([str(RUN), slower, "--fail-above", "50%", "--cannot-tell-ok"]) == 0
    assert "regression" in capsys.readouterr().out
    assert compare.main([str(RUN), slower, "--fail-above", "25%", "--cannot-tell-ok"]) == 1
    assert compare.main([str(RUN), slower, "--fail-above", "0.1"]) == 1


def test_sets_of_runs_shrink_the_noise_and_a_cells_own_spread_widens_it(tmp_path, capsys):
    base = ",".join(str(_slower(tmp_path, f, f"b{i}")) for i, f in enumerate((1.0, 1.02, 0.99)))
    new = ",".join(str(_slower(tmp_path, f, f"n{i}")) for i, f in enumerate((1.01, 0.98, 1.0)))
    assert compare.main([base, new, "--json", str(tmp_path / "v.json"), "--cannot-tell-ok"]) == 0
    doc = json.loads((tmp_path / "v.json").read_text())
    cells = doc["cells"]
    assert all(v["base_runs"] == 3 and v["new_runs"] == 3 for v in cells)
    assert all(v["verdict"] in ("within noise", "cannot tell") for v in cells)
    assert "NEW's time over BASE's" in doc["summary"]
    worse = ",".join(str(_slower(tmp_path, f, f"w{i}")) for i, f in enumerate((1.21, 1.19, 1.2)))
    assert compare.main([base, worse]) == 1
    # a side whose runs scatter more than the kind's noise is judged by its own spread
    wild = ",".join(str(_slower(tmp_path, f, f"x{i}")) for i, f in enumerate((0.7, 1.4, 1.0)))
    assert compare.main([base, wild, "--json", str(tmp_path / "w.json")]) == 3
    cells = json.loads((tmp_path / "w.json").read_text())["cells"]
    assert all("the runs in front (3 and 3)" in v["how"] for v in cells)
    assert all(v["verdict"] == "cannot tell" for v in cells)
    capsys.readouterr()


def test_sidaks_critical_values_hold_the_family_at_its_level():
    """m independent cells, each its t: the chance none passes its critical value is
    exactly 1 - alpha; one cell alone, the t quantile."""
    from scipy.stats import t

    found = family.sidak({"a": 4.0, "b": 30.0, "c": 1000.0}, 0.05)
    assert t.cdf(found.up["a"], 4) * t.cdf(found.up["b"], 30) * t.cdf(found.up["c"], 1000) == (
        pytest.approx(0.95)
    )
    assert family.sidak({"a": 10.0}, 0.05).of("a") == pytest.approx((t.ppf(0.95, 10),) * 2)


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
    from xfbench.networks.report.compared import fastest_over_runs_table

    fastest = fastest_over_runs_table(report)
    assert fastest is not None and fastest.rows
    assert all(c.text for c in fastest.rows[0])


def test_pytest_benchmarks_own_compare_reads_a_runs_merged_json(tmp_path):
    """A runner folder's merged.json is a pytest-benchmark document: its own `compare`
    command lists every cell of a run of the reference, with its median."""
    import subprocess
    import sys

    run = REFERENCES / "2026-11-26-amd-epyc-zen4-2c" / "run-1" / "merged.json"
    code = "import sys; from pytest_benchmark.cli import main; sys.exit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", code, "compare", str(run), "--columns", "median"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {b["name"] for b in json.loads(run.read_text())["benchmarks"]}
    shown = [n for n in names if n in proc.stdout]
    assert len(shown) == len(names) and "Median" in proc.stdout


ZEN4 = REFERENCES / "2026-11-26-amd-epyc-zen4-2c"


def _framework_slower(tmp_path: Path, run: Path, framework: str, factor: float) -> Path:
    """A copy of a checked-in run whose train and infer cells of one framework took
    `factor` times as long, every timed round (a planted slowdown)."""
    doc = json.loads((run / "merged.json").read_text())
    for b in doc["benchmarks"]:
        info = b["extra_info"]
        if info.get("framework") != framework or info.get("task") not in ("train", "infer"):
            continue
        s = b["stats"]
        s["data"] = [x * factor for x in s["data"]]
        for k in ("min", "max", "mean", "median", "q1", "q3", "iqr", "stddev", "total"):
            if isinstance(s.get(k), (int, float)):
                s[k] *= factor
    folder = tmp_path / f"{run.name}-{framework}-slower"
    folder.mkdir()
    (folder / "merged.json").write_text(json.dumps(doc))
    return folder


def test_two_runs_of_one_machine_pass_and_a_planted_slowdown_fails_naming_its_cells(
    tmp_path, capsys
):
    """The checked-in reference's runs, made back to back on one VM: each pair passes
    (one run had once failed the gate at 85 cells judged one by one). The same runs with
    PyTorch's train and infer cells made 20 % slower fail, and the cells called
    regressions are PyTorch's."""
    runs = [ZEN4 / f"run-{i}" for i in (1, 2, 3)]
    for base, new in ((runs[0], runs[1]), (runs[1], runs[2]), (runs[0], runs[2])):
        for a, b in ((base, new), (new, base)):
            code = compare.main([str(a), str(b), "--cannot-tell-ok"])
            assert code == 0, capsys.readouterr().out
    capsys.readouterr()
    slowed = _framework_slower(tmp_path, runs[1], "torch", 1.2)
    assert compare.main([str(runs[0]), str(slowed), "--json", str(tmp_path / "v.json")]) == 1
    cells = json.loads((tmp_path / "v.json").read_text())["cells"]
    caught = [v["cell"] for v in cells if v["verdict"] == "regression"]
    torch_cells = [
        v["cell"] for v in cells if ", PyTorch " in v["cell"] and v["task"] in ("train", "infer")
    ]
    assert caught and all(", PyTorch " in c for c in caught), caught
    # one run a side by the prior, every cell one family: a quarter or more are caught
    assert len(caught) >= len(torch_cells) // 4, (len(caught), len(torch_cells))
    assert "failing" in capsys.readouterr().out.splitlines()[-1]


def _planted(tmp_path: Path, run: Path, name: str, change) -> Path:
    """A copy of a checked-in run with change(doc) applied."""
    doc = json.loads((run / "merged.json").read_text())
    change(doc)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "merged.json").write_text(json.dumps(doc))
    return folder


def _slow_cell(doc, factor=1.5, test="test_generate[jax-gpt2-jit-fp32-cpu-t2-b1-p128-n128]"):
    for b in doc["benchmarks"]:
        if b["name"] == test:
            b["stats"]["data"] = [x * factor for x in b["stats"]["data"]]
            for k in ("min", "max", "mean", "median"):
                b["stats"][k] *= factor
            for k, v in list(b["extra_info"].items()):
                if k.endswith("_s") and isinstance(v, float):
                    b["extra_info"][k] = v * factor


def test_one_cell_half_as_slow_again_in_three_runs_is_a_regression(tmp_path, capsys):
    """Tried as a user would: the Zen 4 reference's three runs against copies in which one
    cell (JAX jit GPT-2 generation, batch 1) is 1.5 times slower in every run. Judged with
    the prior alone it had been "cannot tell" and exit 0, its interval 34 points clear of
    zero; the runs in front know their own noise: a regression, exit 1."""
    runs = [ZEN4 / f"run-{i}" for i in (1, 2, 3)]
    slowed = [_planted(tmp_path, r, f"new-{i}", _slow_cell) for i, r in enumerate(runs)]
    argv = [
        ",".join(map(str, runs)),
        ",".join(map(str, slowed)),
        "--json",
        str(tmp_path / "v.json"),
    ]
    assert compare.main(argv) == 1, capsys.readouterr().out
    cells = json.loads((tmp_path / "v.json").read_text())["cells"]
    [caught] = [v for v in cells if v["verdict"] == "regression"]
    assert "GPT-2" in caught["cell"] or "gpt2" in caught["cell"], caught
    assert caught["ratio"] == pytest.approx(1.5, rel=1e-6) and "runs in front" in caught["how"]
    assert not [v for v in cells if v["verdict"] in ("improvement", "failed in NEW")]


def test_a_cell_missing_or_failed_in_new_fails_the_comparison(tmp_path, capsys):
    """A cell measured in BASE and absent or failed in NEW is named and exits 1 (it had
    been dropped, exit 0)."""
    run = ZEN4 / "run-1"
    name = "test_train[torch-fcn5-eager-fp32-cpu-t2-b64]"

    def drop(doc):
        doc["benchmarks"] = [b for b in doc["benchmarks"] if b["name"] != name]

    def fail(doc):
        [gone] = [b for b in doc["benchmarks"] if b["name"] == name]
        drop(doc)
        cell = {
            k: gone["extra_info"][k]
            for k in (
                "network",
                "framework",
                "mode",
                "precision",
                "device",
                "threads",
                "batch_size",
                "task",
            )
        }
        doc["xfbench"]["failures"].append(
            {"kind": "failure", "schema_version": 1, "cell": {**cell, "data": "resident",
             "scale": "full"}, "status": "timeout", "reason": "no result", "output_tail": ""}
        )  # fmt: skip

    for change, verdict in ((drop, "missing in NEW"), (fail, "failed in NEW")):
        new = _planted(tmp_path, run, verdict.replace(" ", "-"), change)
        out_json = tmp_path / f"{change.__name__}.json"
        assert compare.main([str(run), str(new), "--json", str(out_json), "--cannot-tell-ok"]) == 1
        cells = json.loads(out_json.read_text())["cells"]
        lost = [v for v in cells if v["verdict"] == verdict]
        assert len(lost) == 1 and lost[0]["cell"].startswith("fcn5 train, PyTorch"), lost
        assert "1 failed or lost in NEW: failing" in capsys.readouterr().out.splitlines()[-1]


def test_a_gpu_cell_is_never_judged_by_the_cpu_prior(tmp_path, capsys):
    """One run a side of the H100's generation cells, no history: not judged (the prior is
    CPU VMs'); with a second run a side, the runs in front judge it."""
    h100 = REFERENCES / "2026-11-27-h100-sxm" / "generation-2"
    out_json = tmp_path / "v.json"
    assert compare.main([str(h100), str(h100), "--json", str(out_json)]) == 3
    cells = json.loads(out_json.read_text())["cells"]
    assert cells and all(v["verdict"] == "cannot tell" and "no noise known" in v["how"]
                         for v in cells)  # fmt: skip
    assert "the prior" not in capsys.readouterr().out


def test_a_machines_own_noise_file_is_fitted_where_it_is_told_and_used(tmp_path, capsys):
    from xfbench.report import history, noise

    runs = [str(ZEN4 / f"run-{i}") for i in (1, 2, 3)]
    into = tmp_path / "zen4-noise.json"
    assert history.main([*runs, "--into", str(into)]) == 0
    fitted = noise.load(into)
    assert "training" in fitted and noise.source(into)["by"] == "xfbench noise"
    out_json = tmp_path / "v.json"
    code = compare.main([runs[0], runs[1], "--noise", str(into), "--json", str(out_json)])
    assert code in (0, 3)
    cells = json.loads(out_json.read_text())["cells"]
    assert all("history" in v["how"] for v in cells if v["p"] is not None)
    capsys.readouterr()
    # never into the package, nor from too few runs
    assert history.main([*runs, "--into", str(noise.NOISE)]) == 2
    assert history.main(runs[:2] + ["--into", str(into)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "package's own prior" in err[0] and "3 or more" in err[1]


def test_the_power_is_a_power_calculation():
    """The runs a side to detect a regression: more for a smaller effect, a noisier kind
    or a stricter level; at the effect of several standard errors, one run suffices."""
    df = lambda n: 10.0  # noqa: E731
    assert compare.power(0.01, df, 1, alpha=0.05, effect=math.log(1.2)) > 0.99
    assert compare.power(0.05, df, 1, alpha=0.05, effect=0.0) == pytest.approx(0.05, abs=1e-9)

    def runs(scale, alpha=0.05, wanted=0.8):
        return compare.runs_for_power(scale, df, alpha=alpha, effect=math.log(1.05), wanted=wanted)

    few = runs(0.03)
    assert few < runs(0.03, alpha=0.001)
    assert few < runs(0.06)
    assert few <= runs(0.03, wanted=0.95)
