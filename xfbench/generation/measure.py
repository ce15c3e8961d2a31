"""One generation cell: build the decoder, decode once (compilation, timed apart), prove
the tokens (check.py), warm up, time whole generations, record.

pytest-benchmark's round is one whole generation (prefill and OSL - 1 decode steps), so
its statistics are the end-to-end latency's; inside each, metrics.generate times the
prefill (TTFT) and every decode step (the gaps). Every call returns only once the
device has finished: each hands back its tokens on the host.

Weights: the canonical initial weights brought to trained activation ranges
(harness/equivalence.trained_range), so that decoding chooses among logits that differ
as a trained network's do and a wrong cache position changes the tokens; speed does not
depend on the values. Prompt: token ids drawn from the seed, as every synthetic batch.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from xfbench import environment, machine, records
from xfbench.adapters import get_adapter
from xfbench.adapters.base import VALUE_BYTES, Generator
from xfbench.errors import CannotRun
from xfbench.generation.cell import KIND, GenerationCell, held_precisions, timed_version
from xfbench.generation.check import (
    check_kept,
    check_on_device,
    checked_sequences,
    decoding_weights,
    verdict,
)
from xfbench.generation.metrics import first_generation, generate, summary
from xfbench.harness.energy import EnergyMeter
from xfbench.harness.equivalence import TRAINED_GELU_STD, TRAINED_SCORE_STD
from xfbench.harness.memory import TooLarge, host_available_bytes, peak_rss_bytes, reset_peak_rss
from xfbench.harness.presets import Preset
from xfbench.harness.threads import CpuMeter, allowed_cpus, contention_fields
from xfbench.models import DECODERS, Spec, get_spec, seeded
from xfbench.models import layers as L

WEIGHTS = (
    f"seed 0 at trained range (GELU inputs std {TRAINED_GELU_STD}, attention scores "
    f"std {TRAINED_SCORE_STD})"
)


def prompt_ids(spec: Spec, batch: int, tokens: int, seed: int = 0) -> np.ndarray:
    """The prompt every framework decodes from: token ids uniform over the vocabulary."""
    rng = np.random.default_rng([seed, 4])
    return rng.integers(0, spec.vocab, size=(batch, tokens), dtype=np.int64)


def decode_bytes(spec: Spec, cell: GenerationCell, cache_bytes: int) -> int:
    """Bytes one decode step must read at least: every weight once (the tied embedding
    once) and the whole static cache (each step attends over all of it, masked)."""
    return VALUE_BYTES[cell.precision] * spec.param_count + cache_bytes


def cell_weights(spec: Spec, cell: GenerationCell, adapter):
    """What the generator is given: a decoder's weights to make on its device where its
    framework makes them (seeded.Made), else the host's (decoding_weights)."""
    if spec.id in DECODERS and adapter.makes_weights:
        return seeded.Made()
    return decoding_weights(spec, cell.precision)


def needed_bytes(spec: Spec, cell: GenerationCell, adapter) -> tuple[int, str]:
    """A lower bound on the memory a cell takes on its device: the weights at the cell's
    precision and the key/value cache; where the weights come from the host, their float32
    copy there too (on the CPU the same memory); where they are made on the device, at
    full size, the check's float32 copy of a half-precision network (check_on_device)."""
    blocks = spec.layer(L.TransformerBlock)
    d = spec.layer(L.TokenEmbedding)[0].dim
    positions = cell.prompt_tokens + cell.new_tokens
    value = VALUE_BYTES[cell.precision]
    weights = value * spec.param_count
    cache = 2 * len(blocks) * cell.batch_size * positions * d * value
    gib = 2**30
    what = f"weights {weights / gib:.2f} GiB, cache {cache / gib:.2f} GiB"
    made = spec.id in DECODERS and adapter.makes_weights
    extra = 0
    if made and cell.scale == "full" and value < 4:
        extra = 4 * spec.param_count
        what += f", the check's float32 copy {extra / gib:.2f} GiB"
    elif not made and cell.device == "cpu":
        extra = 4 * spec.param_count
        what += f", the host's float32 weights {extra / gib:.2f} GiB"
    return weights + cache + extra, what


def check_fits(spec: Spec, cell: GenerationCell, adapter) -> None:
    """memory.TooLarge, one line, before anything is allocated, where the cell cannot fit
    on its device (the host's available memory for the CPU, NVML's free memory for a GPU):
    a full-size decoder on a small machine is refused, not killed for memory."""
    need, parts = needed_bytes(spec, cell, adapter)
    if cell.device == "cpu":
        have, where = host_available_bytes(), "host memory available"
    else:
        have, where = machine.gpu_free_bytes(cell.device), f"free on {cell.device}"
        if have is None:
            return  # no NVML reading: the framework's own error will say
    if need > have:
        raise TooLarge(
            f"{spec.id} at batch {cell.batch_size}, {cell.precision}, does not fit: it needs "
            f"at least {need / 2**30:.2f} GiB ({parts}), {have / 2**30:.2f} GiB {where}"
        )


