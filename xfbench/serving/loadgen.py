"""One LoadGen run: the System Under Test that answers LoadGen's queries with a
framework's inference, and LoadGen's own record of the run, read back from its log.

The SUT queues the samples LoadGen issues; one worker thread takes them in batches (the
batching policy of scenarios.Batching), copies each batch of host samples to the device,
runs the bucket's inference workload and tells LoadGen the samples are complete. Every
number xfbench reports for a scenario is LoadGen's, read from mlperf_log_detail.txt, the
machine-readable twin of mlperf_log_summary.txt; both stay in the cell's log folder.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np

from xfbench.serving.scenarios import MULTISTREAM_SAMPLES, Batching

PACKAGE = "mlcommons-loadgen"
MISSING = (
    f"serving needs MLPerf's LoadGen ({PACKAGE}, module mlperf_loadgen): "
    "pip install -r requirements.lock, or the 'serving' extra"
)
SUMMARY, DETAIL = "mlperf_log_summary.txt", "mlperf_log_detail.txt"
PERCENTILES = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")


def missing() -> str | None:
    """None when LoadGen imports, else the one line that says what to install."""
    try:
        import mlperf_loadgen  # noqa: F401
    except ImportError:
        return MISSING
    return None


KEPT_BATCHES = 1000  # batch times a record keeps, at most


class SystemUnderTest:
    """LoadGen's queries in, the bucket workloads' inference out (see the module doc)."""

    def __init__(self, buckets: dict, samples: np.ndarray, batching: Batching):
        self.buckets, self.samples, self.batching = buckets, samples, batching
        self.queue: deque = deque()  # (QuerySample, arrival time)
        self.cond = threading.Condition()
        self.stopping = False
        self.batches = 0
        self.padded = 0  # samples computed only to fill a bucket
        self.served = 0
        # seconds of each batch run in the largest bucket (at most KEPT_BATCHES): Offline's
        # rounds in the scores (report/serving.py)
        self.full_batch_s: list[float] = []
        self.error: BaseException | None = None
        self.kept: list = []  # what the responses of the batch being completed point at
        self.worker = threading.Thread(target=self._work, name="xfbench-sut", daemon=True)

    # LoadGen's callbacks (its own threads) -----------------------------------------
    def issue_queries(self, query_samples) -> None:
        now = time.monotonic()
        with self.cond:
            self.queue.extend((s, now) for s in query_samples)
            self.cond.notify()

    def flush_queries(self) -> None:
        pass  # every batch closes on its own (full, or its gather window ends)

    # the worker ----------------------------------------------------------------------
    def start(self) -> None:
        self.worker.start()

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()
        self.worker.join()

    def _take(self) -> list | None:
        """The next batch: wait for a sample, then (Server) up to the gather window for the
        largest bucket to fill; then take every queued sample (up to the largest bucket) when
        padding them up to the smallest bucket that holds them stays within the policy's
        padding limit (half a batch, by default), else as many as fill the largest bucket
        they fill (the rest wait for the next batch)."""
        limit, gather = self.batching.max_batch, self.batching.gather_s
        with self.cond:
            while not self.queue and not self.stopping:
                self.cond.wait()
            if self.stopping:
                return None
            deadline = self.queue[0][1] + gather
            while len(self.queue) < limit and not self.stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            n = min(len(self.queue), limit)
            filled = [b for b in self.batching.buckets if b <= n]
            bucket = self.batching.bucket(n)
            padded = (bucket - n) / bucket <= self.batching.padding_limit
            take = n if padded or not filled else filled[-1]
            return [self.queue.popleft()[0] for _ in range(take)]

    def _work(self) -> None:
        import mlperf_loadgen as lg

        while True:
            taken = self._take()
            if taken is None:
                return
            responses = None
            try:
                n = len(taken)
                bucket = self.batching.bucket(n)
                x = self.samples[[s.index for s in taken]]
                if bucket > n:
                    x = np.concatenate([x, np.repeat(x[-1:], bucket - n, axis=0)])
                started = time.perf_counter()
                responses = self.serve(taken, bucket, x)
                if bucket == self.batching.max_batch and len(self.full_batch_s) < KEPT_BATCHES:
                    self.full_batch_s.append(time.perf_counter() - started)
                self.batches += 1
                self.padded += bucket - n
                self.served += n
            except BaseException as e:  # said after the run; LoadGen must still finish
                self.error = self.error or e
            finally:  # every sample taken is answered, or LoadGen would wait for ever
                lg.QuerySamplesComplete(
                    responses or [lg.QuerySampleResponse(s.id, 0, 0) for s in taken]
                )
                self.kept = []

    def serve(self, taken: list, bucket: int, x: np.ndarray) -> list | None:
        """Compute one batch (x: the taken samples, padded to the bucket); the responses
        to complete them with, or None for empty ones. Data a response points at is held
        in self.kept until LoadGen has been told."""
        self.buckets[bucket].infer_samples(x)
        return None


def settings(
    scenario: str,
    *,
    min_duration_s: float,
    expected_latency_s: float,
    expected_qps: float,
    target_qps: float | None,
    bound_ms: float | None = None,
    token_bounds_ms: tuple[float, float] | None = None,
    min_queries: int = 1,
):
    """LoadGen's TestSettings for one performance run: a latency bound_ms, or LoadGen's
    token mode with its (TTFT, TPOT) bounds. min_queries 1: the duration decides
    (scenarios.py); more where LoadGen's early stopping needs them."""
    import mlperf_loadgen as lg

    s = lg.TestSettings()
    s.scenario = getattr(lg.TestScenario, scenario)
    s.mode = lg.TestMode.PerformanceOnly
    s.min_duration_ms = int(min_duration_s * 1000)
    s.min_query_count = min_queries
    s.single_stream_expected_latency_ns = max(1, int(expected_latency_s * 1e9))
    s.multi_stream_expected_latency_ns = max(1, int(expected_latency_s * 1e9))
    s.multi_stream_samples_per_query = MULTISTREAM_SAMPLES
    s.offline_expected_qps = max(1.0, expected_qps)
    if target_qps is not None:
        s.server_target_qps = target_qps
    if token_bounds_ms is None:
        s.server_target_latency_ns = int(bound_ms * 1e6)
    else:  # measured: the SUT reports each sample's first token (never inferred)
        s.use_token_latencies = True
        s.ttft_latency, s.tpot_latency = (int(b * 1e6) for b in token_bounds_ms)
        s.server_target_latency_ns = 0  # as mlperf.conf sets it for the LLMs: unused
    return s


