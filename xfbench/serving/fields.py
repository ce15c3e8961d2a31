"""What a serving record holds (kind serving), declared with the suite (serving/plugin.py)."""

from __future__ import annotations

from xfbench.harness.fields import ADAPTER, CELL, CONTENTION
from xfbench.records import PID, Field, replaced

# The serving suite (xfbench/serving): an inference cell under one LoadGen scenario.
SERVER = "scenario Server"
FOUND = "scenario Server, a rate met the bound"
SCENARIO_RUN = "SingleStream, MultiStream, Offline, and Server when a rate met the bound"
SERVING_SEARCH_STEP = (
    Field("target_qps", "float", "the Poisson arrival rate LoadGen was asked for"),
    Field("p99_ms", "float | null", "LoadGen's p99 latency of the run"),
    Field("completed_samples_per_s", "float | null", "LoadGen's completed samples/s"),
    Field("perf_constraints_met", "bool", "LoadGen found the p99 within the bound"),
    Field("validity", "str", "LoadGen's VALID or INVALID for the run"),
    Field("logs", "str", "the run's log folder, inside loadgen_logs"),
)
SERVING = replaced(
    CELL,
    Field("task", "str", "serve"),
    Field("data", "str", "resident (synthetic samples held in host memory)"),
) + (
    Field("scenario", "str", "SingleStream, MultiStream, Server or Offline"),
    Field("preset", "str", "the preset that chose LoadGen's durations"),
    Field("status", "str", "ok"),
    *(
        Field(
            f"p{p}_ms",
            "float | null",
            f"LoadGen's {p.replace('_', '.')}th percentile latency, ms "
            "(MultiStream: of its 8-sample queries)",
            when=SCENARIO_RUN,
        )
        for p in ("50", "90", "95", "97", "99", "99_9")
    ),
    Field("mean_ms", "float | null", "LoadGen's mean latency, ms", when=SCENARIO_RUN),
    Field("min_ms", "float | null", "LoadGen's least latency, ms", when=SCENARIO_RUN),
    Field("max_ms", "float | null", "LoadGen's greatest latency, ms", when=SCENARIO_RUN),
    Field("valid", "bool", "LoadGen's result is VALID (Server: and a rate met the bound)"),
    Field("validity", "str", "LoadGen's VALID or INVALID", when=SCENARIO_RUN),
    Field("invalid_reason", "str | null", "LoadGen's recommendation, if any", when=SCENARIO_RUN),
    Field("min_duration_met", "bool", "LoadGen's minimum duration was met", when=SCENARIO_RUN),
    Field("min_queries_met", "bool", "LoadGen's minimum query count was met", when=SCENARIO_RUN),
    Field(
        "early_stopping_met",
        "bool",
        "LoadGen's early-stopping estimate holds (enough queries for the percentile)",
        when=SCENARIO_RUN,
    ),
    Field("query_count", "int", "queries LoadGen issued", when=SCENARIO_RUN),
    Field(
        "qps",
        "float",
        "LoadGen's queries/s, its overhead included",
        when="SingleStream, MultiStream",
    ),
    Field("samples_per_s", "float", "LoadGen's samples/s", when="Offline"),
    Field(
        "server_qps",
        "float | null",
        "the highest rate found whose p99 met the bound; null: none",
        when=SERVER,
    ),
    Field(
        "server_reason",
        "str",
        "why no rate met the bound",
        when="scenario Server, no rate met the bound",
    ),
    Field(
        "server_search",
        "list",
        "each LoadGen run of the search, in order",
        when=SERVER,
        of=SERVING_SEARCH_STEP,
    ),
    Field("server_search_s", "float", "seconds the search took", when=SERVER),
    Field("target_qps", "float", "the rate of the run reported", when=FOUND),
    Field("perf_constraints_met", "bool", "the p99 met the bound", when=FOUND),
    Field("completed_samples_per_s", "float", "LoadGen's completed samples/s", when=FOUND),
    Field("scheduled_samples_per_s", "float", "LoadGen's scheduled samples/s", when=FOUND),
    Field("overlatency_queries", "int", "queries over the bound", when=FOUND),
    Field("logs_of_result", "str", "the log folder of the run reported", when=FOUND),
    Field("batches_run", "int", "batches the SUT ran", when=SCENARIO_RUN),
    Field("samples_served", "int", "samples it answered", when=SCENARIO_RUN),
    Field("padded_samples", "int", "samples computed only to fill a bucket", when=SCENARIO_RUN),
    Field("mean_batch", "float | null", "samples_served over batches_run", when=SCENARIO_RUN),
    Field(
        "full_batch_s",
        "list[float]",
        "seconds of each batch run in the largest bucket, at most 1,000 (Offline's rounds "
        "in the scores)",
        when=SCENARIO_RUN,
    ),
    Field(
        "latency_bound_ms", "float", "Server's p99 bound (also given to LoadGen in every scenario)"
    ),
    Field("latency_bound_source", "str", "where the bound comes from"),
    Field("batching", "object", "the batching policy: buckets, max_batch, gather_ms, padding"),
    Field("loadgen_settings", "object", "LoadGen's durations and counts as set"),
    Field("loadgen_logs", "str", "the folder of LoadGen's mlperf_log_summary.txt and _detail.txt"),
    Field("warm_step_s", "object", "bucket -> its last warm-up step through the serving path, s"),
    Field("param_count", "int", "parameters of the network"),
    Field("build_s", "float", "seconds to build the buckets"),
    Field("compile_s", "float", "seconds of every bucket's first step (compilation), before load"),
    Field("warmup_steps", "int", "untimed steps of each bucket"),
    Field("peak_host_rss_bytes", "int", "peak resident memory"),
    Field("peak_host_rss_scope", "str", "cell or process"),
    Field("peak_device_bytes", "int | null", "the buckets' largest device peak; null on the host"),
    Field("threads_requested", "int", "threads asked for"),
    Field("threads_used", "float", "CPU time over wall time during the LoadGen run"),
    *CONTENTION,
    Field("threads_config", "object", "the thread settings in force"),
    Field("versions", "object", "library versions, LoadGen's included"),
    Field("cpu_model", "str", "the CPU's model name"),
    Field("cpu_isa", "list", "the CPU's ISA extensions"),
    *ADAPTER,
    PID,
)
