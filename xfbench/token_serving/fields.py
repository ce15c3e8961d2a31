"""What a token-serving record holds (kind token_serving), declared with the suite
(token_serving/plugin.py)."""

from __future__ import annotations

from xfbench.generation.fields import GENERATION, GENERATOR_COMPILED, GENERATOR_INFO
from xfbench.harness.fields import CELL, CONTENTION
from xfbench.records import PID, Field, replaced
from xfbench.serving.fields import SERVER

# The token-serving suite (xfbench/token_serving): a generation cell under one of LoadGen's
# scenarios in token mode.
TOKEN_RUN = "SingleStream, Offline, and Server when a rate met the bounds"
TOKEN_FOUND = "scenario Server, a rate met the bounds"
TOKEN_SEARCH_STEP = (
    Field("target_qps", "float", "the Poisson arrival rate LoadGen was asked for"),
    Field("ttft_p99_ms", "float | null", "LoadGen's p99 time to first token of the run"),
    Field("tpot_p99_ms", "float | null", "LoadGen's p99 time per output token of the run"),
    Field("completed_samples_per_s", "float | null", "LoadGen's completed samples/s"),
    Field("perf_constraints_met", "bool", "LoadGen found both p99s within their bounds"),
    Field("validity", "str", "LoadGen's VALID or INVALID for the run"),
    Field("logs", "str", "the run's log folder, inside loadgen_logs"),
)
TOKEN_CONFIRMATION = (
    Field("target_qps", "float", "the rate run again"),
    Field("ttft_p99_ms", "float | null", "LoadGen's p99 TTFT"),
    Field("tpot_p99_ms", "float | null", "LoadGen's p99 TPOT"),
    Field("perf_constraints_met", "bool", "both p99s within their bounds"),
    Field("validity", "str", "LoadGen's VALID or INVALID"),
    Field("query_count", "int | null", "queries LoadGen issued"),
    Field("logs", "str", "the run's log folder, inside loadgen_logs"),
)


def _percentiles(name: str, what: str) -> tuple[Field, ...]:
    return tuple(
        Field(
            f"{name}_p{p}_ms",
            "float | null",
            f"LoadGen's {p.replace('_', '.')}th percentile {what}, ms",
            when=TOKEN_RUN,
        )
        for p in ("50", "90", "95", "97", "99", "99_9")
    )


