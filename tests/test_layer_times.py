"""Measured per-layer time (roofline/layers.py, adapters/torch/layer_times.py): every
top-level layer of the spec gets its forward and backward time from PyTorch's profiler,
backward matched to the layer that made its autograd nodes; the other frameworks say why
not; `xfbench profile --framework` and `--profile-layers` give them, outside timed rounds."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_roofline import xfbench

from xfbench.adapters import Cell, get_adapter
from xfbench.models import get_spec
from xfbench.roofline import layers

ROOT = Path(__file__).resolve().parents[1]


def _cell(network: str, task: str, mode: str = "eager", framework: str = "torch") -> Cell:
    return Cell(
        network=network,
        framework=framework,
        mode=mode,
        precision="fp32",
        device="cpu",
        threads=1,
        batch_size=4,
        task=task,
        data="resident",
        scale="smoke",
    )


@pytest.mark.parametrize(
    "network, task",
    [
        ("alexnet", "train"),
        # among command 2's slowest on a 2-core Zen 3: CI runs it
        pytest.param("resnet56", "train", marks=pytest.mark.slow),
        ("lstm32", "train"),
        ("bert_base", "infer"),
    ],
)
def test_every_layer_of_the_spec_is_timed(network, task):
    pytest.importorskip("torch")
    spec, times, plain = layers.measure(_cell(network, task), warmup=1, timed=1)
    names = [layer.name for layer, _ in spec.shapes]
    assert [t["layer"] for t in times] == [*names, "(outside layers)"]
    assert plain > 0 and all(t["forward_s"] >= 0 for t in times)
    model = layers.top_rows(spec, 4)
    for t, row in zip(times, model):
        if task == "infer":
            assert t["backward_s"] is None
        elif row.params:
            # a layer with weights made autograd nodes: its backward was found by them
            assert t["backward_s"] > 0, t
    assert times[-1]["forward_s"] > 0  # the loss and the optimizer, or the rest


def test_a_blocks_row_is_the_sum_of_its_parts():
    spec = get_spec("resnet50", "full")
    top, parts = layers.top_rows(spec, 2), layers.rows(spec, 2)
    assert len(top) == len(spec.shapes) < len(parts)
    assert sum(r.flops for r in top) == sum(r.flops for r in parts)
    assert sum(r.working_set for r in top) == sum(r.working_set for r in parts)


def test_table_rows_put_flops_over_time():
    spec = get_spec("fcn5", "smoke")
    cell = _cell("fcn5", "train")
    n = len(spec.shapes)
    times = [
        {"layer": layer.name, "forward_s": 1e-3, "backward_s": 2e-3} for layer, _ in spec.shapes
    ]
    times.append({"layer": "(outside layers)", "forward_s": 3e-3, "backward_s": 0.0})
    rows = layers.table_rows(spec, cell, times)
    first = layers.top_rows(spec, 4)[0]
    assert rows[0]["gflops"] == pytest.approx(3 * first.flops / 3e-3 / 1e9)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert rows[-1]["forward_ms"] is None and rows[-1]["total_ms"] == pytest.approx(3.0)
    assert rows[-1]["share"] == pytest.approx(3e-3 / (n * 3e-3 + 3e-3))


@pytest.mark.parametrize(
    "framework, mode, says",
    [
        ("torch", "compile", "eager mode"),
        ("jax", "jit", "one XLA program"),
        ("tensorflow", "function", "XPlane"),
        ("onnxruntime", "cpu", "fused node"),
    ],
)
def test_what_is_not_profiled_says_why(framework, mode, says):
    reason = get_adapter(framework).layer_times_reason(_cell("alexnet", "infer", mode, framework))
    assert reason and says in reason


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_xfbench_profile_measure_prints_the_measured_table():
    pytest.importorskip("torch")
    done = xfbench(
        ["profile", "resnet56", "--scale", "smoke", "--batch-size", "4", "--task", "train"]
        + ["--framework", "torch", "--threads", "1", "--format", "csv"]
    )
    assert done.returncode == 0, done.stderr[-2000:]
    table = list(csv.DictReader(io.StringIO(done.stdout)))
    spec = get_spec("resnet56", "smoke")
    assert [r["layer"] for r in table] == [
        *(layer.name for layer, _ in spec.shapes),
        "(outside layers)",
    ]
    assert all(float(r["total ms"]) >= 0 for r in table)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--framework", "caffe"], "unknown --framework 'caffe'"),
        (["--framework", "torch", "--mode", "warp"], "unknown --mode 'warp'"),
        (["--framework", "torch", "--mode", "compile"], "eager mode"),
        (["--framework", "torch", "--threads", "4096"], "4096 threads"),
    ],
)
def test_bad_measure_input_is_one_line(args, says):
    done = xfbench(["profile", "fcn5", "--scale", "smoke", *args])
    assert done.returncode in (1, 2) and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert len([ln for ln in done.stderr.splitlines() if ln.startswith("xfbench")]) == 1


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_profile_layers_in_a_suite_records_after_the_timed_rounds(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "xfbench/suites/test_train.py", "-q", "-p"]
        + ["no:cacheprovider", "--framework", "torch", "--model", "fcn5", "--preset"]
        + ["smoke", "--threads", "1", "--mode", "eager,compile", "--profile-layers"]
        + [f"--benchmark-json={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    extra = {
        b["extra_info"]["mode"]: b["extra_info"] for b in json.loads(out.read_text())["benchmarks"]
    }
    spec = get_spec("fcn5", "smoke")
    assert len(extra["eager"]["layer_times"]) == len(spec.shapes) + 1
    assert "eager mode" in extra["compile"]["layer_times_reason"]
