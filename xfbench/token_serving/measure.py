"""One token-serving cell: build a generator per bucket, compile each and check its
tokens (as the generation suite does), warm them, then LoadGen drives the scenario in
token mode (Server: a search for the highest arrival rate whose p99 TTFT and p99 TPOT
meet the bounds, then a run long enough for LoadGen's early stopping at that rate).

Compilation, the token checks and warm-up happen before LoadGen starts and are recorded
apart; what LoadGen times is the serving: queueing, batching, prefill and decode.
"""

from __future__ import annotations

import functools
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from xfbench import records
from xfbench.generation.check import check_kept, checked_sequences, decoding_weights, verdict
from xfbench.generation.measure import WEIGHTS, machine_fields, prompt_ids, runnable
from xfbench.generation.metrics import first_generation, generate
from xfbench.harness.memory import peak_device_bytes, peak_rss_bytes, reset_peak_rss
from xfbench.harness.presets import Preset
from xfbench.harness.threads import CpuMeter
from xfbench.models import get_spec
from xfbench.serving import loadgen
from xfbench.serving.measure import batches_fields, search_rates
from xfbench.token_serving.cell import KIND, TokenServingCell
from xfbench.token_serving.sut import TokenSystemUnderTest, batching

PROMPT_SEED = 5  # the query sample library's prompts
# LoadGen 6.0.17's early stopping: a p90 needs at least 64 queries (SingleStream says so
# below that); a p99 with no query over its bound needs 459 (0.99^459 < 0.01), more when
# some are over.
SINGLESTREAM_QUERIES = 64
SERVER_QUERIES = 459
FALLBACK = 0.85  # Server: the second rate confirmed, at least this share of the first
# Warm-up of each bucket: at least the preset's generations and WARM_LEAST, and at least
# WARM_S of them (tiny networks' generations take milliseconds), at most WARM_MOST.
WARM_LEAST, WARM_S, WARM_MOST = 3, 0.5, 50


@dataclass(frozen=True)
class Timing:
    min_duration_s: float  # each LoadGen run
    search_runs: int  # Server: LoadGen runs of the search, at most
    search_budget_s: float  # Server: and at most this long in all (the confirmation apart)
    samples: int  # the query sample library's prompts


# Per preset (harness.presets names); the training presets are timed as quick.
TIMING = {
    "smoke": Timing(min_duration_s=1.0, search_runs=3, search_budget_s=10.0, samples=16),
    "quick": Timing(min_duration_s=10.0, search_runs=4, search_budget_s=60.0, samples=128),
    "paper": Timing(min_duration_s=60.0, search_runs=6, search_budget_s=600.0, samples=512),
}


def timing(preset: str) -> Timing:
    return TIMING.get(preset, TIMING["quick"])


def presets_table() -> str:
    """docs/token-serving.md's table of each preset's durations and lengths on the CPU,
    made from TIMING and cell.lengths (tests/test_token_serving.py holds the page to it)."""
    from xfbench.harness.presets import PRESETS
    from xfbench.token_serving.cell import lengths

    lines = [
        "| preset | minimum duration | Server search | prompts | lengths (ISL/OSL) on the CPU |",
        "|---|---|---|---|---|",
    ]
    for name, preset in PRESETS.items():
        t = timing(name)
        isl, osl = lengths(None, name, preset.scale)
        lines.append(
            f"| `{name}` | {t.min_duration_s:g} s | at most {t.search_runs} runs, "
            f"{t.search_budget_s:g} s | {t.samples} | {isl}/{osl} |"
        )
    return "\n".join(lines)