def runnable(cell: GenerationCell):
    """The cell's adapter, or CannotRun with the reason it cannot run here."""
    adapter = get_adapter(cell.framework)
    # a mode of generation only (PyTorch's loop) is asked about by its own name too: its
    # inference stand-in (as_infer) may run where it does not (the CPU)
    reason = (
        adapter.import_error()
        or adapter.mode_reason(cell.mode, cell.device)
        or adapter.check(cell.as_infer())
    )
    held = held_precisions(cell.framework)
    if not reason and cell.precision not in held:
        reason = f"{cell.framework} decodes in {' and '.join(held)} only (--precision)"
    if (
        not reason
        and cell.network in DECODERS
        and cell.scale == "full"
        and not adapter.makes_weights
    ):
        reason = (
            f"{cell.framework} takes its weights from the host: {cell.network} at full size "
            "is made on the device, by the frameworks that make it there (PyTorch, JAX)"
        )
    if reason:
        raise CannotRun(reason)
    return adapter


def measure(benchmark, cell: GenerationCell, *, preset: Preset, threads_config: dict) -> dict:
    """Run one cell under pytest-benchmark; the record stored in extra_info: the first
    generation compiles, then the preset's warm-up and timed generations, then one more,
    its logits kept, is checked (check.py): a cell that fails the check gives no number.
    Raises
    CannotRun (skip) with the reason, check.TokensDiverged (a failed cell) in one line."""
    adapter = runnable(cell)
    spec = get_spec(cell.network, cell.scale)
    check_fits(spec, cell, adapter)
    weights = cell_weights(spec, cell, adapter)
    prompt = prompt_ids(spec, cell.batch_size, cell.prompt_tokens)
    own_peak = reset_peak_rss()
    t0 = time.perf_counter()
    generator = adapter.generator(spec, cell, weights)
    build_s = time.perf_counter() - t0
    try:
        generator.reset_peak_memory()
        # compiles prefill and decode (the loop mode: and captures its graph)
        first, compile_s, first_s = first_generation(generator, prompt, cell.new_tokens)
        compiled = generator.compile_facts()
        if environment.SLOWDOWN.read():  # benchmarks/verdicts.py's planted slowdown: each
            generator.resident = False  # step called, and slowed, from the host
            for name in ("prefill", "decode"):
                setattr(
                    generator, name, environment.slowed(cell.framework, getattr(generator, name))
                )
        for _ in range(preset.warmup):
            generate(generator, prompt, cell.new_tokens)
        runs = []
        rounds = preset.min_rounds
        with CpuMeter() as meter, EnergyMeter(cell.device) as energy:
            benchmark.pedantic(
                lambda: runs.append(generate(generator, prompt, cell.new_tokens)),
                rounds=rounds,
                iterations=1,
                warmup_rounds=0,
            )
        # read before the check, whose float64 reference holds several times the network
        memory = _memory(spec, cell, generator, own_peak)
        # untimed: raises where the mode's claim does not hold (graphs that never replayed)
        compiled.update(
            generator.replay_facts(lambda: generate(generator, prompt, cell.new_tokens))
        )
        compiled.update(_loop_facts(generator, first.tokens[:, -1]))
        t0 = time.perf_counter()
        rows = checked_sequences(cell.batch_size)
        checked = generate(generator, prompt, cell.new_tokens, keep_logits=rows)
        if isinstance(weights, seeded.Made) and cell.scale == "full":
            tokens = check_on_device(
                spec, generator, prompt, checked, rows=rows, precision=cell.precision
            )
        else:
            tokens = check_kept(spec, prompt, checked, rows, precision=cell.precision)
        check_s = time.perf_counter() - t0
        if not tokens["verified"]:
            benchmark.has_error = True  # no entry in the JSON: a failed cell, not a number
        verdict(tokens)
        timing = summary(runs, cell.batch_size, cell.prompt_tokens)
        record = {
            **records.header(KIND),
            **cell.as_dict(),
            "preset": preset.name,
            "status": "ok",
            "timed_version": timed_version(cell.as_dict()),
            **timing,
            "generations": rounds,
            "warmup_generations": preset.warmup,
            "repeat_identical": all(
                np.array_equal(r.tokens, first.tokens) for r in [*runs, checked]
            ),
            "token_check": tokens,
            "check_s": check_s,
            "weights": WEIGHTS
            + (
                ", hashed uniform values made on the device (models/seeded.py)"
                if isinstance(weights, seeded.Made)
                else ", models/seeded.py's"
                if spec.id in DECODERS
                else ""
            ),
            "build_s": build_s,
            "compile_s": compile_s,
            "first_generation_s": first_s,
            **compiled,
            **kernel_split(compiled, timing["tpot_s"], cell),
            **memory,
            **machine_fields(cell, meter, threads_config, adapter),
            **_energy(energy, rounds, cell),
        }
        record.update(generator.info)
        benchmark.extra_info.update(record)
        return record
    finally:
        generator.close()


