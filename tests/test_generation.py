"""Token generation (xfbench/generation): every framework decodes Hugging Face's tokens,
its logits along HF's sequence are HF's, a cache written one position off fails the
token check, and the metrics, the margin rule and the options say what they are defined
to. Smoke size: 2 layers of width 64, 16 prompt and 16 new tokens, batch 2."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from xfbench.errors import UsageError
from xfbench.exchange.reference import TOL, rel_err
from xfbench.generation import check, metrics
from xfbench.generation.cell import GenerationCell, batches, lengths
from xfbench.generation.measure import prompt_ids
from xfbench.harness.equivalence import trained_range
from xfbench.models import get_spec, initial_weights

ROOT = Path(__file__).resolve().parents[1]
ISL, OSL, BATCH = 16, 16, 2
# (framework, mode) of the default tests; torch's compile (max-autotune) is slow
FAST = [
    ("torch", "eager"),
    ("jax", "jit"),
    ("jax", "loop"),
    ("tensorflow", "eager"),
    ("tensorflow", "function"),
    ("tensorflow", "xla"),
    ("onnxruntime", "cpu"),
]
MODES = FAST + [pytest.param("torch", "compile", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def smoke():
    spec = get_spec("gpt2", "smoke")
    return spec, trained_range(spec, initial_weights(spec)), prompt_ids(spec, BATCH, ISL)


@pytest.fixture(scope="module")
def hugging_face(smoke):
    pytest.importorskip("transformers", reason="the 'reference' extra (requirements.lock)")
    from xfbench.generation import huggingface

    spec, weights, prompt = smoke
    net = huggingface.model(spec, weights)
    tokens = huggingface.greedy(net, prompt, OSL)
    sequence = np.concatenate([prompt, tokens[:, :-1]], axis=1)
    return tokens, huggingface.logits(net, sequence)[:, ISL - 1 :]


def _cell(framework: str, mode: str, precision: str = "fp32") -> SimpleNamespace:
    return SimpleNamespace(
        framework=framework, mode=mode, device="cpu", precision=precision, threads=2,
        batch_size=BATCH, prompt_tokens=ISL, new_tokens=OSL,
    )  # fmt: skip


def _generator(framework: str, mode: str, spec, weights, precision: str = "fp32"):
    from xfbench.adapters import get_adapter

    adapter = get_adapter(framework)
    if adapter.import_error():
        pytest.skip(adapter.import_error())
    return adapter.generator(spec, _cell(framework, mode, precision), weights)


@pytest.mark.parametrize(("framework", "mode"), MODES)
def test_each_framework_decodes_hugging_faces_tokens_and_logits(
    framework, mode, smoke, hugging_face
):
    """Greedy tokens: HF's wherever HF's top two logits are further apart than the margin
    (at these weights, everywhere). Teacher-forced along HF's sequence through the cache,
    every decode step's logits are HF's within the suite's fp32 bound."""
    spec, weights, prompt = smoke
    hf_tokens, hf_logits = hugging_face
    generator = _generator(framework, mode, spec, weights)
    try:
        ours = metrics.generate(generator, prompt, OSL).tokens
        judged = check.judge(hf_logits.astype(np.float64), ours)
        assert judged["verified"] and judged["near_ties"] == 0, judged
        assert np.array_equal(ours, hf_tokens)
        # teacher-forced: HF's tokens fed to the decoder, its logits at each step
        generator.prefill(prompt)
        seen = [generator.logits()]
        for j in range(OSL - 1):
            generator.decode(hf_tokens[:, j])
            seen.append(generator.logits())
        err = rel_err(np.stack(seen, axis=1), hf_logits)
        assert err <= TOL, f"{framework} {mode}: logits {err:.2e} from HF's"
    finally:
        generator.close()


def _one_position_off(framework: str, monkeypatch) -> None:
    """Plant the fault: every cache write lands one position after where it belongs."""
    if framework == "torch":
        from xfbench.adapters.torch import generation as g

        right = g.write
        monkeypatch.setattr(g, "write", lambda cache, p, new: right(cache, p + 1, new))
    elif framework == "jax":
        from xfbench.adapters.jax import generation as g

        right = g.write
        monkeypatch.setattr(g, "write", lambda cache, p, new: right(cache, p + 1, new))
    elif framework == "tensorflow":
        from xfbench.adapters.tensorflow import generation as g

        right = g.write
        monkeypatch.setattr(g, "write", lambda cache, p, new: right(cache, p + 1, new))
    else:
        from xfbench.exchange import decoder

        right = decoder._positions

        def shifted(graph, length):
            out = right(graph, length)
            out["indices"] = graph.op("Add", [out["indices"], graph.const([1])])
            return out

        monkeypatch.setattr(decoder, "_positions", shifted)


