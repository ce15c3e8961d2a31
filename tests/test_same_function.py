"""The equivalence suite at smoke size: every installed training framework, in each of its
default CPU modes, runs the canonical function of all nine networks (logits and one
training step in fp32, and both again in float64)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xfbench.adapters import get_adapter
from xfbench.frameworks import training
from xfbench.harness.equivalence import FLOOR_FACTOR, FP64_TOL, check_modes
from xfbench.models import NETWORKS, TRANSFORMERS

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = [f for f in training() if get_adapter(f).import_error() is None]

# One whole-suite run (minutes) behind every test here.
pytestmark = pytest.mark.slow


# Two halves run at once, each its frameworks' checks: most of their time is XLA's and
# TensorFlow's compilations, one core each, so the two share the 2 cores of a small machine.
HALVES = (("torch", "jax"), ("tensorflow", "onnxruntime"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("equivalence")
    env = {**os.environ, "XFBENCH_CACHE": str(tmp / "cache")}  # written atomically
    started = []
    for i, half in enumerate(HALVES):
        out = tmp / f"out-{i}.json"
        argv = [sys.executable, "-m", "pytest", "xfbench/suites/test_equivalence.py", "-q",
                "-rs", "-p", "no:cacheprovider", "--preset", "smoke",
                "--device", "cpu",  # the CPU's checks; a GPU's run in the acceptance run
                "--framework", ",".join(half), f"--benchmark-json={out}"]  # fmt: skip
        log = open(tmp / f"log-{i}.txt", "w+")
        started.append(
            (subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=log, env=env), out, log)
        )
    codes, stdout, data = [], "", {"benchmarks": []}
    for proc, out, log in started:
        try:
            codes.append(proc.wait(timeout=1200))  # 135 checks: about 8 minutes on 2 cores
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(-9)
        log.seek(0)
        stdout += log.read()
        log.close()
        if out.exists():
            data["benchmarks"] += json.loads(out.read_text())["benchmarks"]
    done = subprocess.CompletedProcess(argv, max(codes, key=abs), stdout=stdout, stderr="")
    return done, data


def test_suite_passes(run):
    proc, _ = run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_every_network_and_framework_is_verified(run):
    _, data = run
    records = [
        b["extra_info"]["equivalence"]
        for b in data["benchmarks"]
        if b["extra_info"].get("kind") == "equivalence"
    ]
    seen = {(r["network"], r["framework"], r["mode"], r["check"]) for r in records}
    for network in NETWORKS:
        for framework in FRAMEWORKS:
            for mode in check_modes(framework):
                for check in ("infer", "train", "train-fp64"):
                    assert (network, framework, mode, check) in seen
    # the transformers' kernels at trained-range weights, every mode of every framework
    # that runs them, ONNX Runtime's fused graph among them
    runners = FRAMEWORKS + ["onnxruntime"] * (get_adapter("onnxruntime").import_error() is None)
    for network in TRANSFORMERS:
        for framework in runners:
            for mode in check_modes(framework):
                assert (network, framework, mode, "function") in seen, (framework, mode)
    for r in records:
        assert r["verified"] is True
        if r["check"] == "train-fp64":
            # logits, loss and the update itself, to 1e-10 of float64 PyTorch's
            assert r["tolerance"] == FP64_TOL == 1e-10
            for key in ("logits_rel_err", "loss_rel_err", "update_rel_err"):
                assert r[key] <= FP64_TOL, key
            assert r["reference"].startswith("float64 PyTorch")
        elif r["check"] == "train":
            # the loss to 1e-4; the weights to the tolerance derived from the float64 step
            assert r["loss_rel_err"] <= r["tolerance"] == 1e-4
            assert r["weights_rel_err"] <= r["weights_tolerance"]
            assert r["weights_tolerance"] >= max(1e-4, 4 * r["fp32_floor"]) + r["tie_allowance"]
            assert (r["near_ties"] == 0) == (r["tie_allowance"] == 0)
        elif r["check"] == "function":
            # the transformers' kernels at trained-range weights against float64, to a
            # tolerance derived from a plain fp32 run of the canonical graph there
            assert r["max_rel_err"] <= r["tolerance"] == FLOOR_FACTOR * max(r["fp32_floor"], 1e-8)
            assert r["reference"].startswith("the canonical graph in float64")
        else:
            assert r["max_rel_err"] <= r["tolerance"] == 1e-4
        if r["check"] in ("infer", "train"):
            assert r["reference"].startswith("onnxruntime")
        assert r["scale"] == "smoke" and r["seed"] == 0


def test_absent_frameworks_are_skipped_with_a_reason(run):
    proc, _ = run
    for framework in ("tensorflow", "jax"):
        if framework not in FRAMEWORKS:
            assert f"{framework}" in proc.stdout and "SKIPPED" in proc.stdout
