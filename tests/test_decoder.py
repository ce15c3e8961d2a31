"""The decoder the size buyers serve (models.DECODERS: GPT-2's layers at GPT-3 6.7B's
shape): its weights made alike on the host and on a framework's device, its smoke network
decoding the float64 function's tokens in every framework, its check on the device, the
refusal of a full-size cell the host cannot hold, and its GPU part."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from xfbench.errors import UsageError
from xfbench.generation import check, metrics
from xfbench.generation.measure import prompt_ids
from xfbench.models import DECODERS, NETWORKS, get_spec, seeded

ISL, OSL, BATCH = 16, 16, 2
FAST = [
    ("torch", "eager"),
    ("jax", "jit"),
    ("jax", "loop"),
    ("tensorflow", "function"),
    ("onnxruntime", "cpu"),
]


def test_its_full_shape_is_gpt3_67b_with_a_padded_vocabulary():
    """Brown et al. 2020, Table 2.1: 32 layers of width 4,096, 32 heads of 128, 2,048
    positions; the vocabulary padded to 50,304: 6.66 B parameters, 13.3 GB in bf16. It is
    no network of Table 7's suite."""
    from xfbench.models import layers as L

    spec = get_spec("gpt3_6_7b")
    blocks = spec.layer(L.TransformerBlock)
    embed = spec.layer(L.TokenEmbedding)[0]
    assert (len(blocks), embed.dim, blocks[0].heads, blocks[0].ff) == (32, 4096, 32, 16384)
    assert (embed.vocab, embed.positions) == (50304, 2048) and blocks[0].causal
    assert 6.6e9 < spec.param_count < 6.7e9
    assert "gpt3_6_7b" in DECODERS and "gpt3_6_7b" not in NETWORKS


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_its_weights_are_the_same_bits_on_the_host_and_made_by_each_framework(dtype):
    """numpy, PyTorch and JAX hash the same counters into the same values, and round them
    to bfloat16 alike; the ranges are a trained network's (GELU inputs of std 1.5,
    attention scores of std 3), set by the amplitudes."""
    import jax
    import jax.numpy as jnp
    import torch

    from xfbench.adapters.base import round_bf16

    spec = get_spec("gpt3_6_7b", "smoke")
    host = seeded.numpy_weights(spec)
    cpu = jax.devices("cpu")[0]
    for draw in seeded.plan(spec):
        want = host[draw.name] if dtype == "float32" else round_bf16(host[draw.name])
        made = seeded.torch_value(draw, "cpu", getattr(torch, dtype)).float().numpy()
        jaxed = np.asarray(seeded.jax_value(draw, cpu, getattr(jnp, dtype)).astype(jnp.float32))
        assert np.array_equal(made, want) and np.array_equal(jaxed, want), draw.name
        if len(draw.shape) == 2:  # JAX's decoder's layout, made transposed in one program
            t = seeded.jax_value(draw, cpu, getattr(jnp, dtype), transposed=True)
            assert np.array_equal(np.asarray(t.astype(jnp.float32)), want.T), draw.name
    d = host["embed.word"].shape[1]
    fc = host["layer0.mlp.fc.weight"]
    assert abs(fc.std() * np.sqrt(d) - 1.5) < 0.1
    qkv = host["layer0.attn.qkv.weight"]
    scores = (qkv[:d].std() * np.sqrt(d)) * (qkv[d : 2 * d].std() * np.sqrt(d))
    assert abs(scores - 3.0) < 0.3 and abs(qkv[2 * d :].std() - 0.02) < 0.002


def test_a_change_of_one_counter_or_seed_changes_the_values():
    spec = get_spec("gpt3_6_7b", "smoke")
    draw = seeded.plan(spec)[0]
    assert not np.array_equal(seeded.numpy_value(draw, 0), seeded.numpy_value(draw, 1))
    x = np.arange(4, dtype=np.int64)
    assert len(set(seeded.hashed(x).tolist())) == 4


@pytest.fixture(scope="module")
def decoder():
    spec = get_spec("gpt3_6_7b", "smoke")
    return spec, prompt_ids(spec, BATCH, ISL)


def _generator(framework: str, mode: str, spec, precision: str = "fp32"):
    from xfbench.adapters import get_adapter

    adapter = get_adapter(framework)
    if adapter.import_error():
        pytest.skip(adapter.import_error())
    cell = SimpleNamespace(
        framework=framework, mode=mode, device="cpu", precision=precision, threads=2,
        batch_size=BATCH, prompt_tokens=ISL, new_tokens=OSL,
    )  # fmt: skip
    weights = seeded.Made() if adapter.makes_weights else check.decoding_weights(spec, precision)
    return adapter.generator(spec, cell, weights)


@pytest.mark.parametrize(("framework", "mode"), FAST)
def test_at_smoke_width_every_framework_decodes_the_float64_functions_tokens(
    framework, mode, decoder
):
    """PyTorch and JAX make the weights on their device, TensorFlow and ONNX Runtime take
    the host's: each decodes the float64 reference's greedy tokens, no near tie, and its
    logits through its cache are the reference's within the suite's fp32 bound. So every
    framework decodes the same tokens."""
    spec, prompt = decoder
    generator = _generator(framework, mode, spec)
    try:
        run = metrics.generate(generator, prompt, OSL, keep_logits=True)
    finally:
        generator.close()
    weights = check.decoding_weights(spec)
    found = check.check_generation(spec, weights, prompt, tokens=run.tokens, logits=run.logits)
    assert found["verified"] and found["near_ties"] == 0, found