@pytest.mark.parametrize(
    ("framework", "mode"),
    [("torch", "eager"), ("jax", "jit"), ("tensorflow", "function"), ("onnxruntime", "cpu")],
)
def test_a_cache_written_one_position_off_fails_the_check(framework, mode, smoke, monkeypatch):
    spec, weights, prompt = smoke
    _one_position_off(framework, monkeypatch)
    generator = _generator(framework, mode, spec, weights)
    try:
        run = metrics.generate(generator, prompt, OSL, keep_logits=True)
    finally:
        generator.close()
    result = check.check_generation(spec, weights, prompt, tokens=run.tokens, logits=run.logits)
    assert not result["verified"] and result["logits_rel_err"] > 100 * TOL, result
    with pytest.raises(check.TokensDiverged, match="decoded (tokens|logits) are"):
        check.verdict(result)


BF16 = [("torch", "eager"), ("jax", "jit"), ("jax", "loop")]
BF16 += [pytest.param("torch", "compile", marks=pytest.mark.slow)]  # Inductor: 12 s here


@pytest.mark.parametrize(("framework", "mode"), BF16)
def test_a_bf16_cell_decodes_in_bfloat16_within_the_bf16_rule(framework, mode, smoke):
    """bf16 generation: the weights (rounded to bfloat16 before any framework sees them)
    and the cache held in bfloat16, half fp32's bytes; the logits within the bf16 bound of
    the float64 function of the same rounded weights, and further from it than fp32's
    bound allows, which a decode secretly in float32 would not be (Zen 5, full size: 1.2e-2
    to 1.4e-2 of the logits' scale, against the bound's 6.25e-2)."""
    spec, _, prompt = smoke
    weights = check.decoding_weights(spec, "bf16")
    generator = _generator(framework, mode, spec, weights, "bf16")
    fp32 = _generator(framework, mode, spec, check.decoding_weights(spec), "fp32")
    try:
        run = metrics.generate(generator, prompt, OSL, keep_logits=[0, BATCH - 1])
        assert generator.info["weights_dtype"] == generator.info["cache_dtype"] == "bfloat16"
        assert 2 * generator.cache_bytes == fp32.cache_bytes
    finally:
        generator.close()
        fp32.close()
    result = check.check_generation(
        spec, weights, prompt, tokens=run.tokens, logits=run.logits, precision="bf16"
    )
    assert result["verified"] and result["logits_tolerance"] == check.BF16_TOL, result
    assert 10 * TOL < result["logits_rel_err"] <= check.BF16_TOL / 4, result


@pytest.mark.parametrize(("framework", "mode"), [("torch", "eager"), ("jax", "jit")])
def test_a_bf16_cache_written_one_position_off_fails_the_bf16_check(
    framework, mode, smoke, monkeypatch
):
    """The bf16 bound is wide enough for bfloat16's rounding, not for a cache fault: the
    planted fault moves the logits 8.6e-2 to 8.9e-2 of their scale here (and 0.26 at full
    size), above the bound's 6.25e-2."""
    spec, _, prompt = smoke
    weights = check.decoding_weights(spec, "bf16")
    _one_position_off(framework, monkeypatch)
    generator = _generator(framework, mode, spec, weights, "bf16")
    try:
        run = metrics.generate(generator, prompt, OSL, keep_logits=True)
    finally:
        generator.close()
    result = check.check_generation(
        spec, weights, prompt, tokens=run.tokens, logits=run.logits, precision="bf16"
    )
    assert not result["verified"] and result["logits_rel_err"] > check.BF16_TOL, result


def test_weights_are_rounded_to_bfloat16_as_the_frameworks_round_them():
    """The weights' rounding (adapters.base.round_bf16, the GEMM check's too) is round-to-nearest-even to bfloat16, PyTorch's own cast: the
    float64 reference of a bf16 cell computes with the values the cell holds."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.standard_normal(10_000).astype(np.float32) * 3,
            np.float32([1 + 2**-8, -(1 + 3 * 2**-8)]),
        ]
    )
    theirs = torch.from_numpy(values).to(torch.bfloat16).float().numpy()
    assert np.array_equal(check.round_bf16(values), theirs)


@pytest.mark.parametrize("framework", ["tensorflow", "onnxruntime"])
def test_a_bf16_cell_of_a_framework_that_decodes_in_fp32_only_is_skipped_with_why(framework):
    from xfbench.errors import CannotRun
    from xfbench.generation.measure import runnable

    cell = GenerationCell(
        network="gpt2", framework=framework, mode="cpu" if framework == "onnxruntime" else "xla",
        precision="bf16", device="cpu", threads=1, batch_size=1, scale="smoke",
        prompt_tokens=ISL, new_tokens=OSL,
    )  # fmt: skip
    with pytest.raises(CannotRun, match="fp32"):  # its own reason, or generation's
        runnable(cell)


class _Benchmark:
    """pytest-benchmark's fixture, as far as measure() uses it."""

    has_error = False
    extra_info: dict = {}

    def pedantic(self, fn, rounds, iterations, warmup_rounds):
        for _ in range(rounds):
            fn()


def test_a_diverging_decode_is_a_failed_cell_in_one_line(monkeypatch):
    """measure() checks a generation after the timed ones: its entry is dropped from the
    JSON (has_error) and the failure is one line."""
    pytest.importorskip("torch")
    from xfbench.generation.measure import measure
    from xfbench.harness.presets import PRESETS

    _one_position_off("torch", monkeypatch)
    cell = GenerationCell(
        network="gpt2", framework="torch", mode="eager", precision="fp32", device="cpu",
        threads=2, batch_size=BATCH, scale="smoke", prompt_tokens=ISL, new_tokens=OSL,
    )  # fmt: skip
    bench = _Benchmark()
    with pytest.raises(check.TokensDiverged) as caught:
        measure(bench, cell, preset=PRESETS["smoke"], threads_config={})
    assert len(str(caught.value).splitlines()) == 1 and bench.has_error