TOKEN_SERVING = replaced(
    GENERATION[: len(CELL)],
    Field("task", "str", "serve-tokens"),
    Field("batch_size", "int", "the largest static batch the SUT runs (Offline's, Server's)"),
) + (
    Field("prompt_tokens", "int", "ISL: tokens of each prompt"),
    Field("new_tokens", "int", "OSL: tokens each sample generates (greedy, no stop token)"),
    Field("scenario", "str", "SingleStream, Server or Offline"),
    Field("preset", "str", "the preset that chose LoadGen's durations"),
    Field("status", "str", "ok"),
    *_percentiles("ttft", "time to first token (issue to the first token's report)"),
    *_percentiles("tpot", "time per output token: (latency - TTFT) / (tokens - 1)"),
    *(
        Field(f"{name}_{stat}_ms", "float | null", f"LoadGen's {stat} {what}, ms", when=TOKEN_RUN)
        for name, what in (("ttft", "time to first token"), ("tpot", "time per output token"))
        for stat in ("mean", "min", "max")
    ),
    *(
        Field(
            f"p{p}_ms",
            "float | null",
            f"LoadGen's {p.replace('_', '.')}th percentile latency (issue to completion), ms",
            when=TOKEN_RUN,
        )
        for p in ("50", "90", "95", "97", "99", "99_9")
    ),
    Field("mean_ms", "float | null", "LoadGen's mean latency, ms", when=TOKEN_RUN),
    Field("min_ms", "float | null", "LoadGen's least latency, ms", when=TOKEN_RUN),
    Field("max_ms", "float | null", "LoadGen's greatest latency, ms", when=TOKEN_RUN),
    Field(
        "tokens_per_s",
        "float | null",
        "LoadGen's tokens/s (Offline: result_tokens_per_second; the others: completed tokens/s)",
        when=TOKEN_RUN,
    ),
    Field("valid", "bool", "LoadGen's result is VALID (Server: and a rate met the bounds)"),
    Field("validity", "str", "LoadGen's VALID or INVALID", when=TOKEN_RUN),
    Field("invalid_reason", "str | null", "LoadGen's recommendation, if any", when=TOKEN_RUN),
    Field("min_duration_met", "bool", "LoadGen's minimum duration was met", when=TOKEN_RUN),
    Field("min_queries_met", "bool", "LoadGen's minimum query count was met", when=TOKEN_RUN),
    Field(
        "early_stopping_met",
        "bool",
        "LoadGen's early-stopping estimates hold (enough queries for the percentiles)",
        when=TOKEN_RUN,
    ),
    Field(
        "early_stopping_ttft", "str | null", "LoadGen's early-stopping note on TTFT", when=TOKEN_RUN
    ),
    Field(
        "early_stopping_tpot", "str | null", "LoadGen's early-stopping note on TPOT", when=TOKEN_RUN
    ),
    Field("query_count", "int", "queries LoadGen issued", when=TOKEN_RUN),
    Field("qps", "float", "LoadGen's queries/s, its overhead included", when="SingleStream"),
    Field("samples_per_s", "float", "LoadGen's sequences/s", when="Offline"),
    Field(
        "server_qps",
        "float | null",
        "the highest rate whose p99 TTFT and p99 TPOT met the bounds (confirmed where the "
        "preset confirms); null: none",
        when=SERVER,
    ),
    Field(
        "server_reason",
        "str",
        "why no rate met the bounds",
        when="scenario Server, no rate met the bounds",
    ),
    Field(
        "server_search",
        "list",
        "each LoadGen run of the search, in order",
        when=SERVER,
        of=TOKEN_SEARCH_STEP,
    ),
    Field("server_search_s", "float", "seconds the search took", when=SERVER),
    Field(
        "server_confirmation",
        "list",
        "the runs of the rates found, each with enough queries for LoadGen's early stopping",
        when="scenario Server, the preset confirms and a rate met the bounds",
        of=TOKEN_CONFIRMATION,
    ),
    Field("target_qps", "float", "the rate of the run reported", when=TOKEN_FOUND),
    Field("perf_constraints_met", "bool", "both p99s met their bounds", when=TOKEN_FOUND),
    Field("completed_samples_per_s", "float", "LoadGen's completed samples/s", when=TOKEN_FOUND),
    Field("scheduled_samples_per_s", "float", "LoadGen's scheduled samples/s", when=TOKEN_FOUND),
    Field(
        "overlatency_queries",
        "int",
        "LoadGen's count against its plain latency bound, which token mode sets to 0: "
        "every query (the bounds that count are TTFT's and TPOT's)",
        when=TOKEN_FOUND,
    ),
    Field("logs_of_result", "str", "the log folder of the run reported", when=TOKEN_FOUND),
    Field("batches_run", "int", "static batches the SUT ran", when=TOKEN_RUN),
    Field("samples_served", "int", "sequences it completed", when=TOKEN_RUN),
    Field("padded_samples", "int", "sequences computed only to fill a bucket", when=TOKEN_RUN),
    Field("mean_batch", "float | null", "samples_served over batches_run", when=TOKEN_RUN),
    Field(
        "full_batch_s",
        "list[float]",
        "seconds of each batch run in the largest bucket, at most 1,000",
        when=TOKEN_RUN,
    ),
    Field("tokens_served", "int", "tokens of the sequences completed", when=TOKEN_RUN),
    Field("ttft_bound_ms", "float", "Server's p99 TTFT bound (given to LoadGen in every scenario)"),
    Field("tpot_bound_ms", "float", "Server's p99 TPOT bound (likewise)"),
    Field("bounds_source", "str", "where the bounds come from"),
    Field(
        "batching",
        "object",
        "the static-batching policy: buckets, max_batch, gather_ms, padding, padding_limit",
    ),
    Field("loadgen_settings", "object", "LoadGen's durations, counts and token mode as set"),
    Field("loadgen_logs", "str", "the folder of LoadGen's mlperf_log_summary.txt and _detail.txt"),
    Field(
        "warm_generation",
        "object",
        "bucket -> the least TTFT, TPOT and end-to-end seconds of its warm generations "
        "(LoadGen's expectations), and how many there were",
    ),
    Field(
        "token_checks",
        "object",
        "bucket -> its tokens and logits checked before load (as a generation cell's)",
    ),
    Field("check_s", "float", "seconds of those checks"),
    Field("weights", "str", "the weights decoded with"),
    Field("param_count", "int", "parameters of the network"),
    Field("build_s", "float", "seconds to build every bucket's generator"),
    Field(
        "compile_s",
        "float",
        "every bucket's first prefill and decode step and first-call work (the torch loop "
        "mode's graph capture), before load",
    ),
    Field("warmup_generations", "int", "untimed generations of each bucket"),
    Field("peak_host_rss_bytes", "int", "peak resident memory"),
    Field("peak_host_rss_scope", "str", "cell or process"),
    Field("peak_device_bytes", "int | null", "the buckets' largest device peak; null on the host"),
    Field("threads_requested", "int", "threads asked for"),
    Field("threads_used", "float", "CPU time over wall time during the LoadGen run(s)"),
    *CONTENTION,
    Field("threads_config", "object", "the thread settings in force"),
    Field("versions", "object", "library versions, LoadGen's included"),
    Field("cpu_model", "str", "the CPU's model name"),
    Field("cpu_isa", "list", "the CPU's ISA extensions"),
    *GENERATOR_COMPILED,
    *GENERATOR_INFO,
    PID,
)
