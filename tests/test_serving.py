"""The serving suite: LoadGen's scenarios over each framework's inference, its batching
policy, its records against LoadGen's own summary, int8 cells, and bad input."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from xfbench.harness.selection import parse
from xfbench.serving import loadgen
from xfbench.serving.cell import ServingCell, expand, scenarios
from xfbench.serving.scenarios import batching, latency_bound_ms

ROOT = Path(__file__).resolve().parents[1]
needs_loadgen = pytest.mark.skipif(loadgen.missing() is not None, reason=str(loadgen.missing()))


def run(args: list[str], env=None) -> tuple[int, str]:
    """python ARGS in the checkout: (exit code, output)."""
    proc = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    return proc.returncode, proc.stdout + proc.stderr


def serving_suite(*args: str, model: str = "resnet56", env=None) -> tuple[int, str]:
    """pytest of the serving suite: one network at smoke size, SingleStream, quiet."""
    return run(
        ["-m", "pytest", "xfbench/suites/test_serving.py", "--model", model, "--preset"]
        + ["smoke", "--scenario", "SingleStream", "-q", "-p", "no:cacheprovider", *args],
        env=env,
    )


# -- cells, scenarios and the batching policy ------------------------------------------
def test_each_inference_cell_runs_under_each_scenario():
    sel = parse(framework="onnxruntime", model="resnet56", preset="smoke", threads="1")
    cells = expand(sel, scenarios(None))
    assert [c.scenario for c in cells] == ["SingleStream", "MultiStream", "Server", "Offline"]
    assert cells[0].id == "onnxruntime-resnet56-cpu-fp32-cpu-t1-b8-singlestream"
    assert all(c.task == "serve" for c in cells)
    bucket = cells[2].bucket_cell(1)
    assert (bucket.task, bucket.batch_size, bucket.network) == ("infer", 1, "resnet56")
    assert scenarios("server,OFFLINE") == ["Server", "Offline"]


@pytest.mark.parametrize(
    "scenario, batch, buckets",
    [
        ("SingleStream", 64, (1,)),
        ("MultiStream", 64, (8,)),
        ("MultiStream", 4, (8,)),  # a query of 8 runs as one batch of 8 whatever the batch
        ("Offline", 64, (64,)),
        ("Server", 64, (1, 8, 64)),
        ("Server", 4, (1, 4)),
    ],
)
def test_batching_policy_buckets(scenario, batch, buckets):
    policy = batching(scenario, batch, 15.0)
    assert policy.buckets == buckets
    assert policy.bucket(1) == buckets[0] and policy.bucket(policy.max_batch) == policy.max_batch
    # only Server waits to gather a batch: 10 % of the bound
    assert policy.gather_s == (0.0015 if scenario == "Server" else 0.0)


def test_latency_bounds_name_their_source():
    assert latency_bound_ms("resnet50", False) == (
        15.0,
        "MLPerf Inference's datacenter Server bound",
    )
    assert latency_bound_ms("bert_base", True)[0] == 130.0
    assert latency_bound_ms("resnet56", False)[0] == 15.0
    assert latency_bound_ms("lstm32", True)[0] == 130.0


def test_the_tables_columns_are_the_scenarios_declared(monkeypatch):
    """The report's serving table iterates the scenarios' declaration: a fifth scenario is
    a fifth column, in its place, showing its own field."""
    from xfbench.serving import table
    from xfbench.serving.scenarios import SCENARIO_TABLE, Scenario

    extra = Scenario("Interactive", "p99 TTFT", "TTFT ms", "ttft_p99_ms")
    monkeypatch.setattr(table, "SCENARIO_TABLE", (*SCENARIO_TABLE, extra))
    monkeypatch.setattr(table, "BY_NAME", {s.name: s for s in (*SCENARIO_TABLE, extra)})
    base = {"network": "gpt2", "framework": "torch", "mode": "eager", "precision": "fp32",
            "device": "cpu", "threads": 2, "valid": True}  # fmt: skip
    records = [
        {**base, "scenario": "Offline", "samples_per_s": 12.5},
        {**base, "scenario": "Interactive", "ttft_p99_ms": 41.0},
    ]
    headers, [row] = table.network_tables(records)["gpt2"]
    assert headers[5:10] == [
        "SingleStream p90 ms", "MultiStream p99 ms", "Server QPS", "Offline samples/s",
        "Interactive TTFT ms",
    ]  # fmt: skip
    assert row[8:10] == ["12.5", "41"]


def test_serving_cell_is_a_cell_with_a_scenario():
    cell = ServingCell(
        network="fcn5",
        framework="null",
        mode="none",
        precision="fp32",
        device="cpu",
        threads=1,
        batch_size=8,
        scale="smoke",
        scenario="Offline",
    )
    assert cell.as_dict()["scenario"] == "Offline" and cell.as_dict()["task"] == "serve"


# -- LoadGen's log, read back ---------------------------------------------------------
DETAIL = """\
:::MLLOG {"key": "result_validity", "value": "VALID", "time_ms": 1.0}
:::MLLOG {"key": "result_90.00_percentile_latency_ns", "value": 2154787, "time_ms": 1.0}
:::MLLOG {"key": "result_99.90_percentile_latency_ns", "value": 4347681, "time_ms": 1.0}
:::MLLOG {"key": "result_qps_with_loadgen_overhead", "value": 463.258, "time_ms": 1.0}
:::MLLOG {"key": "early_stopping_met", "value": true, "time_ms": 1.0}
a line LoadGen did not write
"""


def test_detail_log_is_read_into_the_record_fields(tmp_path):
    path = tmp_path / loadgen.DETAIL
    path.write_text(DETAIL)
    out = loadgen.results(loadgen.read_detail(path), "SingleStream")
    assert out["p90_ms"] == pytest.approx(2.154787) and out["p99_9_ms"] == pytest.approx(4.347681)
    assert out["valid"] is True and out["qps"] == 463.258 and out["p50_ms"] is None


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_without_loadgen_serving_cells_skip_naming_the_package(tmp_path):
    """An environment without mlperf_loadgen: each cell skips with one line naming it."""
    (tmp_path / "mlperf_loadgen.py").write_text("raise ImportError('not here')\n")
    code, out = serving_suite(
        "--framework",
        "null",
        "-rs",
        model="fcn5",
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert code == 5, out  # nothing measured is not a success
    assert "mlcommons-loadgen" in out and "Traceback" not in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--scenario", "Batch"], "unknown scenario 'Batch'; valid: SingleStream, MultiStream"),
        (["--scenario", ""], "--scenario is empty"),
        (["--latency-bound", "0"], "--latency-bound must be a number of milliseconds above 0"),
        (["--latency-bound", "nan"], "--latency-bound must be a number of milliseconds"),
    ],
)
@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_bad_serving_option_is_one_line(args, message):
    code, out = run(
        ["-m", "pytest", "xfbench/suites/test_serving.py", "--framework", "null", *args, "-q"]
    )
    errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
    assert code != 0 and "Traceback" not in out
    assert len(errors) == 1 and message in errors[0], out
    code, out = run(["-m", "xfbench.harness.cli", "run", "--suite", "serving", *args])
    assert code == 2 and "Traceback" not in out and message in out, out


def test_serving_options_belong_to_the_serving_suite():
    code, out = run(["-m", "xfbench.harness.cli", "run", "--scenario", "Offline"])
    assert code == 2 and "--scenario does not apply to --suite single" in out, out


def test_int8_reasons():
    from xfbench.adapters import Cell, get_adapter

    def cell(framework, mode, task="infer"):
        return Cell(
            network="resnet56",
            framework=framework,
            mode=mode,
            precision="int8",
            device="cpu",
            threads=1,
            batch_size=8,
            task=task,
            scale="smoke",
        )

    assert "TensorFlow Lite" in get_adapter("tensorflow").check(cell("tensorflow", "function"))
    assert "no documented int8" in get_adapter("jax").check(cell("jax", "jit"))
    assert "compile mode" in get_adapter("torch").check(cell("torch", "eager"))
    assert "inference precision" in get_adapter("torch").check(cell("torch", "compile", "train"))
    assert get_adapter("onnxruntime").check(cell("onnxruntime", "cpu")) is None


# -- real runs: ONNX Runtime's and PyTorch's inference under LoadGen ---------------------
def _summary_numbers(folder: Path) -> dict:
    return loadgen.read_summary(folder / loadgen.SUMMARY)


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
@needs_loadgen
def test_serving_sweep_writes_loadgen_logs_that_the_records_match(tmp_path):
    """xfbench run --suite serving: every scenario of an ONNX Runtime ResNet-56 (smoke), each
    cell's LoadGen logs in the results folder, and the record's latencies and throughput
    LoadGen's own, as its summary prints them."""
    results = tmp_path / "run"
    code, out = run(
        [
            "-m",
            "xfbench.harness.cli",
            "run",
            "--suite",
            "serving",
            "--framework",
            "onnxruntime",
            "--model",
            "resnet56",
            "--preset",
            "smoke",
            "--threads",
            "1",
            "--results",
            str(results),
        ],
    )
    assert code == 0, out
    records = {}
    for path in (results / "cells").glob("serve-*.json"):
        entry = json.loads(path.read_text())["benchmarks"][0]
        records[entry["extra_info"]["scenario"]] = entry["extra_info"]
    assert set(records) == {"SingleStream", "MultiStream", "Server", "Offline"}
    for scenario, r in records.items():
        assert r["kind"] == "serving" and r["status"] == "ok"
        folder = Path(r["loadgen_logs"])
        assert folder.is_relative_to(results / "loadgen")
        if scenario == "Server":
            assert r["server_search"] and r["batching"]["buckets"] == [1, 8]
            if r["server_qps"] is None:
                continue  # no rate met the bound on this machine: said in server_reason
            folder = folder / r["logs_of_result"]
        summary = _summary_numbers(folder)
        for p, key in (("50.00", "p50_ms"), ("90.00", "p90_ms"), ("99.00", "p99_ms")):
            assert r[key] == pytest.approx(int(summary[f"{p} percentile latency (ns)"]) / 1e6)
        assert r["validity"] == summary["Result is"]
        if scenario == "Offline":
            assert r["samples_per_s"] == pytest.approx(float(summary["Samples per second"]))
        if scenario == "Server":
            # the summary prints it rounded; the record has the detail log's digits
            printed = summary["Completed samples per second"]
            places = len(printed.partition(".")[2])
            assert r["completed_samples_per_s"] == pytest.approx(
                float(printed), abs=0.5 * 10**-places
            )
    assert records["SingleStream"]["batching"]["buckets"] == [1]
    assert records["Offline"]["samples_served"] >= records["Offline"]["batches_run"] > 0
    # the report has the serving table and its CSV
    report = (results / "report.md").read_text()
    assert "## Serving (MLPerf LoadGen)" in report and "Serving resnet56" in report
    assert (results / "report-serving.csv").is_file()