def test_the_check_decodes_the_same_two_sequences_at_any_batch(monkeypatch):
    """The float64 check's cost does not grow with the batch: on an H100's host it took
    8.1 s at batch 1 and 22.7 s at batch 8, and batch 64 ran past its cell's time-out. A
    cell checks its first and last sequences, whatever its batch."""
    pytest.importorskip("torch")
    from xfbench.generation.measure import measure
    from xfbench.harness.presets import PRESETS

    checked = []

    def in_process(spec, prompt, tokens, logits, precision):
        checked.append((prompt.shape[0], tokens.shape[0], logits.shape[0]))
        return check.check_generation(
            spec, check.decoding_weights(spec), prompt, tokens=tokens, logits=logits
        )

    monkeypatch.setattr(check, "check_apart", in_process)
    for batch, rows in ((1, [0]), (5, [0, 4])):
        cell = GenerationCell(
            network="gpt2", framework="torch", mode="eager", precision="fp32", device="cpu",
            threads=2, batch_size=batch, scale="smoke", prompt_tokens=ISL, new_tokens=OSL,
        )  # fmt: skip
        record = measure(_Benchmark(), cell, preset=PRESETS["smoke"], threads_config={})
        assert record["token_check"]["sequences_checked"] == rows
        assert record["token_check"]["tokens_checked"] == len(rows) * OSL
        assert checked[-1] == (len(rows),) * 3


def test_the_check_passes_the_reference_itself_and_counts_what_it_checked(smoke):
    """The reference's own greedy tokens and logits pass; logits off by 1e-3 of their scale
    (ten times the tolerance) fail, though every token is the same."""
    spec, weights, prompt = smoke
    tokens = np.zeros((BATCH, OSL), np.int64)
    for j in range(OSL):  # greedy through the reference, one token at a time
        sequence = np.concatenate([prompt, tokens[:, :j]], axis=1)
        tokens[:, j] = check.reference_logits(spec, weights, sequence)[:, -1].argmax(-1)
    sequence = np.concatenate([prompt, tokens[:, :-1]], axis=1)
    logits = check.reference_logits(spec, weights, sequence)[:, ISL - 1 :].astype(np.float32)
    result = check.check_generation(spec, weights, prompt, tokens=tokens, logits=logits)
    assert result["verified"] and result["tokens_checked"] == BATCH * OSL
    assert result["logits_rel_err"] < 1e-6
    noisy = logits + 1e-3 * np.abs(logits).max() * np.sign(logits)
    result = check.check_generation(spec, weights, prompt, tokens=tokens, logits=noisy)
    assert result["tokens_verified"] and not result["verified"]
    with pytest.raises(check.TokensDiverged, match="decoded logits are"):
        check.verdict(result)


def test_the_margin_allows_near_ties_and_nothing_else():
    logits = np.zeros((1, 3, 5))
    logits[0, 0] = [0, 10, 0, 0, 0]  # a clear choice: 1
    logits[0, 1] = [0, 10, 10 - 1e-6, 0, 0]  # a near-tie between 1 and 2
    logits[0, 2] = [0, 10, 9, 0, 0]  # 2 is a tenth of the scale below 1
    judged = check.judge(logits, np.array([[1, 2, 1]]))
    assert judged["verified"] and judged["near_ties"] == 1
    judged = check.judge(logits, np.array([[1, 1, 2]]))
    assert not judged["verified"]
    assert judged["first_divergence"]["new_token"] == 2
    assert judged["first_divergence"]["reference"] == 1


def test_the_metrics_follow_their_definitions():
    tokens = np.zeros((2, 4), np.int64)
    runs = [
        metrics.Generation(ttft_s=0.1, gaps_s=[0.01, 0.02, 0.03], e2e_s=0.16, tokens=tokens),
        metrics.Generation(ttft_s=0.3, gaps_s=[0.01, 0.01, 0.01], e2e_s=0.33, tokens=tokens),
        metrics.Generation(ttft_s=0.2, gaps_s=[0.02, 0.02, 0.02], e2e_s=0.26, tokens=tokens),
    ]
    s = metrics.summary(runs, batch=2, prompt_tokens=8)
    assert s["ttft_s"] == pytest.approx(0.2)
    assert s["e2e_s"] == pytest.approx(0.26)
    assert s["tpot_s"] == pytest.approx(0.02)  # (e2e - TTFT) / (OSL - 1), median
    assert s["output_tokens_per_s"] == pytest.approx(2 * 4 / 0.26)
    assert s["total_tokens_per_s"] == pytest.approx(2 * 12 / 0.26)
    assert s["per_sequence_tokens_per_s"] == pytest.approx(1 / 0.02)
    assert s["itl_max_s"] == pytest.approx(0.03)


