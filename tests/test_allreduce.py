"""The all-reduce benchmark: nccl-tests' formulas, sizes, the correctness check, the
options, the externally timed stats, and small runs of both workers (two Gloo ranks
over loopback; JAX over two host devices)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from xfbench.allreduce import ALLREDUCE_FAULT
from xfbench.allreduce.bandwidth import algbw, allreduce_bus_factor, busbw
from xfbench.allreduce.check import errors, expected_sum, verdict
from xfbench.allreduce.launch import run
from xfbench.allreduce.plugin import SUITE_FILE, default_world_sizes, select
from xfbench.allreduce.sizes import cap, label, parse_sizes
from xfbench.errors import UsageError
from xfbench.plugin import named

FAULT_ENV = ALLREDUCE_FAULT.name

ROOT = Path(__file__).resolve().parents[1]
SIZES = "1KB,4KB,64KB"


# -- formulas ---------------------------------------------------------------------------
def test_bandwidths_match_hand_computed_values():
    # 1 GB in 0.5 s: algbw 2 GB/s; busbw = algbw * 2(n-1)/n
    assert algbw(10**9, 0.5) == 2e9
    assert busbw(10**9, 0.5, 1) == 0.0  # nothing moves between one rank
    assert busbw(10**9, 0.5, 2) == 2e9  # factor 1
    assert busbw(10**9, 0.5, 4) == 3e9  # factor 1.5
    assert busbw(10**9, 0.5, 8) == 3.5e9  # factor 1.75
    assert allreduce_bus_factor(3) == pytest.approx(4 / 3)
    with pytest.raises(ValueError):
        algbw(1024, 0.0)
    with pytest.raises(ValueError):
        busbw(1024, 1.0, 0)


# -- sizes -------------------------------------------------------------------------------
def test_sizes_parse_lists_and_doubling_ranges_in_binary_units():
    assert parse_sizes("1KB,4MB,1GB") == [1024, 4 * 2**20, 2**30]
    assert parse_sizes("1KB:8KB") == [1024, 2048, 4096, 8192]
    assert parse_sizes("1K:2K,512") == [512, 1024, 2048]
    assert len(parse_sizes("1KB:1GB")) == 21
    assert [label(s) for s in (1024, 3 * 2**20, 2**30, 12)] == ["1KB", "3MB", "1GB", "12B"]
    for bad in ("3", "1XB", "8KB:1KB", "1KB:2KB:4KB", "", "-4"):
        with pytest.raises(UsageError):
            parse_sizes(bad)


def test_memory_cap_is_an_eighth_of_each_ranks_share():
    assert cap(16 * 2**30, 2) == 2**30  # host memory shared by 2 ranks
    assert cap(16 * 2**30, 4, ranks_per_memory=1) == 2 * 2**30  # one GPU per rank


# -- the correctness check ---------------------------------------------------------------
def test_check_accepts_the_sum_and_catches_a_wrong_reduction():
    n = 4
    assert expected_sum(n) == 10.0
    right = np.full(256, 10.0, dtype=np.float32)
    assert errors(right, n) == (0.0, 0)
    assert verdict(*errors(right, n)) == (True, None)
    wrong = np.full(256, 4.0, dtype=np.float32)  # max instead of sum
    err, count = errors(wrong, n)
    assert (err, count) == (6.0, 256)
    correct, reason = verdict(err, count)
    assert not correct and "256 elements" in reason
    one_off = right.copy()
    one_off[17] = np.nan
    assert verdict(*errors(one_off, n))[0] is False


# -- options -----------------------------------------------------------------------------
def test_options_select_cases_and_sizes():
    sel = select(preset="smoke", gpus=0, cpus=2)
    assert [c.id for c in sel.cases] == ["torch-cpu-n1", "torch-cpu-n2", "jax-cpu-n1", "jax-cpu-n2"]
    assert sel.sizes[0] == 1024 and sel.sizes[-1] == 2**20
    assert select(gpus=0, cpus=2).sizes[-1] == 2**30
    sel = select(framework="jax,tensorflow", device="cuda", world_sizes="1,2", gpus=2, cpus=2)
    assert [c.id for c in sel.cases] == ["jax-cuda-n1", "jax-cuda-n2"]
    assert select(framework="tensorflow", gpus=0, cpus=2).not_selected
    assert default_world_sizes("cuda", 8) == [1, 2, 4, 8]
    assert default_world_sizes("cuda", 6) == [1, 2, 4, 6]
    assert default_world_sizes("cuda", 1) == [1]
    for bad in (
        {"world_sizes": "0"},
        {"world_sizes": "two"},
        {"allreduce_sizes": "1KB:x"},
        {"threads": "2", "world_sizes": "2"},
    ):
        with pytest.raises(UsageError):
            select(gpus=0, cpus=2, **bad)
    # --threads 2 is the network suites' business when the all-reduce suite does not run
    assert select(threads="2", gpus=0, cpus=2, check_cpus=False).threads_per_rank == 2


def test_suite_runs_only_when_named():
    assert named(SimpleNamespace(args=["xfbench/suites/test_allreduce.py"]), SUITE_FILE)
    assert named(
        SimpleNamespace(args=["xfbench/suites/test_allreduce.py::test_allreduce[torch-cpu-n2]"]),
        SUITE_FILE,
    )
    assert named(SimpleNamespace(args=["xfbench.suites.test_allreduce"]), SUITE_FILE)  # --pyargs
    assert not named(SimpleNamespace(args=["xfbench/suites/"]), SUITE_FILE)


@pytest.mark.parametrize("option", [["--world-sizes", "0"], ["--allreduce-sizes", "1KB:2"]])
def test_bad_options_are_one_line_and_a_usage_error(option):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "xfbench/suites/test_allreduce.py", *option],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error, as every suite
    assert len(lines) == 1 and option[0] in lines[0], lines


# -- the workers -------------------------------------------------------------------------
@pytest.mark.slow
def test_suite_runs_gloo_and_jax_over_two_ranks(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "xfbench/suites/test_allreduce.py",
            "--framework",
            "torch,jax",
            "--world-sizes",
            "2",
            "--allreduce-sizes",
            SIZES,
            "--preset",
            "smoke",
            # a number of seconds, reaching the launcher as one (it once arrived as text)
            "--cell-timeout",
            "300",
            f"--benchmark-json={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "busbw (GB/s)" in proc.stdout  # the nccl-tests-style summary
    assert "2 ranks: parameter_server" in proc.stdout
    entries = {b["name"]: b for b in json.loads(out.read_text())["benchmarks"]}
    assert set(entries) == {"test_allreduce[torch-cpu-n2]", "test_allreduce[jax-cpu-n2]"}
    for name, backend in (
        ("test_allreduce[torch-cpu-n2]", "gloo"),
        ("test_allreduce[jax-cpu-n2]", "xla"),
    ):
        entry = entries[name]
        info = entry["extra_info"]
        assert info["kind"] == "allreduce" and info["backend"] == backend
        assert entry["group"] == f"allreduce {info['framework']} {backend} n2"
        rows = info["rows"]
        patterns = {
            "torch": ("allreduce", "reduce_broadcast", "parameter_server"),
            "jax": ("allreduce", "parameter_server"),
        }[info["framework"]]
        assert sorted((r["pattern"], r["bytes"]) for r in rows) == sorted(
            (p, s) for p in patterns for s in (1024, 4096, 65536)
        )
        for r in rows:
            assert r["correct"] and r["status"] == "ok" and r["max_abs_err"] == 0.0
            assert r["seconds"] > 0 and r["algbw_gbps"] > 0
            assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"])  # n = 2: factor 1
            assert r["algbw_gbps"] == pytest.approx(r["bytes"] / r["seconds"] / 1e9)
            assert r["count"] == r["bytes"] // 4 and r["world_size"] == 2
        largest = next(r for r in rows if r["pattern"] == "allreduce" and r["bytes"] == 65536)
        assert entry["stats"]["rounds"] == largest["rounds"]
        assert entry["stats"]["median"] == pytest.approx(largest["seconds"])


@pytest.mark.parametrize("framework", ["torch", "jax"])
@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_wrong_reduction_is_caught(framework, monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "max")  # the workers reduce with max instead of sum
    result, output = run(
        framework=framework, device="cpu", world_size=2, sizes=[1024], preset="smoke", timeout=240
    )
    assert result["status"] == "ok", output[-3000:]
    rows = result["rows"]
    # torch: all_reduce, reduce + broadcast, and rank 0's own sum of the point-to-point
    # receives (parameter_server); jax: psum and the sum on device 0
    assert [r["pattern"] for r in rows] == {
        "torch": ["allreduce", "reduce_broadcast", "parameter_server"],
        "jax": ["allreduce", "parameter_server"],
    }[framework]
    for r in rows:
        assert not r["correct"] and r["status"] == "failed"
        assert r["max_abs_err"] == 1.0 and r["wrong"] == 2 * 256  # 2 instead of 3, both ranks
        assert "wrong result" in r["reason"]


def _leftover_ranks(marker: str) -> list:
    import psutil

    out = []
    for p in psutil.process_iter(["cmdline", "cwd"]):
        if marker in " ".join(p.info["cmdline"] or []) and p.info["cwd"] == str(ROOT):
            out.append(p)
    return out


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_timeout_ends_torchrun_and_its_ranks():
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as Late

    from xfbench.allreduce.launch import LaunchError

    sizes = [2**20 * 2**k for k in range(8)]  # 1 MB .. 128 MB
    marker = "xfbench.allreduce.torch_collectives --device cpu --sizes " + ",".join(map(str, sizes))
    # The paper preset spends over a second per size and pattern: the ranks are importing
    # torch or measuring when the 4 s are up, and would go on for another 20 s or more.
    # Ranks left running keep the output pipe open, so run() would not return in time.
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(run, "torch", "cpu", 2, sizes, "paper", 4)
        try:
            future.result(timeout=15)
            outcome = "no timeout"
        except LaunchError as e:
            outcome = "timed out" if "no result within 4 s" in str(e) else str(e)
        except Late:
            outcome = "still waiting for the ranks 15 s later"
        left = _leftover_ranks(marker)
        for p in left:
            p.kill()
    assert outcome == "timed out"
    assert not left, f"ranks left running after the timeout: {[p.pid for p in left]}"