@needs_loadgen
@pytest.mark.parametrize(
    "framework, mode",
    [("onnxruntime", "cpu"), ("torch", "compile")],
)
# Inductor's compilation took 52 s of command 2's time on a 2-core Zen 3, ONNX Runtime's
# quantization 7 s: CI runs them
@pytest.mark.slow
def test_int8_cells_record_their_distance_from_fp32(tmp_path, framework, mode):
    out = tmp_path / "out.json"
    code, text = serving_suite(
        "--framework",
        framework,
        "--mode",
        mode,
        "--precision",
        "int8",
        "--threads",
        "1",
        f"--benchmark-json={out}",
    )
    assert code == 0, text
    r = json.loads(out.read_text())["benchmarks"][0]["extra_info"]
    assert r["precision"] == "int8" and r["int8_check_samples"] == 8
    # int8 is not fp32 (a drift of 0 would mean nothing was quantized), and not far off
    assert 0 < r["int8_logits_rel_err"] < 0.5 and 0 <= r["int8_top1_agreement"] <= 1
    assert r["int8_cpu_isa"] in ("AMX-INT8", "AVX-512 VNNI", "AVX-VNNI", "no VNNI, AMX or SDOT")
    assert math.isfinite(r["p90_ms"])


def test_machine_score_counts_offline_throughput():
    """Offline samples/s is a workload of the machine score ("serve-offline"): a run
    serving twice as fast scores 2 against the other; int8 is left out."""
    from xfbench.report.load import Run
    from xfbench.report.score import compare

    def record(rate, precision="fp32"):
        return {
            "kind": "serving",
            "network": "resnet50",
            "framework": "onnxruntime",
            "mode": "cpu",
            "precision": precision,
            "device": "cpu",
            "threads": 2,
            "scale": "full",
            "scenario": "Offline",
            "status": "ok",
            "samples_per_s": rate,
            "batching": {"max_batch": 16},
        }

    fast = Run(
        name="fast",
        path="",
        machine={},
        records={"serving": [record(200.0), record(900.0, "int8")]},
    )
    slow = Run(
        name="slow",
        path="",
        machine={},
        records={"serving": [record(100.0), record(100.0, "int8")]},
    )
    s = compare(fast, slow, "machine")
    assert s.workloads == 1 and s.value == pytest.approx(2.0)
    assert "serve-offline" in s.winners[0].workload
    # no batch times kept (older records): the cell counts as certain
    assert s.unrounded == 2 and s.min_rounds == 0