class Generators:
    """One generator per bucket, each compiled by a first generation, checked against the
    canonical function in float64 (a failed check raises check.TokensDiverged, one line)
    and warmed; its warm generation's times size LoadGen's expectations."""

    def __init__(self, cell: TokenServingCell, buckets: tuple[int, ...]):
        self.adapter = runnable(cell)
        self.spec = get_spec(cell.network, cell.scale)
        self.cell, self.work = cell, {}
        self.compile_s = self.check_s = 0.0
        self.compiled, self.checks, self.warm = {}, {}, {}
        weights = decoding_weights(self.spec, cell.precision)
        t0 = time.perf_counter()
        try:
            for b in buckets:
                self.work[b] = self.adapter.generator(self.spec, cell.bucket_cell(b), weights)
            for generator in self.work.values():
                generator.reset_peak_memory()
        except BaseException:
            self.close()
            raise
        self.build_s = time.perf_counter() - t0

    def prepare(self, warmup: int) -> None:
        """Compile, check and warm every bucket."""
        osl = self.cell.new_tokens
        for b, generator in self.work.items():
            prompt = prompt_ids(self.spec, b, self.cell.prompt_tokens)
            _, compile_s, _ = first_generation(generator, prompt, osl)
            self.compile_s += compile_s
            self.compiled.update(generator.compile_facts())
            t0 = time.perf_counter()
            rows = checked_sequences(b)
            kept = generate(generator, prompt, osl, keep_logits=rows)
            self.checks[str(b)] = check_kept(
                self.spec, prompt, kept, rows, precision=self.cell.precision
            )
            self.check_s += time.perf_counter() - t0
            verdict(self.checks[str(b)])
            runs, started = [], time.perf_counter()
            while len(runs) < WARM_MOST and (
                len(runs) < max(WARM_LEAST, warmup) or time.perf_counter() - started < WARM_S
            ):
                runs.append(generate(generator, prompt, osl))
            # the fastest: LoadGen schedules from it, and a SUT faster than expected would
            # finish its queries before the minimum duration
            # untimed: raises where the mode's claim does not hold (graphs never replayed)
            again = functools.partial(generate, generator, prompt, osl)
            self.compiled.update(generator.replay_facts(again))
            self.warm[b] = {
                "ttft_s": min(r.ttft_s for r in runs),
                "tpot_s": min(r.tpot_s for r in runs),
                "e2e_s": min(r.e2e_s for r in runs),
                "generations": len(runs),
            }

    def close(self) -> None:
        for generator in self.work.values():
            generator.close()
        self.work = {}


def measure(
    benchmark,
    cell: TokenServingCell,
    *,
    preset: Preset,
    threads_config: dict,
    logs: Path,
    bounds: tuple[float, float, str],
) -> dict:
    """Serve one cell under pytest-benchmark (its one round is the whole LoadGen run or
    Server search; the numbers are LoadGen's, in extra_info) and return the record."""
    ttft_ms, tpot_ms, source = bounds
    policy = batching(cell.scenario, cell.batch_size, ttft_ms)
    plan = timing(preset.name)
    own_peak = reset_peak_rss()
    work = Generators(cell, policy.buckets)
    try:
        work.prepare(preset.warmup)
        prompts = prompt_ids(work.spec, plan.samples, cell.prompt_tokens, seed=PROMPT_SEED)
        if logs.exists():
            shutil.rmtree(logs)  # a cell measured again keeps only its own logs
        served = Scenario(
            cell, work, prompts=prompts, policy=policy, plan=plan, bounds_ms=(ttft_ms, tpot_ms)
        )
        outcome = {}
        with CpuMeter() as meter:
            benchmark.pedantic(
                lambda: outcome.update(served.run(logs)),
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
            "ttft_bound_ms": ttft_ms,
            "tpot_bound_ms": tpot_ms,
            "bounds_source": source,
            "batching": policy.describe(),
            "loadgen_settings": served.settings_used(),
            "loadgen_logs": str(logs),
            "warm_generation": {str(b): w for b, w in work.warm.items()},
            "token_checks": work.checks,
            "check_s": work.check_s,
            "weights": WEIGHTS,
            "param_count": work.spec.param_count,
            "build_s": work.build_s,
            "compile_s": work.compile_s,
            "warmup_generations": preset.warmup,
            "peak_host_rss_bytes": peak_rss_bytes(),
            "peak_host_rss_scope": "cell" if own_peak else "process",
            "peak_device_bytes": peak_device_bytes(work.work.values()),
            **machine_fields(cell, meter, threads_config, work.adapter),
            **work.compiled,
        }
        record["versions"] = {**record["versions"], "loadgen": record.pop("loadgen_version", None)}
        record.update(next(iter(work.work.values())).info)  # every bucket's decoder is alike
        benchmark.extra_info.update(record)
        return record
    finally:
        work.close()


