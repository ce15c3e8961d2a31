"""The roofline: each network's per-layer profile from its spec, the CPU's measured roofs,
and every cell of a run placed under them in the report."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from xfbench.models import NETWORKS, get_spec
from xfbench.report.roofline import OVERHEAD_SHARE, bound_by
from xfbench.roofline import profile, roofs

ROOT = Path(__file__).resolve().parents[1]


def xfbench(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "xfbench.harness.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("network", list(NETWORKS))
def test_profile_rows_add_up_to_the_spec(network):
    """Every layer's FLOPs and parameters sum to the network's (docs/models.md's numbers),
    and the training step's traffic is three forward passes plus the optimizer's."""
    spec = get_spec(network, "full")
    rows = profile.rows(spec, spec.batch_size)
    assert sum(r.flops for r in rows) == spec.forward_flops(spec.batch_size)
    assert sum(r.params for r in rows) == spec.param_count
    assert all(r.working_set > 0 for r in rows)
    forward = profile.traffic(spec, "infer", spec.batch_size)
    values = profile.OPTIMIZER_VALUES[spec.optimizer]
    assert profile.traffic(spec, "train", spec.batch_size) == (
        3 * forward + values * spec.param_count * 4
    )
    half = profile.traffic(spec, "infer", spec.batch_size, "bf16")
    assert half < forward  # half-precision values are half the bytes


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_xfbench_profile_prints_every_layer_and_the_totals(tmp_path):
    done = xfbench(["profile", "resnet50", "--plot", str(tmp_path / "p.png")])
    assert done.returncode == 0, done.stderr
    spec = get_spec("resnet50", "full")
    assert "layer4.2.conv3" in done.stdout and "FLOP/B" in done.stdout
    # the totals' FLOPs, as docs/models.md gives them (131G at Table 7's batch of 32)
    flops = profile._human(spec.forward_flops(spec.batch_size))
    assert f"| forward pass        | {flops}" in done.stdout
    assert (tmp_path / "p.png").stat().st_size > 0
    done = xfbench(
        ["profile", "resnet56", "--format", "csv", "--task", "train", "--batch-size", "4"]
    )
    table = list(csv.DictReader(io.StringIO(done.stdout)))
    spec = get_spec("resnet56", "full")
    assert sum(int(r["FLOPs"]) for r in table) == spec.train_flops(4)


@pytest.mark.parametrize(
    "args, says",
    [
        (["nope"], "unknown network 'nope'"),
        (["resnet50", "--task", "fly"], "unknown --task 'fly'"),
        (["resnet50", "--batch-size", "0"], "--batch-size"),
        (["resnet50", "--format", "xml"], "unknown --format 'xml'"),
    ],
)
def test_bad_profile_input_is_one_line(args, says):
    done = xfbench(["profile", *args])
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_the_roofs_are_measured_and_named():
    import os

    before = os.sched_getaffinity(0)
    r = roofs.measure(1)
    assert os.sched_getaffinity(0) == before  # the caller's CPUs are given back
    kernels = r["stream_bandwidth_gbps"]
    assert set(kernels) == {"copy", "scale", "add", "triad"}
    assert r["memory_bandwidth_gbps"] == max(kernels.values()) > 0
    assert r["fp32_peak_tflops"] > 0 and r["stream_array_bytes"] >= roofs.MIN_ARRAY_BYTES


def test_bound_by_the_roof_that_applies():
    # bandwidth 10 GB/s, peak 100 GFLOP/s: the ridge at 10 FLOP/B
    assert bound_by(1.0, 0.009, 10.0, 0.1)[0] == "memory"  # 90 % of 10 GFLOP/s
    assert bound_by(100.0, 0.09, 10.0, 0.1)[0] == "compute"
    bound, share, roof = bound_by(100.0, 0.1 * OVERHEAD_SHARE / 2, 10.0, 0.1)
    assert bound == "neither (overhead)" and share == pytest.approx(OVERHEAD_SHARE / 2)
    assert roof == pytest.approx(0.1)


@pytest.mark.slow
def test_a_smoke_run_records_its_roofs_and_its_report_draws_the_roofline(tmp_path):
    results = tmp_path / "run"
    done = xfbench(
        [
            "run",
            "--framework",
            "torch",
            "--model",
            "fcn5,resnet56",
            "--task",
            "train",
            "--preset",
            "smoke",
            "--threads",
            "1",
            "--results",
            str(results),
            "--profile-layers",
            # the smoke preset's 120 s is a cell's budget, not this test's subject: a compiled
            # ResNet-56 training cell on one thread of a 2-core Zen 3, beside CI's other
            # worker, took longer (timeout, exit 1)
            "--cell-timeout",
            "900",
        ]
    )
    assert done.returncode == 0, done.stderr[-2000:]
    merged = json.loads((results / "merged.json").read_text())
    measured = merged["xfbench"]["machine"]["roofs"]["t1"]
    assert measured["memory_bandwidth_gbps"] > 0 and measured["fp32_peak_tflops"] > 0
    report = (results / "report.md").read_text()
    assert "## Roofline" in report and "Bound by" in report
    # --profile-layers: eager cells get a per-layer table, compiled ones the reason
    assert "Per-layer time: resnet56 train, PyTorch eager" in report
    assert "Not profiled per layer" in report
    assert any(p.name.startswith("roofline") for p in (results / "plots").iterdir())


def test_the_report_places_each_cell_under_the_roofs_where_it_ran(tmp_path):
    """CPU cells under their thread count's roofs, of their own precision (bf16 under the
    bf16 peak); a GPU cell under its GPU's measured roofs, with the datasheet's beside;
    fp64 (no measured peak) is not placed."""
    from test_report import H100, entry, runner_folder

    from xfbench.report import cli

    cells = [
        entry("resnet50", [1.0, 1.0, 1.0], precision="fp32", batch=64),
        entry("resnet50", [0.5, 0.5, 0.5], precision="bf16", batch=64),
        entry("resnet50", [4.0, 4.0, 4.0], precision="fp64", batch=64),
        entry("resnet50", [0.01] * 3, device="cuda:0", device_name=H100, precision="bf16"),
    ]
    folder = runner_folder(tmp_path, "box", cells, gpus=(H100,))
    roofs_ = {
        "t1": {
            "memory_bandwidth_gbps": 40.0,
            "fp32_peak_tflops": 0.1,
            "bf16_peak_tflops": 0.2,
        },
        "cuda:0": {
            "device": "cuda:0",
            "device_name": H100,
            "memory_bandwidth_gbps": 3000.0,
            "fp32_peak_tflops": 50.0,
            "tf32_peak_tflops": 370.0,
            "bf16_peak_tflops": 790.0,
            "fp16_peak_tflops": 730.0,
        },
    }
    for name in ("merged.json", *(f"cells/{p.name}" for p in (folder / "cells").iterdir())):
        doc = json.loads((folder / name).read_text())
        doc["machine_info"]["xfbench"]["roofs"] = roofs_
        (folder / name).write_text(json.dumps(doc))
    assert cli.main([str(folder)]) == 0
    report = (folder / "report.md").read_text()
    bound = report.split("### Bound by", 1)[1].split("###", 1)[0]
    rows = [line for line in bound.splitlines() if line.startswith("| resnet50")]
    assert len(rows) == 3  # fp64 has no measured peak: not placed
    # every entry does 1 GFLOP a step: bf16 at 0.5 s is 2 GFLOP/s of its 200 GFLOP/s roof
    bf16_cpu = next(r for r in rows if "| bf16" in r and "thread" in r)
    assert "| 200 " in bf16_cpu and "| 1% " in bf16_cpu
    gpu = next(r for r in rows if H100 in r)
    ai = profile.intensity(get_spec("resnet50", "full"), "train", 16, "bf16")
    assert f"| {min(3000.0 * ai, 790e3):.3g} " in gpu  # the GPU's bf16 roof, GFLOP/s
    roofs_table = report.split("### GPU roofs", 1)[1].split("###", 1)[0]
    assert "measured" in roofs_table and "H100 SXM 80GB" in roofs_table and "| 3350 " in roofs_table
    plots = sorted(p.name for p in (folder / "plots").iterdir() if p.name.startswith("roofline"))
    assert plots == ["roofline-0-cpu.png", "roofline-0-cuda0.png"]


def test_the_device_roofs_code_runs_on_any_torch_device():
    """The GPU's STREAM and GEMM probes are PyTorch code that runs on the CPU too: run
    there, small, they give positive numbers for every kernel and type."""
    pytest.importorskip("torch")
    kernels = roofs.torch_stream("cpu", 8 << 20)
    assert set(kernels) == {"copy", "scale", "add", "triad"} and min(kernels.values()) > 0
    peaks = roofs.torch_peaks("cpu", 256, ("fp32", "bf16"))
    assert set(peaks) == {"fp32", "bf16"} and min(peaks.values()) > 0


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_no_gpu_roofs_is_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "xfbench.roofline.roofs", "--device", "cuda:7"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stderr.startswith("roofs not measured: ")
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_acceptance_summary_gives_the_gpus_roofs_beside_its_datasheet(tmp_path):
    from test_report import H100, entry, runner_folder

    from xfbench.acceptance.summary import _roofs
    from xfbench.report.load import load
    from xfbench.report.model import build

    cell = entry("resnet50", [0.1] * 3, device="cuda:0", device_name=H100, precision="bf16")
    folder = runner_folder(tmp_path, "box", [cell], gpus=(H100,))
    doc = json.loads((folder / "merged.json").read_text())
    doc["machine_info"]["xfbench"]["roofs"] = {
        "cuda:0": {
            "device_name": H100,
            "memory_bandwidth_gbps": 3015.0,
            "fp32_peak_tflops": 51.0,
            "bf16_peak_tflops": 791.2,
        }
    }
    (folder / "merged.json").write_text(json.dumps(doc))
    run = load(folder)
    text = _roofs(run, build([run]))
    assert "## GPU roofs" in text and "H100 SXM 80GB" in text and "791.2" in text
    assert "0.90" in text and "0.80" in text  # 3015 / 3350 and 791.2 / 989


def test_a_sweep_measures_the_roofs_of_each_thread_count_and_gpu():
    from xfbench.runner.cli import roof_targets

    assert roof_targets({"threads": [1, 2], "devices": ["cpu", "cuda:0", "cuda:1"]}) == {
        "t1": ["--threads", "1"],
        "t2": ["--threads", "2"],
        "cuda:0": ["--device", "cuda:0"],
        "cuda:1": ["--device", "cuda:1"],
    }
    assert roof_targets({"threads": [4], "devices": ["cuda:0"]}) == {
        "cuda:0": ["--device", "cuda:0"]
    }
    assert roof_targets({"threads": [4], "devices": ["tpu:0"]}) == {}


# Other CPUs' flags, as cpuinfo reports them: what each measures, and what it says of the rest.
OTHER_CPUS = {
    "zen3": ["avx", "avx2", "fma", "f16c"],  # AMD EPYC family 25 model 1; Intel before Skylake-X
    "skylake-x": ["avx2", "avx512f", "avx512bw", "avx512vl", "avx512vnni"],  # oneDNN emulates bf16
    "zen4": ["avx2", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"],
    "sapphire-rapids": ["avx512f", "avx512bw", "avx512vl", "avx512_fp16", "amx_bf16", "amx_fp16"],
}


@pytest.mark.parametrize(
    "cpu, measured, note",
    [
        ("zen3", [], "bf16 not measured: no bf16 arithmetic"),
        ("skylake-x", ["bf16"], "fp16 not measured: no fp16 arithmetic"),
        ("zen4", ["bf16"], "fp16 not measured"),
        ("sapphire-rapids", ["bf16", "fp16"], None),
    ],
)
def test_the_cpus_half_types_are_measured_where_it_has_their_arithmetic(
    monkeypatch, cpu, measured, note
):
    """A half type's roof only where the CPU computes it: on an AVX2-only CPU PyTorch's
    bf16 matmul took 13 s a call (a Zen 3), so bf16 is not measured there, with the
    reason, as fp16 is not without its own arithmetic; the caller's thread count is
    given back."""
    torch = pytest.importorskip("torch")
    from xfbench import machine

    asked = []
    monkeypatch.setattr(machine, "cpu", lambda: {"isa": machine.isa(OTHER_CPUS[cpu])})
    monkeypatch.setattr(roofs, "cpu_torch_peak", lambda p, stop=None: asked.append(p) or 1.0)
    before = torch.get_num_threads()
    out = roofs.cpu_half_peaks(1)
    assert asked == measured and {f"{t}_peak_tflops" for t in measured} <= set(out)
    if note is None:
        assert "half_peaks_note" not in out
    else:
        assert note in out["half_peaks_note"]
    assert torch.get_num_threads() == before


def test_a_peak_stays_within_its_time_budget_on_a_slow_cpu(monkeypatch):
    """A product as slow as PyTorch's bf16 on a Zen 3 (1.2 GFLOP/s) still ends its roof
    within the budget: the square stops growing once a product takes CALL_S, and the
    repeats stop at PEAK_BUDGET_S. The clock is the product's own answer, so the test
    waits for nothing."""
    sizes = []

    def slow(n):
        sizes.append(n)
        return 2 * n**3 / 1.2e9

    tflops = roofs.budgeted_peak(slow)
    assert tflops == pytest.approx(1.2e-3)
    spent = sum(2 * n**3 / 1.2e9 for n in sizes)
    assert max(sizes) < roofs.PEAK_N and spent < 2 * roofs.PEAK_BUDGET_S + roofs.CALL_S * 8
    fast = []
    roofs.budgeted_peak(lambda n: fast.append(n) or 2 * n**3 / 1e13)
    assert max(fast) == roofs.PEAK_N  # a fast CPU's square reaches the cap


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_roof_is_capped_by_the_clock(monkeypatch):
    """Each peak and the bandwidth have a hard wall-clock limit, within 30 s together. With
    every product and the first STREAM pass slowed far past their limits (a sleep), the
    roofs still end within the limits plus a margin, and each one stopped is null with its
    reason. Only the cap is timed here, never a real speed."""
    import time

    torch = pytest.importorskip("torch")
    from xfbench import machine

    assert roofs.STREAM_LIMIT_S + 3 * roofs.PEAK_LIMIT_S <= 30  # fp32, bf16, fp16
    monkeypatch.setattr(roofs, "STREAM_LIMIT_S", 0.5)
    monkeypatch.setattr(roofs, "PEAK_LIMIT_S", 0.5)

    def slowed(*args, **kwargs):
        time.sleep(3)

    monkeypatch.setattr(roofs.np, "copyto", slowed)  # STREAM's copy, its first kernel
    monkeypatch.setattr(roofs.np, "matmul", slowed)  # the fp32 peak's product
    monkeypatch.setattr(torch, "matmul", slowed)  # the half types'
    flags = ["avx512f", "avx512bw", "avx512vl", "avx512_fp16", "amx_bf16"]  # both measured
    monkeypatch.setattr(machine, "cpu", lambda: {"isa": machine.isa(flags)})
    t0 = time.monotonic()
    r = roofs.measure(1)
    took = time.monotonic() - t0
    # uncapped, the four sleeps alone would take 12 s
    assert took < 4 * 0.5 + 4, f"the roofs took {took:.1f} s past their 2 s of limits"
    capped = ("memory_bandwidth_gbps", "fp32_peak_tflops", "bf16_peak_tflops", "fp16_peak_tflops")
    assert all(r[k] is None for k in capped), r
    assert set(r["stopped"]) == set(capped)
    # the first stopped at its limit; its product still in flight past the grace, the
    # later ones are not measured beside it (they would share its CPUs)
    why = r["stopped"]
    assert "stopped at its 0.5 s limit" in why["memory_bandwidth_gbps"]
    assert all("stopped at its 0.5 s limit" in w or "was still running" in w for w in why.values())
    assert any("was still running" in w for w in why.values())
    for thread in roofs._IN_FLIGHT:  # nothing of it left to another test's roofs
        thread.join()


def test_a_profiled_cell_runs_with_a_cells_allocator_setting():
    """xfbench profile --framework times a cell's step per layer: with glibc's default
    allocator ResNet-50's step page-faulted (2.82 against 2.30 s), so it sets the
    allocator as a sweep's child does, before the framework is imported."""
    code = (
        "import sys\n"
        "from xfbench.harness import memory\n"
        "real = memory.keep_freed_memory\n"
        "def watched():\n"
        "    print('frameworks imported:', sorted(m for m in ('torch', 'jax', 'tensorflow') "
        "if m in sys.modules))\n"
        "    print('allocator:', real())\n"
        "memory.keep_freed_memory = watched\n"
        "from xfbench.roofline.cli import main\n"
        "sys.exit(main(['fcn5', '--framework', 'null', '--threads', '1', '--scale', 'smoke']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "frameworks imported: []" in proc.stdout, proc.stdout + proc.stderr
    assert "allocator: glibc: no mmap, no trim" in proc.stdout, proc.stdout + proc.stderr