def test_offline_rounds_are_its_batches_scaled_to_loadgen_figure():
    """The SUT's batch times are Offline's rounds in the scores, scaled so that their
    median is LoadGen's seconds per batch: the score stays LoadGen's, the interval is the
    batches' spread, and no rounds warning where there are many batches."""
    from xfbench.report.load import Run
    from xfbench.report.score import compare
    from xfbench.serving.report import scored as offline_results

    def record(rate, times):
        return {
            "kind": "serving", "network": "resnet50", "framework": "onnxruntime",
            "mode": "cpu", "precision": "fp32", "device": "cpu", "threads": 2,
            "scale": "full", "scenario": "Offline", "status": "ok", "samples_per_s": rate,
            "batching": {"max_batch": 16}, "full_batch_s": times,
        }  # fmt: skip

    spread = [0.05, 0.06, 0.055, 0.052, 0.058, 0.061, 0.054, 0.057]
    [r] = offline_results(
        Run(name="a", path="", machine={}, records={"serving": [record(200.0, spread)]})
    )
    assert len(r.rounds) == 8 and math.isclose(statistics.median(r.rounds), 16 / 200.0)
    fast = Run(name="fast", path="", machine={}, records={"serving": [record(200.0, spread)]})
    slow = Run(name="slow", path="", machine={}, records={"serving": [record(100.0, spread)]})
    s = compare(fast, slow, "machine")
    assert s.value == pytest.approx(2.0) and s.unrounded == 0 and s.min_rounds == 8
    assert s.low < 2.0 < s.high


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
@needs_loadgen
def test_serving_cells_of_several_frameworks_in_one_pytest(tmp_path):
    """A plain pytest of two frameworks runs each in its own child and ends with LoadGen's
    table (a serving record has no seconds per mini-batch for Table 7's)."""
    code, out = serving_suite(
        "--framework", "onnxruntime,torch", "--mode", "cpu,eager", "--threads", "1"
    )
    assert code == 0, out
    assert "Traceback" not in out and "xfbench serving: LoadGen's scenarios (" in out
    assert "each framework in its own process" in out