class _Counting:
    """A generator whose next token is the count of calls so far: what generate() keeps."""

    def __init__(self):
        self.calls = 0

    def prefill(self, prompt):
        self.calls = 1
        return np.full(prompt.shape[0], 1)

    def decode(self, tokens):
        self.calls += 1
        return tokens + 1


def test_generate_times_the_prefill_and_every_decode_step():
    g = metrics.generate(_Counting(), np.zeros((3, 5), np.int64), 4)
    assert g.tokens.tolist() == [[1, 2, 3, 4]] * 3
    assert len(g.gaps_s) == 3 and g.e2e_s >= g.ttft_s + sum(g.gaps_s) * 0.999


def test_compile_s_holds_first_call_work_outside_the_timed_region(monkeypatch):
    """PyTorch's loop mode compiles its step and captures a CUDA graph of every decode
    step on its first call, before the timed prefill and replay: compile_s (TTFT and the
    first gap) left it out. compile_s is the first call's whole time less its later
    decode steps; the measured generations are timed as before. Played on the CPU by a
    torch eager generator whose first run() takes 0.3 s before its timed region."""
    pytest.importorskip("torch")
    from xfbench.adapters.torch.generation import TorchGenerator
    from xfbench.generation.measure import measure
    from xfbench.harness.presets import PRESETS

    timed = TorchGenerator.run
    calls = []

    def capturing_first(self, *args, **kwargs):
        if not calls:
            time.sleep(0.3)  # the capture: outside TTFT and the gaps
        calls.append(1)
        return timed(self, *args, **kwargs)

    monkeypatch.setattr(TorchGenerator, "run", capturing_first)
    monkeypatch.setattr(
        check,
        "check_apart",
        lambda spec, prompt, tokens, logits, precision: check.check_generation(
            spec, check.decoding_weights(spec), prompt, tokens=tokens, logits=logits
        ),
    )
    cell = GenerationCell(
        network="gpt2", framework="torch", mode="eager", precision="fp32", device="cpu",
        threads=2, batch_size=1, scale="smoke", prompt_tokens=ISL, new_tokens=OSL,
    )  # fmt: skip
    record = measure(_Benchmark(), cell, preset=PRESETS["smoke"], threads_config={})
    assert record["compile_s"] >= 0.3 > record["ttft_s"] + record["tpot_s"], record
    assert record["first_generation_s"] >= record["compile_s"]

    # a generator whose calls the host times: compile_s is its prefill and first step
    class Slow(_Counting):
        def decode(self, tokens):
            time.sleep(0.02)
            return super().decode(tokens)

    first, compile_s, whole_s = metrics.first_generation(Slow(), np.zeros((3, 5), np.int64), 4)
    assert first.ttft_s + first.gaps_s[0] <= compile_s < first.ttft_s + first.gaps_s[0] + 0.02
    assert whole_s >= first.e2e_s >= 0.06


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("128", "prompt/new token pairs"),
        ("128/1", "prompt/new token pairs"),
        ("0/16", "prompt/new token pairs"),
        ("60/10", "70 positions is more than GPT-2's 64 at smoke size"),
    ],
)
def test_bad_lengths_are_one_line(value, message):
    with pytest.raises(UsageError, match=message):
        lengths(value, "smoke")


def test_an_accelerator_decodes_in_bf16_beside_fp32_by_default():
    """Unasked, an accelerator's cells add bf16 in the frameworks that decode in it (half
    the bytes a step reads); the CPU's stay fp32, and --precision is what it says."""
    from xfbench.generation.cell import precisions
    from xfbench.harness.selection import parse

    unasked = parse(framework="torch,jax,tensorflow", device="cpu", threads=1)
    assert precisions(unasked, "torch", "cuda:0") == ("fp32", "bf16")
    assert precisions(unasked, "jax", "tpu:0") == ("fp32", "bf16")
    assert precisions(unasked, "tensorflow", "cuda:0") == ("fp32",)
    assert precisions(unasked, "torch", "cpu") == ("fp32",)
    asked = parse(framework="torch", precision="fp32", device="cpu", threads=1)
    assert precisions(asked, "torch", "cuda:0") == ("fp32",)


def test_lengths_and_batches_default_to_the_scales():
    assert lengths(None, "full") == [(128, 128)] and lengths("256/64,128/128", "full") == [
        (256, 64),
        (128, 128),
    ]
    assert batches(None, "full") == [1, 8] and batches("8,1", "smoke") == [1, 8]
    with pytest.raises(UsageError, match="whole numbers above 0"):
        batches("0", "full")


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "xfbench/suites/test_generation.py", "--preset", "smoke", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_a_network_that_does_not_generate_is_refused_in_one_line():
    proc = _pytest("--model", "alexnet")
    assert proc.returncode == 4, proc.stdout[-2000:]
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert err == [
        "ERROR: --model alexnet: token generation runs gpt2, gpt3_6_7b (a decoder with a "
        "causal language-model head)"
    ]


