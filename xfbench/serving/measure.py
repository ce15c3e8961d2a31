"""One serving cell: build and compile its buckets, warm them, then LoadGen drives the
scenario (Server: a search for the highest arrival rate whose p99 meets the bound).

The workloads are the infer suite's (harness.measure.build), one per bucket, built from
the same canonical weights. Compilation and warm-up happen before LoadGen starts and are
recorded apart (`compile_s`); what LoadGen times is the serving itself: queueing,
batching, the host-to-device copy of each batch, inference and its completion.
"""

from __future__ import annotations

import math
import shutil
import statistics
import time
from pathlib import Path

from xfbench import machine, records
from xfbench.harness import measure as network_measure
from xfbench.harness.memory import peak_device_bytes, peak_rss_bytes, reset_peak_rss
from xfbench.harness.presets import Preset
from xfbench.harness.threads import CpuMeter, allowed_cpus, contention_fields
from xfbench.models import synthetic_batch
from xfbench.serving import loadgen
from xfbench.serving.cell import KIND, ServingCell
from xfbench.serving.scenarios import Batching, batching, latency_bound_ms, timing

SAMPLE_SEED = 3  # the query sample library's synthetic samples
LIGHT_LOAD = 0.1  # the Server search's first rate, as a share of 1 / batch-1 latency


def bound(cell: ServingCell, spec, asked_ms: float | None) -> tuple[float, str]:
    if asked_ms is not None:
        return asked_ms, "--latency-bound"
    return latency_bound_ms(cell.network, spec.sequence)


class Buckets:
    """One built, compiled and warmed inference workload per bucket size."""

    def __init__(self, cell: ServingCell, policy: Batching, weights: str):
        self.work, self.compile_s, self.step_s = {}, 0.0, {}
        self.adapter = self.spec = None
        try:
            for b in policy.buckets:  # every bucket built before any compiles (adapters say why)
                self.adapter, self.spec, self.work[b] = network_measure.build(
                    cell.bucket_cell(b), weights=weights
                )
            for work in self.work.values():
                work.reset_peak_memory()
            for work in self.work.values():
                t0 = time.perf_counter()
                work.prepare()
                work.step()
                self.compile_s += time.perf_counter() - t0
            self.compiled = {}
            for work in self.work.values():
                self.compiled.update(work.compile_facts())  # raises when a mode fell back
        except BaseException:
            self.close()
            raise

    def warm(self, samples, rounds: int) -> None:
        """Warm-up through the serving path (host samples in, logits out); each bucket's
        last step time sizes LoadGen's expectations and the Server search."""
        for b, work in self.work.items():
            x = samples[:b] if len(samples) >= b else samples[[i % len(samples) for i in range(b)]]
            times = []
            for _ in range(max(1, rounds)):
                t0 = time.perf_counter()
                work.infer_samples(x)
                times.append(time.perf_counter() - t0)
            self.step_s[b] = statistics.median(times)

    def info(self) -> dict:
        first = next(iter(self.work.values()))
        return dict(first.info)

    def close(self) -> None:
        for work in self.work.values():
            work.close()
        self.work = {}


def measure(
    benchmark,
    cell: ServingCell,
    *,
    preset: Preset,
    threads_config: dict,
    logs: Path,
    bound_ms: float | None = None,
    weights: str = "seed",
) -> dict:
    """Run one serving cell under pytest-benchmark (its one round is the whole LoadGen
    run; the numbers are LoadGen's, in extra_info) and return the record."""
    from xfbench.models import get_spec

    spec = get_spec(cell.network, cell.scale, cell.tokens)
    bound_value, bound_source = bound(cell, spec, bound_ms)
    policy = batching(cell.scenario, cell.batch_size, bound_value)
    plan = timing(preset.name)
    own_peak = reset_peak_rss()
    t0 = time.perf_counter()
    buckets = Buckets(cell, policy, weights)
    build_s = time.perf_counter() - t0 - buckets.compile_s
    try:
        samples = synthetic_batch(buckets.spec, plan.samples, SAMPLE_SEED)[0]
        buckets.warm(samples, preset.warmup)
        if logs.exists():
            shutil.rmtree(logs)  # a cell measured again keeps only its own logs
        outcome = {}
        with CpuMeter() as meter:
            benchmark.pedantic(
                lambda: outcome.update(
                    _scenario(
                        cell,
                        buckets,
                        samples,
                        policy=policy,
                        plan=plan,
                        bound_ms=bound_value,
                        logs=logs,
                    )
                ),
                rounds=1,
                iterations=1,
                warmup_rounds=0,
            )
        record = {
            **records.header(KIND),
            **cell.as_dict(),
            "preset": preset.name,
            "status": "ok",
            **outcome,
            "latency_bound_ms": bound_value,
            "latency_bound_source": bound_source,
            "batching": policy.describe(),
            "loadgen_settings": {
                "min_duration_s": plan.min_duration_s,
                "min_query_count": 1,
                "performance_sample_count": plan.samples,
                "mode": "PerformanceOnly",
            },
            "loadgen_logs": str(logs),
            "warm_step_s": {str(b): s for b, s in buckets.step_s.items()},
            "param_count": buckets.spec.param_count,
            "build_s": build_s,
            "compile_s": buckets.compile_s,
            "warmup_steps": preset.warmup,
            "peak_host_rss_bytes": peak_rss_bytes(),
            "peak_host_rss_scope": "cell" if own_peak else "process",
            "peak_device_bytes": peak_device_bytes(buckets.work.values()),
            "threads_requested": cell.threads,
            "threads_used": round(meter.threads_used, 2),
            **contention_fields(meter, cell.threads, on_cpu=cell.device == "cpu"),
            "threads_config": {"cpus_allowed": len(allowed_cpus()), **threads_config},
            "versions": {**buckets.adapter.versions(), "loadgen": outcome.get("loadgen_version")},
            "cpu_model": machine.cpu_model(),
            "cpu_isa": machine.cpu()["isa"],
            **buckets.info(),
            **buckets.compiled,
        }
        record.pop("loadgen_version", None)
        benchmark.extra_info.update(record)
        return record
    finally:
        buckets.close()


