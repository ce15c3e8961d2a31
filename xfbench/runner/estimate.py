"""How long a sweep's process groups should take, from the preset and the cells alone:
`xfbench run --dry-run` prints it, measuring and writing nothing.

A cell's step is its FLOPs (the spec's) at an assumed rate: ASSUMED_GFLOPS_PER_THREAD on
the CPU (fp32 matrix code reaches 40-110 GFLOP/s a core on the machines this suite was
built on; docs/measurement.md), and ASSUMED_SHARE of a GPU's datasheet peak. It then takes
the preset's steps (the first, the warm-ups, the rounds its budget gives) plus BUILD_S to
build the network; a serving cell takes LoadGen's durations for its scenario; a generation
cell its generations (the compiling one, the checked one, the warm-ups, the timed ones),
each a prefill at the FLOP rate and decode steps that read every weight at
ASSUMED_GBPS_PER_THREAD, and its check in float64 at a quarter of the FLOP rate; a
token-serving cell those of each bucket, and LoadGen's queries and durations. The real
time differs by the machine, often 2-5 times: an estimate to plan with, not a number.
"""

from __future__ import annotations

from xfbench.harness.presets import PRESETS

ASSUMED_GFLOPS_PER_THREAD = 50.0
ASSUMED_SHARE = 0.3
BUILD_S = 2.0
# a decode step at small batch reads every weight: 10-35 GB/s over 2 threads of a Zen 4
# EPYC, by framework (docs/generation.md)
ASSUMED_GBPS_PER_THREAD = 8.0


def _rate(cell) -> float:
    """Assumed FLOP/s of the cell's device."""
    if cell.device == "cpu":
        return ASSUMED_GFLOPS_PER_THREAD * 1e9 * max(1, getattr(cell, "threads", 1))
    from xfbench import machine
    from xfbench.published import peak_tflops

    names = [g.get("name") for g in machine.describe().get("gpus") or []]
    peak = peak_tflops(names[0] if names else None, cell.precision) or 20.0
    return ASSUMED_SHARE * peak * 1e12


def cell_seconds(cell, preset_name: str) -> float | None:
    """About how long one cell takes, or None where nothing says (an all-reduce sweep)."""
    from xfbench.models import get_spec

    preset = PRESETS[preset_name]
    scenario = getattr(cell, "scenario", None)
    if scenario is not None and hasattr(cell, "new_tokens"):  # a token-serving cell
        return _token_serving_seconds(cell, preset)
    if scenario is not None:  # a serving cell: LoadGen's durations decide
        from xfbench.serving.scenarios import TIMING

        timing = TIMING.get(preset_name, TIMING["paper"])
        return BUILD_S + (timing.search_budget_s if scenario == "Server" else timing.min_duration_s)
    if hasattr(cell, "new_tokens"):  # a generation cell
        return _generation_seconds(cell, preset)
    if hasattr(cell, "batch_size"):  # a train/infer cell
        spec = get_spec(cell.network, cell.scale, cell.tokens)
        step = spec.flops(cell.task, cell.batch_size) / _rate(cell)
        rounds, _ = preset.rounds(step)
        return BUILD_S + (1 + preset.warmup + rounds) * step
    if hasattr(cell, "workers"):  # a scaling cell: all its workers' step, warm-ups, rounds
        spec = get_spec(cell.network, cell.scale)
        rate = ASSUMED_GFLOPS_PER_THREAD * 1e9 * cell.threads_per_worker * cell.workers
        step = spec.flops("train", cell.global_batch) / rate
        return 3 * BUILD_S + (1 + preset.warmup + preset.min_rounds) * step
    return None


def _generation_seconds(cell, preset) -> float:
    one, check = _one_generation(cell, cell.batch_size)
    return BUILD_S + check + (2 + preset.warmup + preset.min_rounds) * one


def _one_generation(cell, batch: int) -> tuple[float, float]:
    """(one generation of batch sequences, its float64 check), seconds."""
    from xfbench.models import get_spec

    spec = get_spec(cell.network, cell.scale)
    rate = _rate(cell)
    tokens = batch * (cell.prompt_tokens + cell.new_tokens)
    flops = 2 * spec.param_count * tokens
    read = 4 * spec.param_count / (ASSUMED_GBPS_PER_THREAD * 1e9 * max(1, cell.threads))
    decode = max(2 * spec.param_count * batch / rate, read)
    one = 2 * spec.param_count * batch * cell.prompt_tokens / rate
    one += (cell.new_tokens - 1) * decode
    return one, 4 * flops / rate


def _token_serving_seconds(cell, preset) -> float:
    """Each bucket's generations and check as a generation cell's, then LoadGen: 64
    queries or the minimum duration (SingleStream), the duration and a half (Offline), or
    the search's budget and the confirmation's queries at half the throughput (Server)."""
    from xfbench.token_serving.measure import SERVER_QUERIES, SINGLESTREAM_QUERIES, timing
    from xfbench.token_serving.sut import batching

    plan = timing(preset.name)
    policy = batching(cell.scenario, cell.batch_size, ttft_bound_ms=0.0)
    total = BUILD_S
    for b in policy.buckets:
        one, check = _one_generation(cell, b)
        total += check + (2 + preset.warmup) * one
    alone, _ = _one_generation(cell, 1)
    largest, _ = _one_generation(cell, policy.max_batch)
    if cell.scenario == "SingleStream":
        return total + max(plan.min_duration_s, SINGLESTREAM_QUERIES * alone)
    if cell.scenario == "Offline":
        return total + 1.65 * plan.min_duration_s
    return total + plan.search_budget_s + SERVER_QUERIES / (0.5 * policy.max_batch / largest)


def group_seconds(cells, preset_name: str) -> float | None:
    """The sum over a group's cells; None when any cell's is not known."""
    times = [cell_seconds(getattr(c, "cell", c), preset_name) for c in cells]
    return None if any(t is None for t in times) else sum(times)
