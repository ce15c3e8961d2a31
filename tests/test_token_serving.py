"""The token-serving suite: LoadGen's token mode drives each framework's generator; every
number a record gives is LoadGen's (its summary file says the same), the options refuse
what the suite cannot serve in one line, and the decode roofline's arithmetic holds."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from xfbench.errors import UsageError
from xfbench.models import get_spec
from xfbench.roofline import decode
from xfbench.serving.loadgen import read_summary
from xfbench.token_serving import cell as ts
from xfbench.token_serving.sut import batching

ROOT = Path(__file__).resolve().parents[1]


def test_the_scenarios_are_the_language_models_and_multistream_is_refused():
    assert ts.scenarios(None) == ["SingleStream", "Server", "Offline"]
    assert ts.scenarios("offline,singlestream") == ["SingleStream", "Offline"]
    with pytest.raises(UsageError, match="MLPerf runs no language model under MultiStream"):
        ts.scenarios("MultiStream")


def test_lengths_batch_and_bounds_default_per_preset():
    assert ts.lengths(None, "quick", "full") == (32, 32)
    assert ts.lengths(None, "paper", "full") == (128, 128)
    assert ts.lengths(None, "smoke", "smoke") == (8, 8)
    assert ts.lengths("64/16", "quick", "full") == (64, 16)
    with pytest.raises(UsageError, match="one ISL/OSL pair"):
        ts.lengths("8/8,16/16", "smoke", "smoke")
    assert ts.batch(None, "full") == 8 and ts.batch("4", "smoke") == 4
    with pytest.raises(UsageError, match="one largest batch"):
        ts.batch("1,8", "full")
    assert ts.bounds(None, None) == (2000.0, 100.0, ts.BOUNDS_SOURCE)
    ttft, tpot, source = ts.bounds("500", None)
    assert (ttft, tpot) == (500.0, 100.0) and source.startswith("--ttft-bound")
    with pytest.raises(UsageError, match="--tpot-bound"):
        ts.bounds(None, "-3")


def test_an_accelerator_defaults_to_larger_batches_and_the_full_lengths():
    from xfbench.generation.cell import batches

    assert batches(None, "full", "cuda:0") == [1, 8, 64] and batches(None, "full") == [1, 8]
    assert ts.lengths(None, "quick", "full", "cuda:0") == (128, 128)
    assert ts.batch(None, "full", "cuda:0") == 64 and ts.batch(None, "smoke", "cuda:0") == 2


def test_each_scenario_runs_the_buckets_it_needs_and_pads_what_is_queued():
    assert batching("SingleStream", 8, 2000).buckets == (1,)
    assert batching("Offline", 8, 2000).buckets == (8,)
    server = batching("Server", 8, 2000)
    assert server.buckets == (1, 8) and server.gather_s == pytest.approx(0.2)
    assert server.padding_limit == 1.0 and server.bucket(3) == 8


def _pytest(*args: str, out: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "xfbench/suites/test_token_serving.py", "--preset", "smoke", *args]
        + ([f"--benchmark-json={out}"] if out else []),
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--scenario", "MultiStream"), "MLPerf runs no language model under MultiStream"),
        (("--lengths", "8/8,16/16"), "one ISL/OSL pair"),
        (("--tpot-bound", "nan"), "--tpot-bound"),
        (("--model", "resnet50"), "token generation runs gpt2"),
    ],
)
def test_a_bad_option_is_one_line(args, words):
    proc = _pytest(*args)
    assert proc.returncode == 4, proc.stdout[-2000:]
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and words in err[0] and "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_the_other_suites_options_are_theirs():
    """--scenario MultiStream and --batch-size 1,8 are the serving and generation suites'
    to judge: this suite says nothing of them where its file is not named."""
    for suite, args in (
        ("test_serving.py", ("--scenario", "MultiStream")),
        ("test_generation.py", ("--batch-size", "1,8")),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
             f"xfbench/suites/{suite}", "--preset", "smoke", *args],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _summary(r: dict) -> dict:
    folder = Path(r["loadgen_logs"])
    if r["scenario"] == "Server":
        folder = folder / r["logs_of_result"]
    return read_summary(folder / "mlperf_log_summary.txt")


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_the_records_are_loadgens_numbers(tmp_path):
    """ONNX Runtime at smoke size through the three scenarios: each record's TTFT and TPOT
    percentiles and tokens/s are those of LoadGen's summary; SingleStream and Offline are
    VALID, Server finds a rate its confirmation run holds with enough queries for
    LoadGen's early stopping, and every sequence served came back with all its tokens."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("mlperf_loadgen")
    out = tmp_path / "out.json"
    proc = _pytest("--framework", "onnxruntime", "--threads", "1", "--device", "cpu", out=out)
    assert proc.returncode == 0, proc.stdout[-3000:]
    found = {
        b["extra_info"]["scenario"]: b["extra_info"]
        for b in json.loads(out.read_text())["benchmarks"]
    }
    assert set(found) == {"SingleStream", "Server", "Offline"}
    for name, r in found.items():
        summary = _summary(r)
        assert r["valid"] and summary["Result is"] == "VALID", (name, summary)
        assert all(c["verified"] for c in r["token_checks"].values())
        assert r["tokens_served"] == r["samples_served"] * r["new_tokens"]
        if name == "Offline":
            assert float(summary["Tokens per second"]) == pytest.approx(r["tokens_per_s"], rel=1e-3)
            continue
        for p in ("50.00", "90.00", "99.00"):
            key = p.rstrip("0").rstrip(".")
            ttft = summary[f"{p} percentile first token latency (ns)"]
            tpot = summary[f"{p} percentile time to output token (ns)"]
            assert r[f"ttft_p{key}_ms"] * 1e6 == pytest.approx(float(ttft), abs=1)
            assert r[f"tpot_p{key}_ms"] * 1e6 == pytest.approx(float(tpot), abs=1)
    server = found["Server"]
    assert server["server_qps"] > 0 and server["query_count"] >= 459
    assert server["ttft_p99_ms"] <= server["ttft_bound_ms"]
    assert server["tpot_p99_ms"] <= server["tpot_bound_ms"]