@pytest.mark.slow  # two frameworks' processes, a report
def test_xfbench_run_generates_records_and_reports(tmp_path):
    folder = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "xfbench.harness.cli", "run", "--suite", "generation",
         "--preset", "smoke", "--framework", "onnxruntime,jax", "--batch-size", "1",
         "--results", str(folder), "--skip-roofs"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    import json

    merged = json.loads((folder / "merged.json").read_text())
    found = [b["extra_info"] for b in merged["benchmarks"]]
    assert {r["framework"] for r in found} == {"onnxruntime", "jax"}
    assert all(r["kind"] == "generation" and r["ttft_s"] > 0 and r["tpot_s"] > 0 for r in found)
    assert all(r["token_check"]["verified"] for r in found)
    report = (folder / "report.md").read_text()
    assert "## Token generation" in report and "Token generation, GPT-2, 16/16 tokens" in report
    assert (folder / "report-generation.csv").is_file()


def test_the_scores_count_generated_tokens_at_the_same_lengths():
    """Generation is a workload of the machine score ("generate"): a sample is one
    sequence, its rounds the timed generations; different lengths are not compared."""
    from xfbench.report.load import Run
    from xfbench.report.score import compare

    def record(e2e, osl=128):
        return {
            "kind": "generation", "network": "gpt2", "framework": "onnxruntime",
            "mode": "cpu", "precision": "fp32", "device": "cpu", "threads": 2,
            "scale": "full", "batch_size": 8, "prompt_tokens": 128, "new_tokens": osl,
            "status": "ok", "e2e_s": e2e,
            "timed_rounds_s": [e2e * f for f in (0.98, 1.0, 1.01, 0.99, 1.02, 1.0)],
        }  # fmt: skip

    fast = Run(
        name="fast", path="", machine={}, records={"generation": [record(2.0), record(1.0, 64)]}
    )
    slow = Run(
        name="slow", path="", machine={}, records={"generation": [record(3.0), record(5.0, 32)]}
    )
    s = compare(fast, slow, "machine")
    assert s.workloads == 1 and s.value == pytest.approx(1.5)
    assert "gpt2 generate" in s.winners[0].workload and "128/128 tokens" in s.winners[0].workload
    assert s.min_rounds == 6 and s.unrounded == 0


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_gpu_generation_cell_records_its_peak_device_memory(smoke):
    """Every generation cell on the H100 recorded peak_device_bytes None: the generators
    kept the base's. PyTorch's and TensorFlow's read their allocator's peak since the
    cell's reset; JAX's, XLA's buffer assignment of its two steps (the device's own counter
    cannot be reset), checked here on the CPU's compilation as a GPU's would be."""
    from types import SimpleNamespace

    from xfbench.adapters.base import Generator
    from xfbench.adapters.jax.generation import JaxGenerator
    from xfbench.adapters.tensorflow.generation import TensorFlowGenerator
    from xfbench.adapters.torch.generation import TorchGenerator

    for own in (TorchGenerator, JaxGenerator, TensorFlowGenerator):
        assert own.peak_device_memory is not Generator.peak_device_memory, own
        assert own.reset_peak_memory is not Generator.reset_peak_memory or own is JaxGenerator
    spec, weights, prompt = smoke
    generator = _generator("jax", "jit", spec, weights)
    try:
        metrics.generate(generator, prompt, OSL)
        assert generator.peak_device_memory() is None  # on the host: the process's RSS
        on_gpu = SimpleNamespace(**{**vars(generator), "device": SimpleNamespace(platform="gpu")})
        peak = JaxGenerator.peak_device_memory(on_gpu)
    finally:
        generator.close()
    weights_bytes = 4 * spec.param_count
    assert (
        weights_bytes + generator.cache_bytes <= peak < 3 * (weights_bytes + generator.cache_bytes)
    )


# JAX's among command 2's slowest on a 2-core Zen 3: CI runs it
@pytest.mark.parametrize(
    ("framework", "mode"), [("torch", "eager"), pytest.param("jax", "loop", marks=pytest.mark.slow)]
)
def test_the_host_reads_a_generations_tokens_once(framework, mode, smoke, monkeypatch):
    """The decode loop without the host in it: each step's token stays on the device as
    the next step's input, and the host reads the tokens once a generation (the kept rows'
    logits once more), where it had read every step's. The same tokens as step by step."""
    spec, weights, prompt = smoke
    generator = _generator(framework, mode, spec, weights)
    reads = []
    if framework == "torch":
        import torch

        real = torch.Tensor.numpy
        monkeypatch.setattr(torch.Tensor, "numpy", lambda t, *a, **k: reads.append(1) or real(t))
    else:
        import jax

        real = jax.device_get
        monkeypatch.setattr(jax, "device_get", lambda x: reads.append(1) or real(x))
    try:
        stepwise = metrics.generate(generator, prompt, OSL, keep_logits=True)  # step by step
        reads.clear()
        run = metrics.generate(generator, prompt, OSL)
        assert len(reads) == 1, reads
        assert np.array_equal(run.tokens, stepwise.tokens)
        assert len(run.gaps_s) == OSL - 1 and min(run.gaps_s) > 0 and run.ttft_s > 0
        reads.clear()
        kept = metrics.generate(generator, prompt, OSL, keep_logits=[0, BATCH - 1])
        assert len(reads) == (2 if framework == "torch" else 1), reads
        assert kept.logits.shape == (2, OSL, spec.vocab)
        assert rel_err(kept.logits, stepwise.logits[[0, BATCH - 1]]) <= TOL
    finally:
        generator.close()