class Scenario:
    """The LoadGen run(s) of one cell's scenario."""

    def __init__(
        self, cell: TokenServingCell, work: Generators, *, prompts, policy, plan, bounds_ms
    ):
        self.cell, self.work, self.prompts = cell, work, prompts
        self.policy, self.plan, self.bounds_ms = policy, plan, bounds_ms
        largest = policy.max_batch
        self.latency_s = work.warm[policy.buckets[0]]["e2e_s"]  # one query alone
        self.throughput = largest / work.warm[largest]["e2e_s"]  # queries/s at the largest

    def sut(self) -> TokenSystemUnderTest:
        return TokenSystemUnderTest(
            self.work.work, self.prompts, self.policy, new_tokens=self.cell.new_tokens
        )

    def settings(self, scenario: str, *, target_qps=None, min_queries=1):
        return loadgen.settings(
            scenario,
            min_duration_s=self.plan.min_duration_s,
            expected_latency_s=0.5 * self.latency_s,
            expected_qps=1.5 * self.throughput,
            target_qps=target_qps,
            token_bounds_ms=self.bounds_ms,
            min_queries=min_queries,
        )

    def settings_used(self) -> dict:
        return {
            "min_duration_s": self.plan.min_duration_s,
            "min_query_count": SINGLESTREAM_QUERIES if self.cell.scenario == "SingleStream" else 1,
            "server_confirmation_queries": SERVER_QUERIES,
            "performance_sample_count": self.plan.samples,
            "use_token_latencies": True,
            "mode": "PerformanceOnly",
        }

    def once(self, test, logs: Path) -> dict:
        kept = self.sut()
        result = loadgen.run(kept, self.cell.scenario, test, logs)
        return {**result, **batches_fields(kept), "tokens_served": kept.out.tokens}

    def run(self, logs: Path) -> dict:
        """LoadGen's numbers for the scenario. LoadGen schedules from the warm
        generation's expectations (latency expected at half, throughput at 1.5 x the warm
        figures, so that it issues enough to fill the minimum duration)."""
        scenario = self.cell.scenario
        if scenario == "SingleStream":
            return self.once(self.settings(scenario, min_queries=SINGLESTREAM_QUERIES), logs)
        if scenario == "Offline":
            return self.once(self.settings(scenario), logs)
        return self.server(logs)

    def server(self, logs: Path) -> dict:
        """The search (serving.measure.search_rates), then the confirmation: the rate
        found, run again until LoadGen's early stopping can judge its p99s (a search
        run of the preset's duration cannot); where that run misses a bound, a lower rate
        is confirmed instead: the next one that met the bounds in the search, or FALLBACK
        of the first where that is higher."""
        searched = search_rates(
            plan=self.plan,
            rates=(self.latency_s, self.throughput),
            run_at=lambda qps, folder: self.once(self.settings("Server", target_qps=qps), folder),
            logs=logs,
            step_of=lambda r: {
                "ttft_p99_ms": r.get("ttft_p99_ms"),
                "tpot_p99_ms": r.get("tpot_p99_ms"),
            },
        )
        steps = searched["server_search"]
        if searched.get("server_qps") is None:
            return {**searched, "server_reason": self.missed(steps)}
        met = sorted((s["target_qps"] for s in steps if s["perf_constraints_met"]), reverse=True)
        # the best rate; where it misses, the next lower rate that met, but no lower than
        # FALLBACK of the best (a confirmation lasts SERVER_QUERIES / rate seconds)
        rates = [met[0], max([FALLBACK * met[0], *met[1:2]])]
        tried = []
        for qps in rates:
            folder = f"confirm-qps-{qps:.6g}"
            test = self.settings("Server", target_qps=qps, min_queries=SERVER_QUERIES)
            result = self.once(test, logs / folder)
            met = bool(result.get("perf_constraints_met"))
            tried.append(
                {
                    "target_qps": qps,
                    "ttft_p99_ms": result.get("ttft_p99_ms"),
                    "tpot_p99_ms": result.get("tpot_p99_ms"),
                    "perf_constraints_met": met,
                    "validity": result.get("validity"),
                    "query_count": result.get("query_count"),
                    "logs": folder,
                }
            )
            if met:
                return {
                    **result,
                    "target_qps": qps,
                    "server_qps": qps,
                    "logs_of_result": folder,
                    "server_search": steps,
                    "server_search_s": searched["server_search_s"],
                    "server_confirmation": tried,
                }
        # no rate held: none of the search's figures is the scenario's result
        return {
            "server_search": steps,
            "server_search_s": searched["server_search_s"],
            "server_qps": None,
            "valid": False,
            "server_confirmation": tried,
            "server_reason": (
                f"the rates confirmed ({', '.join(f'{q:.4g}' for q in rates)} QPS) each "
                f"missed a bound when run with {SERVER_QUERIES} queries"
            ),
        }

    def missed(self, steps: list[dict]) -> str:
        ttft, tpot = self.bounds_ms
        first = steps[0] if steps else {}
        said = (
            f"at {first['target_qps']:.4g} QPS, p99 TTFT {first.get('ttft_p99_ms') or 0:.4g} ms "
            f"and p99 TPOT {first.get('tpot_p99_ms') or 0:.4g} ms"
            if first
            else "LoadGen gave no run"
        )
        return (
            f"no rate tried met the bounds (p99 TTFT {ttft:g} ms, p99 TPOT {tpot:g} ms): {said}; "
            f"one query alone takes {self.latency_s * 1e3:.4g} ms warm"
        )
