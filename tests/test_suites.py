"""The suites as a user runs them: options, errors, the JSON they write, the harness's cost."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_run(*args, tmp_path=None):
    """Run `python -m pytest suites/ ARGS` as a user would; returns (code, output, json)."""
    out = tmp_path / "out.json" if tmp_path else None
    cmd = [sys.executable, "-m", "pytest", "xfbench/suites/", "-q", "-p", "no:cacheprovider", *args]
    if out:
        cmd.append(f"--benchmark-json={out}")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    data = json.loads(out.read_text()) if out and out.exists() else None
    return proc.returncode, proc.stdout + proc.stderr, data


@pytest.mark.parametrize(
    "args, message",
    [
        (["--framework", "nope"], "unknown framework 'nope'; valid: "),
        (["--model", "resnet99"], "unknown model 'resnet99'; valid: fcn5, "),
        (["--mode", "warp"], "unknown mode 'warp' for"),
        (["--precision", "fp12"], "unknown precision 'fp12'; valid: fp32, tf32, bf16, fp16, fp64"),
        (["--device", "gpu0"], "unknown device 'gpu0'; valid: cpu, cuda:N"),
        (["--threads", "0"], "--threads must be a positive whole number"),
        (["--threads", "999"], "--threads 999 is more than the"),
        (["--threads", "1,2"], "--threads takes one count per pytest process"),
        (["--batch-size", "-4"], "--batch-size must be a positive whole number"),
        (["--preset", "huge"], "unknown preset 'huge'; valid: paper, quick, smoke"),
        (["--data", "disk"], "unknown data mode 'disk'; valid: resident, copied"),
        (["--model", ""], "--model is empty"),
        (["--framework", ""], "--framework is empty"),
        (["--preset", ""], "--preset is empty"),
        (["--batch-size", ""], "--batch-size must be a positive whole number, not ''"),
        (["--model", "fcn5,fcn_r,fcn5"], "--model names 'fcn5' more than once"),
        (["--device", "gpu:0,cuda:0"], "names one device more than once"),
        (["--device", "cuda:7"], "device cuda:7 is not present on this machine (present: cpu"),
        (["--device", "tpu:0"], "device tpu:0 is not present on this machine"),
        (["--weights", ""], "unknown weights ''"),
        (["--cell-timeout", "nan"], "--cell-timeout must be a positive, finite number"),
    ],
)
def test_bad_option_gives_one_clear_line(args, message):
    code, output, _ = pytest_run("--framework", "torch", *args)
    assert code != 0
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], output


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_absent_device_skipped_on_request_is_not_a_success(tmp_path):
    """--skip-missing-devices: the absent device's cells are skipped with the reason, and a
    session that measured nothing ends with pytest's "no tests" status, 5, not 0."""
    code, output, _ = pytest_run(
        "--framework",
        "torch",
        "--model",
        "fcn_r",
        "--device",
        "cuda:7",
        "--skip-missing-devices",
        "--preset",
        "smoke",
        "-rs",
        tmp_path=tmp_path,
    )
    assert code == 5, output
    assert "cuda:7 is not present to torch" in output
    assert "no cell was measured" in output


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_json_carries_the_record_and_the_machine(tmp_path):
    code, output, data = pytest_run(
        "--framework",
        "torch",
        "--model",
        "resnet56",
        "--threads",
        "1",
        "--preset",
        "smoke",
        "--mode",
        "eager",
        "-k",
        "test_train or test_infer",
        tmp_path=tmp_path,
    )
    assert code == 0, output
    assert "xfbench: seconds per mini-batch" in output
    assert len(data["benchmarks"]) == 2  # train and infer
    for bench in data["benchmarks"]:
        info = bench["extra_info"]
        for key in (
            "batch_size",
            "samples_per_s",
            "achieved_tflops",
            "compile_s",
            "peak_host_rss_bytes",
            "peak_device_bytes",
            "threads_requested",
            "threads_used",
            "other_cpu_share",
            "steal_share",
            "contended",
            "thread_shortfall",
            "device_name",
            "data",
            "versions",
            "network",
            "framework",
            "mode",
            "precision",
            "device",
            "task",
            "layout",
            "cpu_model",
            "cpu_isa",
            "backend",
        ):
            assert key in info, key
        # What ran, as PyTorch reports it, beside what the CPU offers.
        assert info["backend"].startswith(f"ATen {info['aten_cpu_capability']}")
        assert isinstance(info["cpu_isa"], list)
        assert info["threads_requested"] == 1
        # Pinned to one CPU, the process cannot keep more than one busy.
        assert 0.3 < info["threads_used"] <= 1.2
        # measured, whatever else runs on the machine: a share and a verdict
        assert 0 <= info["other_cpu_share"] <= 1 and isinstance(info["contended"], bool)
        assert info["seconds_per_batch"] == bench["stats"]["median"]
        assert info["samples_per_s"] == pytest.approx(info["batch_size"] / bench["stats"]["median"])
        assert len(bench["stats"]["data"]) == info["rounds"]  # every round is kept
    machine = data["machine_info"]["xfbench"]
    for key in (
        "cpu_model",
        "cores_physical",
        "cores_logical",
        "memory_bytes",
        "gpus",
        "os",
        "python",
        "packages",
        "cpu",
    ):
        assert key in machine
    assert {"vendor", "model", "isa"} <= set(machine["cpu"])
    assert "torch" in machine["packages"]
    assert "torch" in machine["runtimes"]["torch"]


def test_null_adapter_measures_the_harness_overhead(tmp_path, capsys):
    code, output, data = pytest_run(
        "--framework",
        "null",
        "--model",
        "fcn_r",
        "--preset",
        "smoke",
        "-k",
        "train",
        tmp_path=tmp_path,
    )
    assert code == 0, output
    [bench] = data["benchmarks"]
    overhead = bench["stats"]["median"]
    with capsys.disabled():
        print(f"\nharness overhead per timed step (null adapter): {overhead * 1e6:.2f} us")
    assert overhead > 0


def test_an_inference_only_framework_joins_training_only_when_named():
    from xfbench.harness.selection import cells, parse

    default = parse(model="fcn_r", preset="smoke")
    assert not [c for c in cells(default, "train") if c.framework == "onnxruntime"]
    assert [c for c in cells(default, "infer") if c.framework == "onnxruntime"]
    named = parse(framework="onnxruntime", model="fcn_r", preset="smoke")
    assert cells(named, "train")  # kept, to be skipped with the reason


def test_threads_started_before_the_options_are_pinned_too():
    """NumPy's BLAS pool starts when NumPy is imported, before --threads is read: pin()
    must move those threads too, and shrink the pool."""
    script = (
        "import os, numpy, threadpoolctl\n"
        "from xfbench.harness.threads import pin\n"
        "assert len(os.listdir('/proc/self/task')) > 1, 'no BLAS threads to test with'\n"
        "cpus = pin(1)\n"
        "masks = {t: os.sched_getaffinity(int(t)) for t in os.listdir('/proc/self/task')}\n"
        "assert all(m == set(cpus) for m in masks.values()), masks\n"
        "pools = threadpoolctl.threadpool_info()\n"
        "assert pools and all(p['num_threads'] == 1 for p in pools), pools\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "OPENBLAS_NUM_THREADS": "2"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