def test_a_graphed_decode_never_reads_an_output_its_next_call_overwrote(smoke):
    """Both cudagraph cells failed on the H100: in inference, CUDA graph trees overwrite a
    graphed call's outputs at the next call, and the resident loop fed the last step's
    token (a graph's output) back as the next step's input. The token now never leaves the
    device's buffers; the logits are outputs. Emulated on the CPU: each call of prefill
    or the step first overwrites every tensor an earlier call returned; the tokens and the
    logits must still be the step-by-step ones."""

    spec, weights, prompt = smoke
    generator = _generator("torch", "eager", spec, weights)
    stepwise = metrics.generate(generator, prompt, OSL, keep_logits=True)
    returned = []

    def graphed(step):
        def call(*args):
            for old in returned:  # what CUDA graph trees do to a replayed graph's outputs
                old.fill_(float("nan"))
            out = step(*args)
            returned.append(out)
            return out

        return call

    generator.graphs = True
    generator._prefill, generator._step = graphed(generator._prefill), graphed(generator._step)
    try:
        run = metrics.generate(generator, prompt, OSL, keep_logits=[0, BATCH - 1])
        last = generator.logits()
        generator.decode(run.tokens[:, -1])  # one more call: the kept logits stay ours
    finally:
        generator.close()
    assert returned and np.array_equal(run.tokens, stepwise.tokens)
    assert rel_err(run.logits, stepwise.logits[[0, BATCH - 1]]) <= TOL
    assert np.isfinite(last).all()


def test_a_gpus_decode_step_profile_counts_and_times_its_kernels():
    """A cudagraph decode step took 0.878 ms on an H100 for 129 kernels with its launches
    replayed: what holds it is read from the profiler's CUDA events (their count, their
    device time, the costliest by name), here from stand-in events and a CPU profile."""
    from types import SimpleNamespace

    torch = pytest.importorskip("torch")
    from xfbench.adapters.torch.generation import kernel_profile

    def event(device, name, us):
        span = SimpleNamespace(elapsed_us=lambda: us)
        return SimpleNamespace(device_type=f"DeviceType.{device}", name=name, time_range=span)

    events = [event("CPU", "aten::mm", 50.0), event("CUDA", "gemv", 6.0)]
    events += [event("CUDA", "softmax", 2.0), event("CUDA", "gemv", 4.0)]
    assert kernel_profile(events) == {
        "kernels_per_decode_step": 3,
        "decode_step_kernel_us": 12.0,
        "decode_step_kernels": [
            {"name": "gemv", "calls": 2, "us": 10.0},
            {"name": "softmax", "calls": 1, "us": 2.0},
        ],
    }
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(64, 64) @ torch.ones(64, 64)
    assert all(e.time_range.elapsed_us() >= 0 for e in prof.events())  # the field it reads
    assert kernel_profile(prof.events())["kernels_per_decode_step"] == 0  # no CUDA here


def test_the_decode_roofline_holds_each_precision_to_its_own_bytes(tmp_path):
    """A bf16 cell read against fp32's bytes would claim twice its share of the bound: each
    precision has its own decode roofline, at its bytes a value and its peak."""
    import copy
    import json
    import shutil

    from xfbench.generation.report import roofline_tables
    from xfbench.report.load import load
    from xfbench.report.model import build

    h100 = ROOT / "xfbench" / "report" / "references" / "2026-11-27-h100-sxm" / "first-part-2"
    folder = tmp_path / "run"
    shutil.copytree(h100, folder)
    doc = json.loads((folder / "merged.json").read_text())
    [fp32] = [b for b in doc["benchmarks"] if b["extra_info"].get("kind") == "generation"]
    bf16 = copy.deepcopy(fp32)
    bf16["name"] = fp32["name"].replace("fp32", "bf16")
    bf16["extra_info"]["precision"] = "bf16"
    doc["benchmarks"].append(bf16)
    (folder / "merged.json").write_text(json.dumps(doc))
    tables = {t.title.split(", cuda:0")[0]: t for t in roofline_tables(build([load(folder)]))}
    full, half = (
        tables["Decode roofline, GPT-2, 128/128 tokens"],
        tables["Decode roofline, GPT-2, 128/128 tokens, bf16"],
    )
    megabytes = [float(t.rows[0][2].text) for t in (full, half)]
    assert megabytes[1] == pytest.approx(megabytes[0] / 2, rel=1e-3)
    shares = [float(t.rows[0][8].text.rstrip("%")) for t in (full, half)]
    assert shares[1] == pytest.approx(shares[0] / 2, abs=1)  # the same speed, half the bytes
    assert "(bf16)" in half.caption and "779.6 TFLOP/s" in half.caption  # bf16's peak there