def _loop_facts(generator, tokens) -> dict:
    """How the decode loop ran: the host in it (each step's tokens read back) or out of it
    (read once a generation, each step timed on the device's clock); one decode step's
    kernels on a GPU, by the profiler (untimed)."""
    resident = type(generator).run is not Generator.run and getattr(generator, "resident", True)
    return {
        "decode_loop": "on the device, host reads once a generation"
        if resident
        else "from the host, tokens read back every step",
        **generator.decode_profile(tokens),
    }


def kernel_split(profile: dict, tpot_s: float, cell: GenerationCell) -> dict:
    """A decode step's time split: what its kernels took on the device (the profile of one
    step) against TPOT, the rest being the gaps between them (launches, the host, waits).
    None each, with the reason, where no profile was read; kernels that outlast TPOT give
    their share (above 1) and no gap, with the note saying why."""
    kernel_us = profile.get("decode_step_kernel_us")
    if kernel_us is None or not tpot_s:
        reason = profile.get("decode_profile_reason") or (
            "the CPU runs a step itself: no device kernels to time"
            if cell.device == "cpu"
            else f"{cell.framework} {cell.mode}: its decode kernels are not profiled"
        )
        return {
            "decode_step_kernel_share": None,
            "decode_step_gap_us": None,
            "decode_step_split_note": None,
            "decode_profile_reason": reason,
        }
    step_us = tpot_s * 1e6
    # the profiled step is another run than TPOT's, under the profiler: where its kernels
    # outlast TPOT, their difference is no gap
    outlast = kernel_us > step_us
    return {
        "decode_step_kernel_share": kernel_us / step_us,
        "decode_step_gap_us": None if outlast else step_us - kernel_us,
        "decode_step_split_note": (
            f"the profiled step's kernels ({kernel_us:.1f} us) outlast TPOT ({step_us:.1f} "
            "us), timed in other runs: no gap between kernels to write"
            if outlast
            else None
        ),
        "decode_profile_reason": None,
    }


def _memory(spec: Spec, cell: GenerationCell, generator, own_peak: bool) -> dict:
    device_peak = generator.peak_device_memory()
    host_peak = peak_rss_bytes()
    peak = device_peak if device_peak else host_peak
    return {
        "param_count": spec.param_count,
        "weights_bytes": VALUE_BYTES[cell.precision] * spec.param_count,
        "cache_bytes": generator.cache_bytes,
        "cache_share_of_peak": generator.cache_bytes / peak if peak else None,
        "decode_bytes_per_step": decode_bytes(spec, cell, generator.cache_bytes),
        "layers": len(spec.layer(L.TransformerBlock)),
        "peak_host_rss_bytes": host_peak,
        "peak_host_rss_scope": "cell" if own_peak else "process",
        "peak_device_bytes": device_peak,
    }


def machine_fields(cell: GenerationCell, meter: CpuMeter, threads_config: dict[str, Any], adapter):
    """What ran it: threads asked and used, the thread settings, versions, the CPU."""
    return {
        "threads_requested": cell.threads,
        "threads_used": round(meter.threads_used, 2),
        **contention_fields(meter, cell.threads, on_cpu=cell.device == "cpu"),
        "threads_config": {"cpus_allowed": len(allowed_cpus()), **threads_config},
        "versions": adapter.versions(),
        "cpu_model": machine.cpu_model(),
        "cpu_isa": machine.cpu()["isa"],
    }


def _energy(energy: EnergyMeter, rounds: int, cell: GenerationCell) -> dict:
    """The energy of the timed generations, per generation and per output token."""
    out = energy.fields(rounds, cell.batch_size * cell.new_tokens)
    return {
        "energy_method": out["energy_method"],
        "energy_reason": out["energy_reason"],
        "energy_j": out["energy_j"],
        "energy_per_generation_j": out["energy_per_step_j"],
        "joules_per_token": out["joules_per_sample"],
        "energy_domains": out["energy_domains"],
    }
