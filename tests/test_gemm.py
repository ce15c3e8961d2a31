"""The GEMM suite: the correctness check, peak and best shares, selection, and a smoke run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xfbench.errors import CannotRun, UsageError
from xfbench.gemm.best import fill_share_of_best
from xfbench.gemm.check import Sample, quantize, round_bf16, tolerance, within
from xfbench.gemm.impls.numpy_matmul import NumpyMatmul
from xfbench.gemm.measure import GemmCell, WrongProduct, input_sets, measure
from xfbench.gemm.peaks import peak_share
from xfbench.gemm.plugin import select
from xfbench.gemm.shapes import Shape, parse_sizes, preset_shapes, square
from xfbench.harness.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]


class FakeBenchmark:
    """Enough of pytest-benchmark's fixture for measure() to fail before timing."""

    def __init__(self):
        self.extra_info = {}


def _operands(m=96, n=96, k=96, seed=1):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((m, k), dtype=np.float32),
        rng.standard_normal((k, n), dtype=np.float32),
    )


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "bf16", "fp16"])
def test_check_passes_a_right_product_and_fails_a_transposed_operand(dtype):
    a, b = (quantize(x, dtype) for x in _operands())
    sample = Sample.of(a, b)
    right = (a @ b)[np.ix_(sample.rows, sample.cols)]
    wrong = (a @ b.T)[np.ix_(sample.rows, sample.cols)]
    bound = tolerance(dtype, a.shape[1])
    assert within(sample.error(right), bound)
    assert not within(sample.error(wrong), bound)
    assert not within(sample.error(right[:, :-1]), bound)  # wrong shape


def test_fp32_tolerance_catches_a_silent_drop_to_lower_precision():
    a, b = _operands(k=512)
    sample = Sample.of(a, b)
    lowered = (round_bf16(a) @ round_bf16(b))[np.ix_(sample.rows, sample.cols)]
    assert not within(sample.error(lowered), tolerance("fp32", 512))
    tf32 = (_cut(a, 11) @ _cut(b, 11))[np.ix_(sample.rows, sample.cols)]
    assert not within(sample.error(tf32), tolerance("fp32", 512))
    assert within(sample.error(tf32), tolerance("tf32", 512))


# Products computed in numpy the way each type's arithmetic does, to hold the derived
# tolerances against: float64 products of the exact operands, summed in the accumulator's
# format (rounded or cut), the result rounded to the output type.