@pytest.mark.parametrize(("products", "attention"), [("mm+bias", "math"), ("linear", "math")])
def test_the_step_as_written_for_inductor_on_a_gpu_decodes_the_same(products, attention, smoke):
    """A GPU's compiled step writes its products as mm plus a bias and its decode
    attention out (q k^T, mask, softmax, v) for Inductor to fuse: the same function as the
    CPU's addmm and SDPA, checked here on the CPU against them in fp32."""
    spec, weights, prompt = smoke
    generator = _generator("torch", "eager", spec, weights)
    try:
        usual = metrics.generate(generator, prompt, OSL, keep_logits=[0, BATCH - 1])
        generator.model.products, generator.model.attention = products, attention
        fused = metrics.generate(generator, prompt, OSL, keep_logits=[0, BATCH - 1])
    finally:
        generator.close()
    assert np.array_equal(fused.tokens, usual.tokens)
    assert rel_err(fused.logits, usual.logits) <= TOL


def test_a_compiled_cells_inductor_settings_end_with_it(smoke):
    """Inductor's config (freezing, the C++ wrapper, prepacked weights, coordinate-descent
    tuning) is the process's: a compiled cell's settings held for every later cell. They
    hold while its generators live and are set back when the last one closes (token
    serving closes its buckets' in the order built). Built and closed only: the steps
    compile at their first call."""
    import torch._inductor.config as inductor

    from xfbench.adapters.torch.generation import _inductor_settings

    spec, weights, _ = smoke
    wanted = _inductor_settings("cpu")
    before = {key: not value for key, value in wanted.items()}  # each the other way
    with inductor.patch(before):  # and back after the test, whatever it finds
        first = _generator("torch", "compile", spec, weights)
        second = _generator("torch", "compile", spec, weights)
        held = {key: getattr(inductor, key) for key in wanted}
        first.close()
        still = {key: getattr(inductor, key) for key in wanted}
        second.close()
        after = {key: getattr(inductor, key) for key in wanted}
    assert held == still == wanted and after == before, (held, still, after)


def test_the_written_out_attention_sums_bf16_scores_in_float32():
    """A bf16 product rounds its output to bf16: q k^T of 257 became 256 before the
    float32 softmax (weights 0.20/0.80 where the function gives 0.33/0.67). The scores
    are summed in float32 from the bf16 inputs, as JAX's (preferred_element_type):
    within bf16's rounding of the probabilities of the float64 function of the same
    inputs."""
    import torch

    from xfbench.adapters.torch.generation import CachedGPT

    bf16 = torch.bfloat16
    q = torch.tensor([[[[1.0, 1.0]]]], dtype=bf16)  # (B, heads, 1, dh = 2)
    k = torch.tensor([[[[256.0, 1.0], [256.0, 2.0]]]], dtype=bf16)  # scores 257 and 258
    v = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]]], dtype=bf16)  # out: the probabilities
    seen = torch.ones((1, 1, 1, 2), dtype=torch.bool)
    got = CachedGPT._attend(SimpleNamespace(attention="math", dh=2), q, k, v, seen=seen)
    q64, k64, v64 = (t.double() for t in (q, k, v))
    want = torch.softmax(q64 @ k64.transpose(-2, -1) * 2**-0.5, dim=-1) @ v64
    assert (got.double() - want).abs().max() <= 2**-8, (got, want)


def test_the_loop_mode_replays_every_decode_step_as_one_graph_and_times_each(smoke, monkeypatch):
    """The loop mode (CUDA only) captures a generation's decode steps as one CUDA graph,
    each step's end an event inside it. Its logic on the CPU, CUDA's calls played by
    stand-ins: capture runs the steps once, each replay runs them again on the buffers
    the prefill left; the tokens and kept logits are the step-by-step ones, every step is
    timed, and the record proves a graph replayed."""
    import time

    import torch

    from xfbench.adapters.torch import generation as tg

    class Event:
        def __init__(self, **_):
            self.at = None

        def record(self, *_):
            self.at = time.perf_counter()

        def elapsed_time(self, other):
            return (other.at - self.at) * 1000

    class Graph:
        replays = 0

        def replay(self):
            Graph.replays += 1

    def capture(body):
        # a capture launches nothing: played by running the steps from where a prefill
        # leaves the buffers, whose state the replays never depend on
        generator.model.position.fill_(ISL)
        out = body()
        graph = Graph()

        def replay():
            graph.replay()
            out.copy_(body())

        return replay, out

    class Stream:
        def __init__(self, *_):
            pass

        def wait_stream(self, _):
            pass

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: __import__("contextlib").nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *_: Stream())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *_: None)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(tg, "capture_graph", capture)
    spec, weights, prompt = smoke
    generator = _generator("torch", "eager", spec, weights)
    try:
        stepwise = metrics.generate(generator, prompt, OSL, keep_logits=True)
        generator.loop = True
        runs = [metrics.generate(generator, prompt, OSL) for _ in range(2)]
        kept = metrics.generate(generator, prompt, OSL, keep_logits=[0, BATCH - 1])
        facts = generator.replay_facts(lambda: metrics.generate(generator, prompt, OSL))
    finally:
        generator.close()
    for run in [*runs, kept]:
        assert np.array_equal(run.tokens, stepwise.tokens)
        assert len(run.gaps_s) == OSL - 1 and min(run.gaps_s) > 0 and run.ttft_s > 0
    assert rel_err(kept.logits, stepwise.logits[[0, BATCH - 1]]) <= TOL
    assert facts == {"cudagraph_skips": 0, "cudagraph_replays": 1}
    assert Graph.replays == 4


