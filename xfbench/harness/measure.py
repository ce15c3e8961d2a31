"""One measurement: build, compile (timed apart), warm up, time, record.

The timed call is the workload's step, which returns only once the device has
finished; pytest-benchmark's pedantic mode times each call separately, so the
median of the rounds is the seconds per mini-batch quoted everywhere.
"""

from __future__ import annotations

import math
import time
from typing import Any

from xfbench import machine, records
from xfbench.adapters import Cell, Unsupported, get_adapter
from xfbench.harness import memory, stats
from xfbench.harness.energy import EnergyMeter
from xfbench.harness.memory import peak_rss_bytes, reset_peak_rss
from xfbench.harness.presets import Preset
from xfbench.harness.threads import CpuMeter, allowed_cpus, contention_fields
from xfbench.models import Spec, get_spec, initial_weights

# Where a cell's initial weights come from: drawn from the seed in memory, or read
# back from the canonical ONNX file (written to the cache first when missing).
# Both give the same numbers; the ONNX route proves the exchange file is what ran.
WEIGHT_SOURCES = ("seed", "onnx")


class Skip(Exception):
    """The cell cannot run here; the message says why."""


def initial(spec: Spec, seed: int = 0, source: str = "seed"):
    """The canonical initial weights of spec, from the seed or from its ONNX file."""
    if source == "onnx":
        from xfbench.exchange import canonical_weights

        return canonical_weights(spec, seed)
    if source != "seed":
        raise ValueError(f"unknown weight source {source!r}; valid: {', '.join(WEIGHT_SOURCES)}")
    return initial_weights(spec, seed)


def build(cell: Cell, seed: int = 0, weights: str = "seed"):
    """The adapter, spec and built workload of a cell; raises Skip with the reason."""
    adapter = get_adapter(cell.framework)
    reason = adapter.import_error() or adapter.check(cell)
    if reason:
        raise Skip(reason)
    spec = get_spec(cell.network, cell.scale)
    memory.check_fits(spec, cell.task, cell.batch_size, cell.precision, cell.device)
    try:
        workload = adapter.build(spec, cell, initial(spec, seed, weights))
    except Unsupported as e:
        raise Skip(str(e)) from e
    return adapter, spec, workload


def measure(
    benchmark,
    cell: Cell,
    preset: Preset,
    threads_config: dict[str, Any],
    weights: str = "seed",
    ci_target: float | None = None,
) -> dict:
    """Run one cell under pytest-benchmark and return the record stored in extra_info."""
    own_peak = reset_peak_rss()
    t0 = time.perf_counter()
    adapter, spec, work = build(cell, weights=weights)
    build_s = time.perf_counter() - t0
    try:
        work.reset_peak_memory()
        t0 = time.perf_counter()
        work.prepare()
        work.step()
        compile_s = time.perf_counter() - t0
        compiled = work.compile_facts()  # raises when a compiled mode fell back

        pilot = []  # each warm-up step's time: the spread that sizes adaptive rounds
        for _ in range(preset.warmup):
            t0 = time.perf_counter()
            work.step()
            pilot.append(time.perf_counter() - t0)
        warm_step = sum(pilot) / len(pilot) if pilot else compile_s
        rounds, chosen_by = preset.rounds(warm_step, pilot, ci_target)

        with CpuMeter() as meter, EnergyMeter(cell.device) as energy:
            benchmark.pedantic(work.step, rounds=rounds, iterations=1, warmup_rounds=0)
        record = _record(
            benchmark,
            cell,
            spec,
            work,
            adapter,
            preset,
            rounds,
            build_s,
            compile_s,
            meter,
            threads_config,
            own_peak,
        )
        record["weights_source"] = weights
        record.update(energy.fields(rounds, cell.batch_size))
        record.update(compiled)
        record.update(_confidence(benchmark, ci_target, chosen_by))
        benchmark.extra_info.update(record)
        return record
    finally:
        work.close()


def _confidence(benchmark, target: float | None, chosen_by: str) -> dict:
    """The median's confidence interval from the timed rounds (harness.stats), and how
    the number of rounds was chosen."""
    data = benchmark.stats.stats.data if benchmark.stats else []
    if not data:
        return {}
    low, high, coverage = stats.median_ci(data)
    width = stats.half_width(data)
    target = target or stats.TARGET
    return {
        "ci_low_s": low,
        "ci_high_s": high,
        "ci_level": round(coverage, 4),
        "ci_method": stats.METHOD,
        "ci_half_width": width,
        "ci_target": target,
        "ci_target_met": width <= target,
        "rounds_chosen_by": chosen_by,
    }


def _record(
    benchmark,
    cell,
    spec: Spec,
    work,
    adapter,
    preset,
    rounds,
    build_s,
    compile_s,
    meter: CpuMeter,
    threads_config,
    own_peak,
) -> dict:
    stats = benchmark.stats.stats if benchmark.stats else None
    median = stats.median if stats else meter.wall / rounds
    flops = spec.flops(cell.task, cell.batch_size)
    device_peak = work.peak_device_memory()
    record = {
        **records.header(cell.task),
        **cell.as_dict(),
        "preset": preset.name,
        "status": "ok",
        "seconds_per_batch": median,
        "samples_per_s": cell.batch_size / median if median > 0 else math.nan,
        "flops_per_step": flops,
        "achieved_tflops": flops / median / 1e12 if median > 0 else math.nan,
        "param_count": spec.param_count,
        "build_s": build_s,
        "compile_s": compile_s,
        "warmup_steps": preset.warmup,
        "rounds": rounds,
        "peak_host_rss_bytes": peak_rss_bytes(),
        "peak_host_rss_scope": "cell" if own_peak else "process",
        "malloc": memory.SETTING,
        "peak_device_bytes": device_peak,
        "threads_requested": cell.threads,
        "threads_used": round(meter.threads_used, 2),
        **contention_fields(meter, cell.threads, on_cpu=cell.device == "cpu"),
        "threads_config": {"cpus_allowed": len(allowed_cpus()), **threads_config},
        "versions": adapter.versions(),
        "cpu_model": machine.cpu_model(),
        "cpu_isa": machine.cpu()["isa"],
    }
    record.update(work.info)
    return record