def _cut(x, bits):
    """x with its significand cut (toward zero) to `bits` bits, the implicit one counted."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    return np.trunc(m * 2.0**bits) / 2.0**bits * 2.0**e


def _round16(x, dtype):
    x = np.asarray(x, dtype=np.float32)
    return round_bf16(x) if dtype == "bf16" else x.astype(np.float16).astype(np.float32)


def _accumulated_in(a, b, dtype):
    """a @ b summed one product at a time in the 16-bit type itself (round to nearest)."""
    c = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for i in range(a.shape[1]):
        c = _round16(c + _round16(np.outer(a[:, i], b[i]), dtype), dtype)
    return c


def _split_k(a, b, dtype, splits):
    """fp32 partial sums over `splits` slices of k, each rounded to the 16-bit type and
    reduced in it: a split-K product with a reduced-precision reduction."""
    parts = np.array_split(np.arange(a.shape[1]), splits)
    c = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for p in parts:
        c = _round16(c + _round16(a[:, p].astype(np.float32) @ b[p], dtype), dtype)
    return c


def _fp8_fast_accumulation(a, b, group=32):
    """Hopper's fp8 MMA as measured: each group of 32 products aligned to the largest and
    cut to 14 bits, added to an accumulator of 14 significant bits that is cut, not
    rounded; the result rounded to bf16."""
    acc = np.zeros((a.shape[0], b.shape[1]))
    for s in range(0, a.shape[1], group):
        p = a[:, s : s + group, None].astype(np.float64) * b[None, s : s + group, :]
        top = np.abs(p).max(axis=1, keepdims=True)
        ulp = 2.0 ** (np.frexp(np.where(top > 0, top, 1.0))[1] - 14)
        acc = _cut(acc + (np.floor(p / ulp) * ulp).sum(axis=1), 14)
    return round_bf16(acc.astype(np.float32))


def _e4m3(x):
    import ml_dtypes

    return x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)


@pytest.mark.parametrize("k", [64, 2048, 16384])
def test_derived_tolerances_hold_correct_products_of_each_arithmetic(k):
    # The fixed fp8 bound of 1e-2 failed the fast-accumulated product at k = 16384 (1.3e-2).
    a, b = _operands(m=48, n=48, k=k, seed=k)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    err = lambda got, ref=exact: np.linalg.norm(got - ref) / np.linalg.norm(ref)  # noqa: E731
    assert err(a @ b) <= tolerance("fp32", k) / 2
    assert err(_cut(a, 11) @ _cut(b, 11)) <= tolerance("tf32", k) / 2
    for dtype in ("bf16", "fp16"):
        x, y = _round16(a, dtype), _round16(b, dtype)
        ref = x.astype(np.float64) @ y.astype(np.float64)
        assert err(_round16(x @ y, dtype), ref) <= tolerance(dtype, k) / 2
        assert err(_split_k(x, y, dtype, 16), ref) <= tolerance(dtype, k, split_reduction=True) / 2
    x, y = _e4m3(a), _e4m3(b)
    ref = x.astype(np.float64) @ y.astype(np.float64)
    assert err(_fp8_fast_accumulation(x, y), ref) <= tolerance("fp8", k) / 2


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_a_16_bit_product_that_accumulated_in_its_own_type_fails(dtype):
    # The fixed bound of 1e-2 passed fp16 accumulated in fp16 at k = 2048 (error 6.6e-3).
    k = 2048
    a, b = (_round16(x, dtype) for x in _operands(m=48, n=48, k=k))
    sample = Sample.of(a, b)
    got = _accumulated_in(a, b, dtype)[np.ix_(sample.rows, sample.cols)]
    assert not within(sample.error(got), tolerance(dtype, k, split_reduction=True))


def test_the_tolerance_grows_with_k_where_the_accumulator_does():
    assert tolerance("fp32", 64) < tolerance("fp32", 8192) < tolerance("tf32", 8192)
    assert tolerance("fp8", 64) < tolerance("fp8", 8192) < 0.1  # a wrong product errs by ~1
    assert tolerance("fp16", 8192) < tolerance("fp16", 8192, split_reduction=True)
    assert tolerance("fp32", 8192, split_reduction=True) == tolerance("fp32", 8192)


def test_round_bf16_keeps_8_significant_bits():
    x = np.array([1.0, 1 + 2**-8, 1 + 2**-7, -3.14159], dtype=np.float32)
    r = round_bf16(x)
    assert r[0] == 1.0 and r[1] == 1.0 and r[2] == 1 + 2**-7  # a tie rounds to even
    assert (r.view(np.uint32) & 0xFFFF).max() == 0


def test_measure_fails_a_wrong_product(monkeypatch):
    monkeypatch.setattr(NumpyMatmul, "matmul", lambda self, a, b: np.matmul(a, b.T))
    bench = FakeBenchmark()
    cell = GemmCell(impl="numpy", shape=square(64), dtype="fp32", device="cpu", threads=1)
    with pytest.raises(WrongProduct, match="wrong product"):
        measure(bench, cell, PRESETS["smoke"], {})
    assert bench.extra_info["status"] == "failed"
    assert bench.extra_info["check_error"] > 0.1


def test_measure_skips_when_the_matrices_do_not_fit():
    cell = GemmCell(impl="numpy", shape=square(400_000), dtype="fp32", device="cpu", threads=1)
    with pytest.raises(CannotRun, match="the three matrices need"):
        measure(FakeBenchmark(), cell, PRESETS["smoke"], {})


def test_input_sets_rotate_past_the_caches_within_memory():
    assert input_sets(square(256), "fp32", None) == 32  # small: as many as allowed
    assert input_sets(square(16384), "fp32", None) == 1  # 2 GiB of operands: one set
    assert input_sets(square(1024), "bf16", spare_bytes=0) == 1  # no spare memory: one set


def test_peak_share_is_none_for_unknown_devices_and_the_cpu():
    assert peak_share(500.0, "cpu", "fp32") is None
    assert peak_share(500.0, "NVIDIA GeForce RTX 4090", "bf16") is None
    assert peak_share(500.0, "NVIDIA A100-SXM4-80GB", "fp8") is None  # no fp8 units
    assert peak_share(494.5, "NVIDIA H100 80GB HBM3", "bf16") == pytest.approx(0.5)
    assert peak_share(67.0, "NVIDIA H200", "fp32") == pytest.approx(1.0)


def test_share_of_best_groups_by_shape_dtype_and_device():
    def rec(impl, tflops, dtype="bf16", device="cuda:0", m=8192, status="ok"):
        return {
            "suite": "gemm",
            "impl": impl,
            "m": m,
            "n": m,
            "k": m,
            "dtype": dtype,
            "device": device,
            "status": status,
            "tflops": tflops,
        }

    records = [
        rec("cupy", 800.0),
        rec("torch", 760.0),
        rec("jax", 400.0),
        rec("torch", 50.0, dtype="fp32"),
        rec("numpy", 1.0, device="cpu"),
        rec("jax", 900.0, m=4096),
        rec("tensorflow", None, status="failed"),
    ]
    fill_share_of_best(records)
    assert [r.get("share_of_best") for r in records] == [1.0, 0.95, 0.5, 1.0, 1.0, 1.0, None]


def test_sizes_and_selection():
    assert [s.label for s in parse_sizes("1024,16x48x40,layers:8")][:2] == ["1024", "16x48x40"]
    assert parse_sizes("layers")[2] == Shape(4096, 16000, 2304, "b4096-2304x16000")
    assert all(max(s.m, s.k) <= 4096 for s in preset_shapes("smoke"))
    with pytest.raises(UsageError):
        select(gemm_sizes="12x")
    with pytest.raises(UsageError):
        select(gemm_impl="blas")
    sel = select(framework="torch", precision="fp32,fp8", preset="smoke", device="cpu")
    assert sel.impls == ("torch",) and sel.dtypes == ("fp32", "fp8")
    assert select(preset="smoke", device="cpu").dtypes == ("fp32", "tf32", "bf16", "fp16", "fp8")
    assert "cupy" in select(preset="smoke", device="cpu").impls


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_smoke_run_writes_the_gemm_fields(tmp_path):
    out = tmp_path / "gemm.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "xfbench/suites/test_gemm.py",
            "--preset",
            "smoke",
            "--gemm-impl",
            "numpy,torch,cupy",
            "--gemm-sizes",
            "64,16x48x40",
            "--precision",
            "fp32,bf16",
            "--device",
            "cpu",
            "--threads",
            "1",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--benchmark-json={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "xfbench GEMM: TFLOP/s" in proc.stdout
    benches = json.loads(out.read_text())["benchmarks"]
    infos = {
        (b["extra_info"]["impl"], b["extra_info"]["shape"], b["extra_info"]["dtype"]): b[
            "extra_info"
        ]
        for b in benches
    }
    assert set(infos) == {
        (i, s, "fp32") for i in ("numpy", "torch") for s in ("64", "16x48x40")
    } | {("torch", s, "bf16") for s in ("64", "16x48x40")}
    for info in infos.values():
        for field in (
            "m",
            "n",
            "k",
            "dtype",
            "device",
            "device_name",
            "tflops",
            "peak_share",
            "share_of_best",
            "check_error",
            "threads_requested",
            "threads_used",
            "other_cpu_share",
            "contended",
            "thread_shortfall",
            "versions",
            "tf32_mode",
            "timer",
        ):
            assert field in info, field
        assert info["status"] == "ok" and info["tflops"] > 0 and info["peak_share"] is None
        assert 0 < info["share_of_best"] <= 1 and info["threads_requested"] == 1
    assert max(i["share_of_best"] for k, i in infos.items() if k[2] == "fp32") == 1.0
    for b in benches:
        assert b["stats"]["rounds"] >= 3


def test_compare_checks_cupy_against_torch(tmp_path, capsys):
    from xfbench.gemm import compare

    def bench(impl, tflops):
        return {
            "extra_info": {
                "suite": "gemm",
                "impl": impl,
                "shape": "8192",
                "m": 8192,
                "n": 8192,
                "k": 8192,
                "dtype": "bf16",
                "device": "cuda:0",
                "device_name": "NVIDIA H100 80GB HBM3",
                "status": "ok",
                "tflops": tflops,
                "peak_share": tflops / 989,
                "check_error": 2e-3,
            }
        }

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"benchmarks": [bench("cupy", 790.0), bench("torch", 800.0)]}))
    assert compare.main([str(path), "--min-ratio", "0.95"]) == 0
    out = capsys.readouterr().out
    assert "798" in out and "0.988" in out  # the published figure beside ours
    assert compare.main([str(path), "--min-ratio", "0.995"]) == 1
    assert compare.main([str(tmp_path / "missing.json")]) == 2


def test_implementations_import_only_their_own_framework():
    code = (
        "import sys\n"
        "FRAMEWORKS = ('torch', 'tensorflow', 'jax', 'cupy', 'onnxruntime')\n"
        "import xfbench.gemm.plugin\n"
        "from xfbench.gemm import IMPLS, get_impl\n"
        "for name in IMPLS: get_impl(name)\n"
        "assert not [m for m in FRAMEWORKS if m in sys.modules], 'listing imported a framework'\n"
        "get_impl('onnxruntime').versions()\n"
        "get_impl('jax').versions()\n"
        "loaded = sorted(m for m in FRAMEWORKS if m in sys.modules)\n"
        "assert loaded == ['jax', 'onnxruntime'], loaded\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_naming_networks_leaves_the_gemm_suite_out():
    from xfbench.gemm.plugin import select

    assert select(framework="torch", model="resnet56", preset="smoke").cells() == []
    assert select(framework="torch", model="resnet56", gemm_sizes="256", preset="smoke").cells()
    assert select(framework="torch", preset="smoke").cells()