def test_a_decode_steps_time_is_split_into_kernels_and_gaps_or_says_why_not():
    from xfbench.generation.measure import kernel_split

    gpu = SimpleNamespace(device="cuda:0", framework="torch", mode="cudagraph")
    split = kernel_split({"decode_step_kernel_us": 600.0}, 0.8e-3, gpu)
    assert split["decode_step_kernel_share"] == pytest.approx(0.75)
    assert split["decode_step_gap_us"] == pytest.approx(200.0)
    assert split["decode_profile_reason"] is None
    cpu = SimpleNamespace(device="cpu", framework="torch", mode="eager")
    none = kernel_split({"decode_step_kernel_us": None}, 0.8e-3, cpu)
    assert none["decode_step_kernel_share"] is None and none["decode_step_gap_us"] is None
    assert "CPU" in none["decode_profile_reason"]
    jax = SimpleNamespace(device="cuda:0", framework="jax", mode="loop")
    assert "not profiled" in kernel_split({}, 0.8e-3, jax)["decode_profile_reason"]


def test_kernels_that_outlast_tpot_give_no_gap_and_a_flagged_share(tmp_path):
    """The profiled step (another run, under the profiler) can take longer than the
    timed TPOT: 900 us of kernels against a TPOT of 675 us is no gap of -225 us. The
    record keeps the share (1.33) with no gap and a note; the report flags the share."""
    import json
    import shutil

    from xfbench.generation.measure import kernel_split
    from xfbench.generation.report import roofline_tables
    from xfbench.report.load import load
    from xfbench.report.model import build

    gpu = SimpleNamespace(device="cuda:0", framework="torch", mode="loop")
    split = kernel_split({"decode_step_kernel_us": 900.0}, 675e-6, gpu)
    assert split["decode_step_kernel_share"] == pytest.approx(900 / 675)
    assert split["decode_step_gap_us"] is None and split["decode_profile_reason"] is None
    assert "outlast TPOT" in split["decode_step_split_note"]
    assert kernel_split({"decode_step_kernel_us": 600.0}, 0.8e-3, gpu)[
        "decode_step_split_note"
    ] is None  # fmt: skip
    h100 = ROOT / "xfbench" / "report" / "references" / "2026-11-27-h100-sxm" / "first-part-2"
    folder = tmp_path / "run"
    shutil.copytree(h100, folder)
    doc = json.loads((folder / "merged.json").read_text())
    [cell] = [b for b in doc["benchmarks"] if b["extra_info"].get("kind") == "generation"]
    planted = {"decode_step_kernel_us": 900.0, "kernels_per_decode_step": 129}
    info = cell["extra_info"]
    info.update(planted, **kernel_split(planted, 675e-6, gpu), tpot_s=675e-6)
    (folder / "merged.json").write_text(json.dumps(doc))
    [table] = roofline_tables(build([load(folder)]))
    assert [c.text for c in table.rows[0][-2:]] == ["129", "133% (kernels outlast TPOT: no split)"]


def test_jaxs_decode_kernels_are_counted_from_its_compiled_step_on_a_gpu(smoke):
    """JAX has no kernel profile here: on a GPU its decode step's kernels are counted from
    the compiled program's entry (fusions, library calls, copies), the times null with the
    reason. The count, played on the CPU's compiled step; the CPU itself gives nulls."""
    from xfbench.adapters.jax.generation import JaxGenerator, entry_kernels

    sample = """HloModule m

%fused_computation (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  ROOT %e = f32[2]{0} exponential(%p)
}

ENTRY %main (a: f32[2], b: f32[2,2]) -> (f32[2], f32[2]) {
  %a = f32[2]{0} parameter(0)
  %b = f32[2,2]{1,0} parameter(1)
  %f = f32[2]{0} fusion(%a), kind=kLoop, calls=%fused_computation
  %g = f32[2]{0} custom-call(%b, %f), custom_call_target="__cublas$gemm"
  %c = f32[2]{0} copy(%g)
  %bc = f32[2]{0} bitcast(%c)
  ROOT %t = (f32[2]{0}, f32[2]{0}) tuple(%f, %bc)
}
"""
    assert entry_kernels(sample) == 3
    spec, weights, prompt = smoke
    generator = _generator("jax", "jit", spec, weights)
    try:
        run = metrics.generate(generator, prompt, OSL)
        assert generator.decode_profile(run.tokens[:, -1]) == dict.fromkeys(
            ("kernels_per_decode_step", "decode_step_kernel_us", "decode_step_kernels")
        )
        generator.position = ISL  # a step the cache holds
        on_gpu = SimpleNamespace(**{**vars(generator), "device": SimpleNamespace(platform="gpu")})
        profile = JaxGenerator.decode_profile(on_gpu, run.tokens[:, -1])
    finally:
        generator.close()
    assert profile["kernels_per_decode_step"] > 10 and profile["decode_step_kernel_us"] is None
    assert "counted from its compiled program" in profile["decode_profile_reason"]