def test_the_decode_roofline_holds_its_arithmetic():
    spec = get_spec("gpt2", "full")
    one = decode.step(spec, 1, 256)
    assert one.weights_bytes == 4 * spec.param_count
    assert one.cache_bytes == 2 * 12 * 256 * 768 * 4  # keys and values, every layer
    assert one.seconds(40.0, 0.2)[1] == "bandwidth"
    ridge = decode.ridge_batch(spec, 256, (40.0, 0.2))
    at = decode.step(spec, 1, 256)
    # at the ridge the step's bytes and FLOPs take the same time
    moved = (at.weights_bytes + ridge * at.cache_bytes) / 40e9
    assert moved == pytest.approx(ridge * at.flops / 0.2e12)
    assert decode.step(spec, round(ridge) + 1, 256).seconds(40.0, 0.2)[1] == "compute"
    # an H100's bf16 (3.35 TB/s): at 1,024 positions and a large batch, the cache read
    # alone holds decode near 89k tokens/s
    big = decode.step(spec, 4096, 1024, value_bytes=2)
    assert 80e3 < 4096 / big.seconds(3350.0, 989.0)[0] < 90e3
    assert decode.ridge_batch(spec, 1024, (3350.0, 989.0), value_bytes=2) is None


@pytest.mark.slow  # a generation sweep and a token-serving sweep, roofs measured, a report
def test_a_run_reports_the_frontier_the_decode_roofline_and_the_token_serving(tmp_path):
    pytest.importorskip("onnxruntime")
    folder = tmp_path / "run"
    for suite, more in (
        ("generation", ("--batch-size", "1,2")),
        ("token-serving", ()),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "xfbench.harness.cli", "run", "--suite", suite,
             "--preset", "smoke", "--framework", "onnxruntime", "--threads", "1",
             "--results", str(folder), *more],
            cwd=ROOT, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    prices = tmp_path / "prices.toml"
    prices.write_text(
        f'[machines."{platform.node()}"]\nprice_per_hour_usd = 2.0\nwatts = 300\n'
        'price_date = "2026-11-26"\nprice_source = "a test"\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "xfbench.harness.cli", "report", str(folder),
         "--prices", str(prices), "--out", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = (tmp_path / "out" / "report.md").read_text()
    for heading in (
        "Token generation, GPT-2, 16/16 tokens",
        "Decode roofline, GPT-2, 16/16 tokens, cpu t1",
        "Token serving through LoadGen, GPT-2",
        "What generated tokens cost",
    ):
        assert heading in report, heading
    assert (tmp_path / "out" / "report-token-serving.csv").is_file()
    assert list((tmp_path / "out" / "plots").glob("generation-*.png"))


def test_the_pages_presets_table_is_what_the_code_does():
    """docs/token-serving.md's durations and lengths per preset, made from the code (it once
    said the table7 and procurement presets serve 32/32; they serve 128/128)."""
    from xfbench.token_serving.measure import presets_table

    page = (Path(__file__).resolve().parents[1] / "docs" / "token-serving.md").read_text()
    start = "<!-- presets table: made from xfbench/token_serving (measure.presets_table) -->"
    table = page.split(start)[1].split("<!-- end of presets table -->")[0].strip()
    assert table == presets_table()