def _scenario(cell: ServingCell, buckets, samples, *, policy, plan, bound_ms, logs: Path) -> dict:
    """One LoadGen run of the cell's scenario (Server: the search for its highest rate
    under the bound), from the warm step times' expectations: LoadGen's numbers."""
    sut = lambda: loadgen.SystemUnderTest(buckets.work, samples, policy)  # noqa: E731
    latency = buckets.step_s[policy.buckets[0]]
    throughput = policy.max_batch / buckets.step_s[policy.max_batch]
    if cell.scenario == "Server":
        return server_search(
            sut=sut,
            plan=plan,
            latency_s=latency,
            throughput=throughput,
            bound_ms=bound_ms,
            logs=logs,
        )
    # LoadGen schedules its queries from these expectations and stops once the minimum
    # duration has passed: expecting faster than the warm-up measured makes sure it
    # schedules enough (an Offline query cannot stop early, so it is sized at 1.5 x the
    # warm throughput).
    test = loadgen.settings(
        cell.scenario,
        min_duration_s=plan.min_duration_s,
        expected_latency_s=0.5 * latency,
        expected_qps=1.5 * throughput,
        target_qps=None,
        bound_ms=bound_ms,
    )
    kept = sut()
    return {**loadgen.run(kept, cell.scenario, test, logs), **batches_fields(kept)}


def batches_fields(sut: loadgen.SystemUnderTest) -> dict:
    return {
        "batches_run": sut.batches,
        "samples_served": sut.served,
        "padded_samples": sut.padded,
        "mean_batch": sut.served / sut.batches if sut.batches else None,
        "full_batch_s": [round(t, 6) for t in sut.full_batch_s],
    }


def server_search(
    *, sut, plan, latency_s: float, throughput: float, bound_ms: float, logs: Path
) -> dict:
    """The highest target QPS whose p99 LoadGen finds within the bound (search_rates)."""

    def run_at(qps: float, folder: Path) -> dict:
        test = loadgen.settings(
            "Server",
            min_duration_s=plan.min_duration_s,
            expected_latency_s=latency_s,
            expected_qps=throughput,
            target_qps=qps,
            bound_ms=bound_ms,
        )
        kept = sut()
        return {**loadgen.run(kept, "Server", test, folder), **batches_fields(kept)}

    out = search_rates(
        plan=plan,
        rates=(latency_s, throughput),
        run_at=run_at,
        logs=logs,
        step_of=lambda result: {"p99_ms": result.get("p99_ms")},
    )
    if out.get("server_qps") is None:
        steps = out["server_search"]
        tried = [s for s in steps if isinstance(s["p99_ms"], (int, float))]
        lowest = min(tried, key=lambda s: s["p99_ms"], default=None)
        said = (
            f"the lowest p99, {lowest['p99_ms']:.4g} ms, at {lowest['target_qps']:.4g} QPS"
            if lowest
            else "LoadGen gave no p99"
        )
        out.update(
            server_reason=(
                f"no rate tried met the {bound_ms:g} ms p99 bound ({said}; warm batch-1 "
                f"latency {latency_s * 1e3:.4g} ms)"
            ),
            p99_ms=lowest["p99_ms"] if lowest else None,
        )
    return out


def search_rates(*, plan, rates: tuple[float, float], run_at, logs: Path, step_of) -> dict:
    """The highest target QPS whose run LoadGen finds within its bounds
    (perf_constraints_met), each try one LoadGen run (run_at(qps, folder): its results)
    in a folder of its own, within the plan's run count and time budget. rates: (the warm
    latency of one query alone, s; the warm throughput of the largest bucket, queries/s).
    The first try is a light load, a tenth of what one query at a time sustains
    (LIGHT_LOAD / latency): if LoadGen finds even that over a bound, no rate meets it.
    Otherwise a bisection in log space between it and 1.2 x the throughput (more cannot
    be served), so that a bound met only at a small share of the throughput is found as
    surely as one met near it. step_of(result): what each step records beyond the
    rate, throughput and verdicts. Returns the best run's results with server_qps (None
    and valid False where none met the bounds), server_search (the steps) and its time."""
    latency_s, throughput = rates
    high = max(1.2 * throughput, 1e-3)
    low = min(LIGHT_LOAD / latency_s, high / 4)
    steps, best = [], None
    started = time.monotonic()
    for i in range(plan.search_runs):
        if i and time.monotonic() - started + plan.min_duration_s > plan.search_budget_s:
            break
        qps = low if not i else math.sqrt(low * high)
        folder = f"qps-{qps:.6g}"
        result = run_at(qps, logs / folder)
        met = bool(result.get("perf_constraints_met"))
        steps.append(
            {
                "target_qps": qps,
                **step_of(result),
                "completed_samples_per_s": result.get("completed_samples_per_s"),
                "perf_constraints_met": met,
                "validity": result.get("validity"),
                "logs": folder,
            }
        )
        if met:
            low = qps
            if best is None or qps > best["target_qps"]:
                best = {**result, "target_qps": qps, "logs_of_result": folder}
        elif not i:
            break  # not even a light load meets the bound
        else:
            high = qps
    out = {"server_search": steps, "server_search_s": time.monotonic() - started}
    if best is None:
        return {**out, "server_qps": None, "valid": False}
    return {**best, "server_qps": best["target_qps"], **out}
