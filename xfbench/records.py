"""What xfbench writes: the kinds of record, their fields, and the version of this schema.

Every record carries `kind` and `schema_version`. A record is the `extra_info` of one
pytest-benchmark entry (kinds train, infer, gemm, scaling, allreduce, equivalence), or a
failure record (kind failure: a cell that gave no number, in a runner folder's failed/
or under the top-level "xfbench" key of a JSON file). Writers stamp records with
`header(kind)`; readers ask `kind_of(record)`, which also reads files written before
records were typed (schema_version 0: the kind is inferred from the fields, as the
report always did) and refuses a record of an unknown kind or a newer version.

docs/records.md is rendered from FIELDS by `python -m xfbench.records > docs/records.md`;
a test keeps the two the same.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

SCHEMA_VERSION = 1
KINDS = ("train", "infer", "gemm", "scaling", "allreduce", "equivalence", "failure")
# Older names of a kind, still read.
ALIASES = {"allreduce_sweep": "allreduce"}
FAILURE_STATUSES = ("failed", "timeout", "killed", "oom", "skipped")


class RecordError(ValueError):
    """A record this version of xfbench cannot read; the message is one line."""


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    meaning: str


def header(kind: str) -> dict:
    """The fields that say what a record is; every writer puts them first."""
    if kind not in KINDS:
        raise ValueError(f"unknown record kind {kind!r}")
    return {"kind": kind, "schema_version": SCHEMA_VERSION}


def kind_of(record: dict) -> str | None:
    """The kind of a record (None: not an xfbench record). RecordError for a kind this
    version does not know or a schema_version newer than SCHEMA_VERSION."""
    version = record.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise RecordError(f"schema_version {version!r} is not a version number")
    if version > SCHEMA_VERSION:
        raise RecordError(
            f"written by a newer xfbench (record schema {version}; this one "
            f"reads up to {SCHEMA_VERSION}): update xfbench to read it"
        )
    kind = record.get("kind")
    if kind is not None:
        kind = ALIASES.get(kind, kind)
        if kind not in KINDS:
            raise RecordError(f"unknown record kind {kind!r} (known: {', '.join(KINDS)})")
        return kind
    if version:
        raise RecordError(f"a schema {version} record without a kind")
    return _inferred(record)


def _inferred(record: dict) -> str | None:
    """The kind of a record written before records carried one."""
    if "equivalence" in record:
        return "equivalence"
    if record.get("status") in FAILURE_STATUSES and isinstance(record.get("cell"), dict):
        return "failure"
    if ("implementation" in record or record.get("suite") == "gemm") and "tflops" in record:
        return "gemm"
    if "network" in record and "framework" in record:
        return "infer" if record.get("task") == "infer" else "train"
    return None


# --data real (harness/measure.py): absent from synthetic-data records.
REAL_DATA = (
    Field("data_set", "str", "mnist, cifar10, ptb or imagenet (data/sources.py)"),
    Field("data_dir", "str", "the --data-dir it was read from"),
    Field("data_samples", "int", "samples in the data set"),
    Field(
        "loader_workers",
        "int",
        "the input pipeline's workers (--data-workers; 0 for ONNX Runtime, which has none)",
    ),
    Field("data_wait_s", "float", "median time a step waited for its batch from the pipeline"),
    Field("data_wait_share", "float", "data_wait_s over the median whole step"),
    Field(
        "step_compute_s", "float", "median time of the rest: the copy to the device and the step"
    ),
    Field(
        "samples_per_s_end_to_end", "float", "batch over the median whole step, waiting included"
    ),
    Field(
        "samples_per_s_resident",
        "float",
        "batch over the median step on the last batch held on the device (5 steps)",
    ),
    Field("input_bound", "bool", "data_wait_share above input_bound_share"),
    Field("input_bound_share", "float", "the threshold, 0.10"),
    Field("epoch_s", "float | null", "one epoch's time, where the timed rounds covered one"),
)


# Energy over the timed rounds (harness/energy.py): network and GEMM records alike.
ENERGY = (
    Field(
        "energy_method",
        "str",
        "nvml-energy (the GPU's energy counter), nvml-power-sampling (its power, sampled and "
        "integrated), rapl (the CPU packages and DRAM through powercap) or none",
    ),
    Field("energy_reason", "str | null", "why none, or why the GPU's power was sampled"),
    Field("energy_j", "float | null", "joules over the timed rounds"),
    Field("energy_per_step_j", "float | null", "energy_j over the timed steps"),
    Field("joules_per_sample", "float | null", "energy_j over the samples of the timed steps"),
    Field("samples_per_kj", "float | null", "samples of the timed steps per 1000 joules"),
    Field(
        "energy_domains",
        "object | null",
        "joules per RAPL domain read: package-N and dram-N (psys and core are inside them)",
    ),
)


CELL = (
    Field("network", "str", "network id (docs/models.md)"),
    Field("framework", "str", "the --framework value"),
    Field("mode", "str", "execution mode (eager, compile, function, xla, jit, ...)"),
    Field("precision", "str", "fp32, tf32, bf16, fp16 or fp64"),
    Field("device", "str", "cpu, cuda:N or tpu:N"),
    Field("threads", "int", "CPU threads the process was pinned to"),
    Field("batch_size", "int", "mini-batch size"),
    Field("task", "str", "train or infer"),
    Field(
        "data", "str", "resident (the batch stays on the device) or copied (copied in each step)"
    ),
    Field("scale", "str", "full (the paper's network) or smoke (the tests' smaller one)"),
)
# Contention during the timed rounds (harness/threads.py CpuMeter), in network and GEMM records.
CONTENTION = (
    Field(
        "other_cpu_share",
        "float | null",
        "share of the allowed CPUs' time that other processes, interrupts and steal took "
        "during the timed rounds (/proc/stat busy time less this process's CPU time, over "
        "wall x CPUs); null when /proc/stat could not be read",
    ),
    Field("steal_share", "float | null", "the part of that taken by the hypervisor (steal)"),
    Field(
        "contended",
        "bool | null",
        "other_cpu_share above 10 % beyond the ticks' resolution (docs/measurement.md)",
    ),
    Field("contention_unknown", "str | null", "why other_cpu_share is null"),
    Field(
        "thread_shortfall",
        "bool | null",
        "threads_used below 0.8 x threads_requested; null on an accelerator",
    ),
)
NETWORK_CELL = CELL + (
    Field("preset", "str", "the preset that chose warm-up and rounds"),
    Field("status", "str", "ok"),
    Field("seconds_per_batch", "float", "median seconds per mini-batch: stats.median"),
    Field("samples_per_s", "float", "batch_size / seconds_per_batch"),
    Field("flops_per_step", "int", "analytic FLOPs of one step (training: 3x the forward)"),
    Field("achieved_tflops", "float", "flops_per_step / seconds_per_batch / 1e12"),
    Field("param_count", "int", "parameters of the network"),
    Field("build_s", "float", "seconds to build the network and its batch"),
    Field("compile_s", "float", "seconds of ahead-of-time compilation and the first step"),
    Field("warmup_steps", "int", "untimed steps after the first"),
    Field("rounds", "int", "timed steps"),
    Field(
        "rounds_chosen_by",
        "str",
        "budget (the preset's seconds), ci target (as many as the warm-up spread says the "
        "interval needs) or time cap (the adaptive rounds' limit)",
    ),
    Field("ci_low_s", "float", "lower end of the median's confidence interval, seconds"),
    Field("ci_high_s", "float", "upper end of the median's confidence interval, seconds"),
    Field(
        "ci_level",
        "float",
        "the interval's coverage: 0.95 or more when there are enough rounds (6 or more), "
        "else that of [min, max] (3 rounds: 0.75)",
    ),
    Field("ci_method", "str", "order statistics (distribution-free)"),
    Field("ci_half_width", "float", "half the interval's width over the median"),
    Field("ci_target", "float", "the half-width aimed at (--ci-target / 100)"),
    Field("ci_target_met", "bool", "ci_half_width <= ci_target"),
    Field("peak_host_rss_bytes", "int", "peak resident memory of the process"),
    Field("peak_host_rss_scope", "str", "cell (the peak was reset before it) or process"),
    Field("malloc", "str", "glibc allocator setting in force"),
    Field("peak_device_bytes", "int | null", "peak device memory of the cell; null on the host"),
    Field("threads_requested", "int", "threads asked for"),
    Field(
        "threads_used",
        "float",
        "process CPU time over wall time during the timed rounds (with --data real, its "
        "loader worker processes' too)",
    ),
    *CONTENTION,
    *ENERGY,
    *REAL_DATA,
    Field("threads_config", "object", "CPUs allowed and what the framework reports it uses"),
    Field("versions", "object", "library and runtime versions"),
    Field("cpu_model", "str", "the CPU's model name, as the CPU reports it"),
    Field(
        "cpu_isa",
        "list",
        "the CPU's vector extensions that kernels choose by (avx2, avx512f, avx512_bf16, "
        "amx_tile, ...)",
    ),
    Field(
        "backend",
        "str",
        "the kernels that ran, as the framework reports them: ATen's CPU capability and "
        "oneDNN (PyTorch), oneDNN or Eigen (TensorFlow), XLA's CPU target (JAX), the "
        "execution provider (ONNX Runtime)",
    ),
    Field("weights_source", "str", "seed or onnx: where the initial weights came from"),
    Field(
        "...",
        "",
        "and the adapter's facts of how the cell ran (device_name, layout, "
        "precision settings, kernels), which differ by framework",
    ),
)

FIELDS: dict[str, tuple[Field, ...]] = {
    "train": NETWORK_CELL,
    "infer": NETWORK_CELL,
    "gemm": (
        Field("suite", "str", "gemm"),
        Field(
            "impl",
            "str",
            "the GEMM implementation (cupy, torch, jax, tensorflow, onnxruntime, numpy)",
        ),
        Field("framework", "str", "the same as impl"),
        Field("shape", "str", "the product's label (N, MxNxK or a layer)"),
        Field("m", "int", "rows of A and C"),
        Field("n", "int", "columns of B and C"),
        Field("k", "int", "the inner dimension"),
        Field("dtype", "str", "fp32, tf32, bf16, fp16 or fp8"),
        Field("precision", "str", "the same as dtype"),
        Field("device", "str", "cpu or cuda:N"),
        Field("threads", "int", "CPU threads"),
        Field("status", "str", "ok"),
        Field("seconds_per_call", "float", "median seconds per product"),
        Field("tflops", "float", "2 m n k / seconds_per_call / 1e12"),
        Field("peak_tflops", "float | null", "the device's datasheet peak for dtype, if known"),
        Field("peak_share", "float | null", "tflops / peak_tflops"),
        Field("share_of_best", "float | null", "tflops over the best implementation's"),
        Field("check_error", "float", "error of a checked block against float64"),
        Field("check_tolerance", "float", "the bound for dtype and k, derived in gemm/check.py"),
        *CONTENTION,
        *ENERGY,
        Field("gflops_per_joule", "float", "the products' GFLOP over energy_j, where measured"),
        Field("...", "", "and the timer, rounds, compile time, threads and versions"),
    ),
    "scaling": (
        Field("network", "str", "network id"),
        Field("framework", "str", "torch, jax or tensorflow"),
        Field("device", "str", "cpu or cuda"),
        Field("workers", "int", "data-parallel workers"),
        Field("scaling", "str", "strong (fixed global batch) or weak (fixed per-worker batch)"),
        Field("cell_id", "str", "the cell's test id"),
        Field("global_batch", "int", "samples per step over all workers"),
        Field("per_worker_batch", "int", "samples per step per worker"),
        Field("status", "str", "ok"),
        Field("seconds_per_batch", "float", "median seconds per global step"),
        Field("samples_per_s", "float", "global_batch / seconds_per_batch"),
        Field("speedup", "float | null", "against one worker of the same cell, when measured"),
        Field(
            "efficiency", "float | null", "speedup / workers (weak: per-worker throughput ratio)"
        ),
        Field("comm_share", "float | null", "share of the step spent in the gradient all-reduce"),
        Field("backend", "str", "gloo, nccl, XLA host devices, ..."),
        Field("replicas_agree", "bool", "every replica ended with the same weights"),
        Field("...", "", "and compile time, threads, versions, layout"),
    ),
    "allreduce": (
        Field("framework", "str", "torch or jax"),
        Field("backend", "str", "gloo, nccl or XLA"),
        Field("device", "str", "cpu or cuda"),
        Field("world_size", "int", "ranks"),
        Field("status", "str", "ok, or failed when a sum was wrong"),
        Field("stats_are", "str", "what the entry's stats time (the largest all-reduce)"),
        Field("rows", "list", "one per (pattern, bytes): seconds, algbw_gbps, busbw_gbps, correct"),
        Field("...", "", "and threads per rank, memory cap, sizes left out, versions"),
    ),
    "equivalence": (
        Field(
            "equivalence",
            "object",
            "network, framework, mode, device, precision, check (infer or train), "
            "verified, asserted (false: recorded only, as tf32), max_rel_err, tolerance, "
            "reference; train checks add the loss and "
            "weights errors, fp32_floor, near_ties, tie_allowance (docs/exchange.md)",
        ),
    ),
    "failure": (
        Field(
            "cell",
            "object",
            "the cell's fields (for a scaling or all-reduce cell, with its own kind)",
        ),
        Field("status", "str", "failed, timeout, killed, oom or skipped"),
        Field("reason", "str", "one line"),
        Field("output_tail", "str", "the last lines of the cell's output, when it ran"),
    ),
}


def render_markdown() -> str:
    lines = [
        "# Records",
        "",
        "Generated from `xfbench/records.py` by `python -m xfbench.records > docs/records.md`;",
        "a test fails when the two differ.",
        "",
        f"Every record carries `kind` (one of {', '.join(f'`{k}`' for k in KINDS)}) and",
        f"`schema_version` (now {SCHEMA_VERSION}). A network, GEMM, scaling, all-reduce or",
        "equivalence record is the `extra_info` of one pytest-benchmark entry; a failure",
        "record is a cell that gave no number, in a runner folder's `failed/` or under the",
        "top-level `xfbench` key of a JSON file. `xfbench report` reads records by their",
        "`kind`, reads files written before records carried one (version 0), and stops",
        "with one line at an unknown kind or a newer version.",
        "",
    ]
    done = set()
    for _kind, fields in FIELDS.items():
        if id(fields) in done:
            continue
        same = [k for k, f in FIELDS.items() if f is fields]
        done.add(id(fields))
        lines += [
            f"## {' and '.join(f'`{k}`' for k in same)}",
            "",
            "| field | type | meaning |",
            "|---|---|---|",
        ]
        lines += [
            f"| `{f.name}` | {f.type} | {f.meaning} |"
            if f.name != "..."
            else f"| ... | | {f.meaning} |"
            for f in fields
        ]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
