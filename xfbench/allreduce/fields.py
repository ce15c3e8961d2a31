"""What an all-reduce record holds (kind allreduce), declared with the suite
(allreduce/plugin.py)."""

from __future__ import annotations

from xfbench.records import PID, Field

ALLREDUCE_ROW = (
    Field("kind", "str", "allreduce (the worker's row)"),
    Field("framework", "str", "torch or jax"),
    Field("backend", "str", "gloo, nccl or XLA"),
    Field("device", "str", "cpu or cuda"),
    Field("device_name", "str", "the device's name"),
    Field("world_size", "int", "ranks"),
    Field("pattern", "str", "allreduce, or torch's reduce+broadcast or parameter server"),
    Field("dtype", "str", "fp32"),
    Field("bytes", "int", "message size"),
    Field("count", "int", "elements of the message"),
    Field("status", "str", "ok or failed"),
    Field("seconds", "float", "median seconds per operation, the maximum over ranks"),
    Field("algbw_gbps", "float", "bytes / seconds / 1e9"),
    Field("busbw_gbps", "float", "algbw scaled by 2 (n - 1) / n, as nccl-tests does"),
    Field("correct", "bool", "every rank's result was the exact sum"),
    Field("max_abs_err", "float", "largest error against the exact sum"),
    Field("wrong", "int", "elements that were wrong"),
    Field("rounds", "int", "timed operations"),
    Field("warmup", "int", "untimed operations"),
    Field("versions", "object", "library versions"),
    Field("reason", "str", "why the sum was wrong", when="status failed"),
)
ALLREDUCE = (
    Field("framework", "str", "torch or jax"),
    Field("backend", "str", "gloo, nccl or XLA"),
    Field("device", "str", "cpu or cuda"),
    Field("device_name", "str", "the device's name"),
    Field("world_size", "int", "ranks"),
    Field("threads_per_rank", "int | null", "CPU threads of each rank; null on GPUs"),
    Field("preset", "str", "the --preset"),
    Field("timing", "object", "the rounds rule: warmup, min_rounds, max_rounds, budget_s"),
    Field("status", "str", "ok, or failed when a sum was wrong"),
    Field("stats_are", "str", "what the entry's stats time (the largest all-reduce)"),
    Field("memory_cap_bytes", "int", "the largest message per rank this device holds"),
    Field("sizes_left_out", "list", "message sizes over memory_cap_bytes, not run"),
    Field("versions", "object", "library and runtime versions"),
    Field("rows", "list", "one per (pattern, bytes)", of=ALLREDUCE_ROW),
    PID,
)