def run(sut: SystemUnderTest, scenario: str, test_settings, outdir: Path) -> dict:
    """Run one scenario through LoadGen, its logs into outdir; LoadGen's results."""
    import mlperf_loadgen as lg

    outdir.mkdir(parents=True, exist_ok=True)
    count = len(sut.samples)
    qsl = lg.ConstructQSL(count, count, lambda _: None, lambda _: None)  # already in memory
    handle = lg.ConstructSUT(sut.issue_queries, sut.flush_queries)
    log = lg.LogSettings()
    log.log_output.outdir = str(outdir)
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    sut.start()
    try:
        # LoadGen reads an audit.config from the working folder when there is one, which
        # would change the settings silently: it is pointed at a file that is not there.
        lg.StartTestWithLogSettings(
            handle, qsl, test_settings, log, str(outdir / "no-audit.config")
        )
    finally:
        sut.stop()
        lg.DestroySUT(handle)
        lg.DestroyQSL(qsl)
    if sut.error is not None:
        raise sut.error
    return results(read_detail(outdir / DETAIL), scenario)


def read_detail(path: Path) -> dict:
    """LoadGen's detail log as {key: value} (its ':::MLLOG {json}' lines; the last wins)."""
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(":::MLLOG "):
            try:
                entry = json.loads(line[len(":::MLLOG ") :])
            except json.JSONDecodeError:
                continue
            out[entry.get("key")] = entry.get("value")
    return out