# JAX's among command 2's slowest on a 2-core Zen 3: CI runs them
@pytest.mark.parametrize("framework", ["torch", pytest.param("jax", marks=pytest.mark.slow)])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_check_on_the_device_holds_a_decoder_to_its_float32_self(framework, precision, decoder):
    """At full size the float64 reference cannot be held on the host: the cell is checked
    against the same network with no cache in float32 on its device. At smoke size that
    reference is the float64 one's within fp32's bound, the decode passes it, and a cache
    written one position off fails it."""
    spec, prompt = decoder
    mode = "eager" if framework == "torch" else "jit"
    generator = _generator(framework, mode, spec, precision)
    rows = check.checked_sequences(BATCH)
    try:
        run = metrics.generate(generator, prompt, OSL, keep_logits=rows)
        sequence = np.concatenate([prompt[rows], run.tokens[rows, :-1]], axis=1)
        ours = generator.reference_logits(sequence).astype(np.float64)
        found = check.check_on_device(spec, generator, prompt, run, rows=rows, precision=precision)
    finally:
        generator.close()
    wide = check.reference_logits(spec, check.decoding_weights(spec, precision), sequence)
    assert check.rel_err(ours, wide) <= check.TOL
    assert found["verified"] and found["reference"] == check.DEVICE_REFERENCE, found


def test_the_check_on_the_device_fails_a_cache_written_one_position_off(decoder, monkeypatch):
    from xfbench.adapters.torch import generation as g

    spec, prompt = decoder
    right = g.write
    monkeypatch.setattr(g, "write", lambda cache, p, new: right(cache, p + 1, new))
    generator = _generator("torch", "eager", spec)
    rows = check.checked_sequences(BATCH)
    try:
        run = metrics.generate(generator, prompt, OSL, keep_logits=rows)
        found = check.check_on_device(spec, generator, prompt, run, rows=rows, precision="fp32")
    finally:
        generator.close()
    assert not found["verified"]


def test_a_full_size_cpu_cell_the_host_cannot_hold_is_refused_in_one_line(
    monkeypatch, tmp_path, capsys
):
    """Asked for by name only (the generation suite decodes GPT-2 unless --model names
    the decoder); on a host of 8 GiB available its full size is refused before any process
    starts: one line, exit 2, nothing written, whatever this machine's memory."""
    from xfbench.generation import measure
    from xfbench.generation.cell import DEFAULT_NETWORKS
    from xfbench.runner import cli

    assert DEFAULT_NETWORKS == ("gpt2",)
    monkeypatch.setattr(measure, "host_available_bytes", lambda: 8 * 2**30)
    out = tmp_path / "results"
    argv = ["--suite", "generation", "--model", "gpt3_6_7b", "--preset", "quick",
            "--framework", "torch", "--threads", "1", "--results", str(out)]  # fmt: skip
    assert cli.main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "gpt3_6_7b at batch 1, fp32, does not fit: it needs at least" in err[0]
    assert "8.00 GiB host memory available" in err[0] and not out.exists()
    # in bf16 its check's float32 copy counts too
    with pytest.raises(UsageError, match=r"bf16, does not fit.*the check's float32 copy"):
        from xfbench.generation.plugin import sweep

        sweep({"model": "gpt3_6_7b", "preset": "quick", "framework": "torch",
               "precision": "bf16", "threads": "1"})  # fmt: skip


@pytest.mark.parametrize("framework", ["tensorflow", "onnxruntime"])
def test_a_framework_that_takes_the_hosts_weights_skips_its_full_size_with_why(framework):
    """Its 26.6 GB of float32 would pass through the host, and its check would be the
    host's float64 one: skipped with the reason, on any device; its smoke network runs."""
    from xfbench.adapters import get_adapter
    from xfbench.errors import CannotRun
    from xfbench.generation.cell import GenerationCell
    from xfbench.generation.measure import runnable

    if get_adapter(framework).import_error():
        pytest.skip(get_adapter(framework).import_error())
    cell = GenerationCell(network="gpt3_6_7b", framework=framework,
                          mode="cpu" if framework == "onnxruntime" else "function",
                          precision="fp32", device="cpu", threads=1, batch_size=1, scale="full",
                          prompt_tokens=16, new_tokens=16)  # fmt: skip
    with pytest.raises(CannotRun, match="takes its weights from the host"):
        runnable(cell)
    from dataclasses import replace

    assert runnable(replace(cell, scale="smoke")) is not None


def test_its_gpu_part_comes_right_after_gpt2s_decode_in_bf16(tmp_path):
    """PyTorch's CUDA graphs and loop mode and JAX's loop, bf16, at batch 1, 8 and 64, a
    part a batch (batch 1's with JAX's), each fitting one window, after GPT-2's decode
    parts and before the rest."""
    from xfbench.acceptance.run import RESERVE_S
    from xfbench.acceptance.steps import BUDGET_S, PARTS, steps

    assert PARTS[1:7] == (
        "decode", "decode-b8", "decode-b64", "decode-6.7b", "decode-6.7b-b8", "decode-6.7b-b64",
    )  # fmt: skip
    every = steps("cuda:0", "quick", Path(tmp_path))
    ours = [s for s in every if s.part.startswith("decode-6.7b")]
    assert [s.name for s in ours] == [
        "decode-6.7b-torch-b1", "decode-6.7b-jax", "decode-6.7b-torch-b8", "decode-6.7b-torch-b64",
    ]  # fmt: skip
    for s in ours:
        argv = " ".join(s.argv)
        assert "--model=gpt3_6_7b" in argv and "--precision=bf16" in argv
    for part in ("decode-6.7b", "decode-6.7b-b8", "decode-6.7b-b64"):
        caps = sum(s.cap_s for s in every if s.part == part)
        assert 16 + caps + RESERVE_S <= BUDGET_S
