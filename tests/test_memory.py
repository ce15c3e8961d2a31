"""Host memory: the per-cell peak, and the allocator kept from unmapping freed memory."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from xfbench.harness.memory import peak_rss_bytes, reset_peak_rss

ROOT = Path(__file__).resolve().parents[1]

CHURN = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from xfbench.harness import memory
    print(memory.keep_freed_memory())
    n = 200_000_000
    for i in range(6):  # free and reallocate 200 MB, as a framework does with its gradients
        if i == 2:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        a = bytearray(n)                       # malloc'd, every page written below
        a[::4096] = bytes(len(range(0, n, 4096)))
        del a
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def churn(env_extra):
    import os

    env = {**os.environ, **env_extra}
    out = subprocess.run(
        [sys.executable, "-c", CHURN], capture_output=True, text=True, env=env, check=True
    ).stdout.split("\n")
    return out[0], int(out[1])


def test_freed_memory_is_reused_without_page_faults():
    setting, faults = churn({})
    assert setting == "glibc: no mmap, no trim"
    assert faults < 1000  # four 200 MB allocations, served from memory already mapped
    setting, faults = churn({"XFBENCH_MALLOC": "default"})
    assert setting.startswith("glibc default")
    assert faults > 100_000  # glibc's default maps each one afresh: ~49,000 faults apiece


def test_peak_rss_resets_per_cell():

    if not reset_peak_rss():
        pytest.skip("this kernel does not let a process reset its peak RSS")
    start = peak_rss_bytes()
    big = bytearray(300_000_000)
    big[::4096] = bytes(len(range(0, len(big), 4096)))
    assert peak_rss_bytes() - start > 150_000_000
    high = peak_rss_bytes()
    del big
    reset_peak_rss()
    assert peak_rss_bytes() <= high  # a new peak starts from the RSS now, not the old peak


# -- will a cell fit? -----------------------------------------------------------------
def test_the_estimate_is_weights_gradients_momentum_and_activations():
    from xfbench.harness.memory import needed_bytes
    from xfbench.models import get_spec

    spec = get_spec("resnet56")
    need, parts = needed_bytes(spec, "train", 128, "fp32")
    assert need == 3 * 4 * spec.param_count + 4 * 128 * spec.activations
    assert "activations at batch 128" in parts
    half, _ = needed_bytes(spec, "train", 128, "bf16")
    assert half < need  # half-precision activations
    infer, _ = needed_bytes(spec, "infer", 128, "fp32")
    assert infer < need


def test_a_cell_that_cannot_fit_is_refused_with_both_numbers(monkeypatch):

    from xfbench.harness import memory
    from xfbench.models import get_spec

    monkeypatch.setattr(memory, "host_available_bytes", lambda: 2**30)
    spec = get_spec("resnet50")
    memory.check_fits(
        spec=spec, task="train", batch=1, precision="fp32", device="cpu"
    )  # 0.4 GiB fits in 1
    with pytest.raises(memory.TooLarge) as e:
        memory.check_fits(spec=spec, task="train", batch=16, precision="fp32", device="cpu")
    assert "needs at least 2.01 GiB" in str(e.value) and "1.00 GiB host memory available" in (
        str(e.value)
    )


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_huge_batch_is_one_line_and_an_oom_failure(tmp_path):
    """--batch-size 10000000: refused before any framework allocates, one line, no
    traceback, recorded as out of memory."""
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "xfbench/suites/test_train.py", "-q"]
        + ["--framework", "torch", "--model", "resnet56", "--mode", "eager", "--threads", "1"]
        + ["--device", "cpu"]
        + ["--batch-size", "10000000", f"--benchmark-json={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout and "During handling" not in proc.stdout
    assert "out of memory before it started: needs at least" in proc.stdout
    import json

    (failure,) = json.loads(out.read_text())["xfbench"]["failures"]
    assert failure["status"] == "oom"


def test_the_attention_scores_a_framework_keeps_are_counted():
    """GPT-2 small at 1,024 tokens and batch 64 (the accelerator geometry): a written-out
    attention (TensorFlow, JAX's XLA implementation) keeps a float32 (T, T) matrix per head
    and layer for its backward pass, 36 GiB; a fused kernel (PyTorch's, cuDNN's through JAX
    in bf16 on a GPU) keeps none. Inference keeps one layer's in flight."""
    from xfbench.adapters import Cell, get_adapter
    from xfbench.harness.memory import needed_bytes
    from xfbench.models import get_spec

    spec = get_spec("gpt2", tokens=1024)

    def kept(framework, precision="bf16", device="cuda:0", task="train"):
        cell = Cell(network="gpt2", framework=framework, mode="x", precision=precision,
                    device=device, threads=1, batch_size=64, task=task, tokens=1024)  # fmt: skip
        return get_adapter(framework).attention_scores_kept(cell)

    assert kept("torch") == 0 and kept("torch", "fp64", "cpu") == 1
    assert kept("jax") == 0 and kept("jax", device="cpu") == 1 and kept("tensorflow") == 1
    fused, _ = needed_bytes(spec, "train", 64, "bf16", scores_kept=0)
    written, parts = needed_bytes(spec, "train", 64, "bf16", scores_kept=1)
    assert written - fused == 12 * 12 * 1024 * 1024 * 4 * 64  # layers x heads x T^2 x fp32
    assert "attention scores 36.00 GiB" in parts
    one_layer, _ = needed_bytes(spec, "infer", 64, "bf16", scores_kept=1)
    assert (
        one_layer - needed_bytes(spec, "infer", 64, "bf16", scores_kept=0)[0]
        == 12 * 1024**2 * 4 * 64
    )


def test_a_cell_whose_attention_scores_cannot_fit_is_refused_before_it_starts(monkeypatch):

    from xfbench.harness import memory
    from xfbench.models import get_spec

    spec = get_spec("gpt2", tokens=1024)
    monkeypatch.setattr(memory, "host_available_bytes", lambda: 40 * 2**30)
    args = dict(spec=spec, task="train", batch=64, precision="bf16", device="cpu")
    memory.check_fits(**args, scores_kept=0)  # 26 GiB: fits in 40
    with pytest.raises(memory.TooLarge, match="attention scores 36.00 GiB"):
        memory.check_fits(**args, scores_kept=1)