def read_summary(path: Path) -> dict:
    """The numbers of mlperf_log_summary.txt: its 'name : value' lines (tests hold the
    record to them)."""
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"\s*([^:]+?)\s*:\s*(\S+)\s*$", line)
        if m:
            out[m[1]] = m[2]
    return out


def results(detail: dict, scenario: str) -> dict:
    """What a serving record keeps of LoadGen's detail log."""

    def ms(key):
        v = detail.get(key)
        return v / 1e6 if isinstance(v, (int, float)) else None

    # MultiStream's latencies are its queries' (8 samples each), as its summary gives them;
    # the other scenarios' are their samples'.
    per = "_per_query" if scenario == "MultiStream" else ""
    query = "_query" if scenario == "MultiStream" else ""
    out = {f"p{_pct(p)}_ms": ms(f"result_{p}_percentile{per}_latency_ns") for p in PERCENTILES}
    out.update(
        mean_ms=ms(f"result_mean{query}_latency_ns"),
        min_ms=ms(f"result_min{query}_latency_ns"),
        max_ms=ms(f"result_max{query}_latency_ns"),
        valid=detail.get("result_validity") == "VALID",
        validity=detail.get("result_validity"),
        invalid_reason=(detail.get("result_invalid_reason") or "").strip() or None,
        min_duration_met=detail.get("result_min_duration_met"),
        min_queries_met=detail.get("result_min_queries_met"),
        early_stopping_met=detail.get("early_stopping_met"),
        query_count=detail.get("result_query_count"),
        loadgen_version=detail.get("loadgen_version"),
    )
    if detail.get("requested_use_token_latencies"):
        out.update(token_results(detail, ms))
    if scenario == "Server":
        out.update(
            perf_constraints_met=detail.get("result_perf_constraints_met"),
            completed_samples_per_s=detail.get("result_completed_samples_per_sec"),
            scheduled_samples_per_s=detail.get("result_scheduled_samples_per_sec"),
            overlatency_queries=detail.get("result_overlatency_query_count"),
            target_qps=detail.get("effective_target_qps"),
        )
    elif scenario == "Offline":
        out["samples_per_s"] = detail.get("result_samples_per_second")
    else:
        out["qps"] = detail.get("result_qps_with_loadgen_overhead")
    return out


def _pct(p: str) -> str:
    """'99.90' -> '99_9': a percentile as record keys spell it."""
    return p.rstrip("0").rstrip(".").replace(".", "_")


def token_results(detail: dict, ms) -> dict:
    """What LoadGen's token mode adds: each sample's time to first token (TTFT) and time
    per output token after it (TPOT = (latency - TTFT) / (tokens - 1)), their
    percentiles, tokens/s and its early-stopping verdicts."""
    out = {}
    for p in PERCENTILES:
        out[f"ttft_p{_pct(p)}_ms"] = ms(f"result_first_token_{p}_percentile_latency_ns")
        out[f"tpot_p{_pct(p)}_ms"] = ms(f"result_time_per_output_token_{p}_percentile_ns")
    out.update(
        ttft_mean_ms=ms("result_first_token_mean_latency_ns"),
        ttft_min_ms=ms("result_first_token_min_latency_ns"),
        ttft_max_ms=ms("result_first_token_max_latency_ns"),
        tpot_mean_ms=ms("result_time_to_output_token_mean"),
        tpot_min_ms=ms("result_time_to_output_token_min"),
        tpot_max_ms=ms("result_time_to_output_token_max"),
        tokens_per_s=detail.get("result_tokens_per_second")
        or detail.get("result_completed_tokens_per_second"),
        early_stopping_ttft=(detail.get("early_stopping_ttft_result") or "").strip() or None,
        early_stopping_tpot=(detail.get("early_stopping_tpot_result") or "").strip() or None,
    )
    return out
