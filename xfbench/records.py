"""What xfbench writes: the kinds of record, their fields, and the version of this schema.

Every record carries `kind` and `schema_version`. A record is the `extra_info` of one
pytest-benchmark entry (kinds train, infer, gemm, scaling, allreduce, equivalence,
serving, generation, token_serving), or a
failure record (kind failure: a cell that gave no number, in a runner folder's failed/
or under the top-level "xfbench" key of a JSON file). Writers stamp records with
`header(kind)`; readers ask `kind_of(record)`, which also reads files written before
records were typed (schema_version 0: the kind is inferred from the fields, as the
report always did) and refuses a record of an unknown kind or a newer version.

docs/records.md is rendered from FIELDS, and the results database's schema after them, by
`python -m xfbench.bundle.database > docs/records.md`; a test keeps them the same.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

SCHEMA_VERSION = 1
KINDS = (
    "train",
    "infer",
    "gemm",
    "scaling",
    "allreduce",
    "equivalence",
    "serving",
    "generation",
    "token_serving",
    "failure",
)
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
    # "" = in every record of the kind; else when it is written (a test holds both)
    when: str = ""
    # the keys of an object, or of each item of a list, where they are declared
    of: tuple[Field, ...] = ()


def keys(fields: tuple[Field, ...]) -> set[str]:
    return {f.name for f in fields}


def replaced(fields: tuple[Field, ...], *changed: Field) -> tuple[Field, ...]:
    """fields with those of the same names as changed replaced, in their order (by name,
    never by position: a field added to fields keeps its place)."""
    by_name = {f.name: f for f in changed}
    unknown = set(by_name) - keys(fields)
    if unknown:
        raise ValueError(f"no field named {', '.join(sorted(unknown))} to replace")
    return tuple(by_name.get(f.name, f) for f in fields)


def header(kind: str) -> dict:
    """The fields that say what a record is; every writer puts them first."""
    if kind not in known_kinds():
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
        if kind not in known_kinds():
            raise RecordError(f"unknown record kind {kind!r} (known: {', '.join(known_kinds())})")
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


# xfbench run --copies (harness/copies.py, runner/copies.py): each copy's own record
# (under copies/ in the results folder) and the cell's record made from them.
COPIES_WHEN = "xfbench run --copies"
COPY_OWN = "each copy's own record (--copies)"
COPIES = (
    Field("copy_index", "int", "which copy measured this record, from 0", when=COPY_OWN),
    Field(
        "copy_window_s",
        "list",
        "[start, end] of this copy's timed rounds, seconds since the epoch",
        when=COPY_OWN,
    ),
    Field(
        "copies", "int", "copies of the cell run at once, each its own process", when=COPIES_WHEN
    ),
    Field("copy_cpus", "list", "the CPUs each copy was pinned to", when=COPIES_WHEN),
    Field("copy_rounds", "list", "each copy's timed rounds, seconds", when=COPIES_WHEN),
    Field("copy_medians_s", "list", "each copy's median seconds per mini-batch", when=COPIES_WHEN),
    Field(
        "copy_windows_s",
        "list",
        "each copy's [start, end] of its timed rounds, seconds since the epoch",
        when=COPIES_WHEN,
    ),
    Field(
        "aggregate_samples_per_s",
        "float",
        "the copies' samples per second together: the sum of batch_size over each copy's median",
        when=COPIES_WHEN,
    ),
    Field(
        "copies_spread",
        "float",
        "(slowest - fastest copy's median) over the median of the copies' medians",
        when=COPIES_WHEN,
    ),
    Field(
        "copies_overlap",
        "float | null",
        "the least share, over the copies, of a copy's timed rounds during which every copy "
        "was running (timed, or stepping on after its own rounds until the last finished)",
        when=COPIES_WHEN,
    ),
    Field(
        "copies_together",
        "bool",
        "every copy started its timed rounds together (false: one waited in vain, 300 s)",
        when=f"{COPIES_WHEN}, and {COPY_OWN}",
    ),
)

# --data real (harness/measure.py): absent from synthetic-data records.
REAL = "--data real"
REAL_DATA = tuple(
    Field(name, type_, meaning, when=REAL)
    for name, type_, meaning in (
        ("data_set", "str", "mnist, cifar10, ptb or imagenet (data/sources.py)"),
        ("data_dir", "str", "the --data-dir it was read from"),
        ("data_samples", "int", "samples in the data set"),
        (
            "loader_workers",
            "int",
            "the input pipeline's workers (--data-workers; 0 for ONNX Runtime, which has none)",
        ),
        ("data_wait_s", "float", "median time a step waited for its batch from the pipeline"),
        ("data_wait_share", "float", "data_wait_s over the median whole step"),
        ("step_compute_s", "float", "median time of the rest: the copy to the device and the step"),
        ("samples_per_s_end_to_end", "float", "batch over the median whole step, waiting included"),
        (
            "samples_per_s_resident",
            "float",
            "batch over the median step on the last batch held on the device (5 steps)",
        ),
        ("input_bound", "bool", "data_wait_share above input_bound_share"),
        ("input_bound_share", "float", "the threshold, 0.10"),
        ("epoch_s", "float | null", "one epoch's time, where the timed rounds covered one"),
    )
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
    Field(
        "power_samples",
        "int",
        "the GPU's power readings integrated",
        when="energy_method nvml-power-sampling",
    ),
    Field(
        "gpu_state_start",
        "object",
        "the GPU's SM and memory clocks (MHz), temperature (C), enforced power limit (W) and "
        "throttle reasons when the timed rounds began (what NVML could read)",
        when="a GPU cell with NVML",
    ),
    Field("gpu_state_end", "object", "the same when the rounds ended", when="a GPU cell with NVML"),
)

# What proves a cudagraph cell's graphs replayed (adapters/torch/cudagraphs.py).
CUDAGRAPH_PROOF = (
    Field(
        "cudagraph_skips",
        "int",
        "Inductor's cudagraph skips (0: a skip fails the cell)",
        when="torch cudagraph",
    ),
    Field(
        "cudagraph_replays",
        "int",
        "CUDA graphs replayed by one more step (or generation), untimed, after the rounds",
        when="torch cudagraph",
    ),
)

# Set by the runner's pytest plugin (runner/plugin.py) on each entry it saw measured.
PID = Field("pid", "int", "id of the process that measured the entry", when="the runner's plugin")

CELL = (
    Field("network", "str", "network id (docs/models.md)"),
    Field("framework", "str", "the --framework value"),
    Field("mode", "str", "execution mode (eager, compile, function, xla, jit, ...)"),
    Field("precision", "str", "fp32, tf32, bf16, fp16, fp64 or int8"),
    Field("device", "str", "cpu, cuda:N or tpu:N"),
    Field("threads", "int", "CPU threads the process was pinned to"),
    Field("batch_size", "int", "mini-batch size"),
    Field("task", "str", "train or infer"),
    Field(
        "data", "str", "resident (the batch stays on the device) or copied (copied in each step)"
    ),
    Field("scale", "str", "full (the paper's network) or smoke (the tests' smaller one)"),
    Field("tokens", "int | null", "a transformer's sequence length; null for the others"),
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
INT8 = "precision int8 (torch, onnxruntime)"
# How the cell ran, as its adapter reports it (Workload.info and compile_facts()); `when`
# names the frameworks that write each.
ADAPTER = (
    Field("device_name", "str", "the device's name (cpu on the host; none for null)"),
    Field("layout", "str", "the image tensors' layout (NCHW, NHWC) or n/a"),
    Field(
        "layer_dtypes",
        "object",
        "the dtypes the step's products and convolutions take, read from its program",
        when="torch, jax, tensorflow",
    ),
    Field("lstm_kernel", "str", "what runs the LSTM, or n/a", when="torch, jax, tensorflow"),
    Field(
        "attention_kernel",
        "str",
        "what ran the transformers' attention (PyTorch: the scaled_dot_product_attention "
        "backend its probe saw; JAX: dot_product_attention's implementation), or n/a",
        when="torch, jax, tensorflow",
    ),
    Field(
        "vocab_padded_to",
        "int",
        "the word matrix's rows, padded as llm.c pads GPT-2's (the padded logits masked: "
        "the same function)",
        when="torch training GPT-2 on a GPU",
    ),
    Field(
        "loss_kernel",
        "str",
        "how the loss ran where not as F.cross_entropy over the whole batch's logits",
        when="torch training GPT-2 on a GPU",
    ),
    Field(
        "optimizer",
        "str",
        "the update that ran: SGD with momentum, or AdamW, and its implementation",
        when="torch, jax, tensorflow (training)",
    ),
    Field("loss_scale", "str", "the fp16 loss scaling, or none", when="torch, jax, tensorflow"),
    Field(
        "backend",
        "str",
        "the kernels that ran, as the framework reports them: ATen's CPU capability and "
        "oneDNN (PyTorch), oneDNN or Eigen (TensorFlow), XLA's CPU target (JAX), the "
        "execution provider (ONNX Runtime)",
        when="torch, jax, tensorflow, onnxruntime",
    ),
    Field(
        "onednn",
        "bool",
        "whether oneDNN takes the convolutions (PyTorch) or the CPU kernels (TensorFlow)",
        when="torch on the CPU, tensorflow",
    ),
    Field("fp32_precision", "object", "PyTorch's fp32_precision settings", when="torch"),
    Field("cudnn_benchmark", "bool", "torch.backends.cudnn.benchmark", when="torch"),
    Field(
        "aten_cpu_capability", "str", "the ISA ATen's kernels dispatch for", when="torch on the CPU"
    ),
    Field("blas", "str", "the GEMM library PyTorch calls", when="torch on the CPU"),
    Field(
        "inductor_vec_isa",
        "str",
        "the vector ISA Inductor's C++ code is built for",
        when="torch compiled on the CPU",
    ),
    Field(
        "inductor_weight_prepack",
        "bool",
        "Inductor's cpp.weight_prepack setting",
        when="torch compiled on the CPU",
    ),
    Field(
        "inductor_freezing",
        "bool",
        "Inductor's freezing (weights as constants, BatchNorm folded): inference cells",
        when="torch compiled on the CPU",
    ),
    Field(
        "inductor_cpp_wrapper",
        "bool",
        "Inductor's C++ wrapper between kernels: inference cells",
        when="torch compiled on the CPU",
    ),
    Field("compiled_graphs", "int", "graphs Dynamo compiled", when="torch compiled"),
    Field("graph_breaks", "int", "Dynamo's graph breaks", when="torch compiled"),
    Field(
        "graph_break_reasons", "list", "the breaks' reasons, one line each", when="torch compiled"
    ),
    *CUDAGRAPH_PROOF,
    Field("jax_device", "str", "JAX's name of the device", when="jax"),
    Field("xla_cpu_target", "object", "the CPU and ISA XLA compiles for", when="jax on the CPU"),
    Field("compute_dtype", "str", "the dtype the layers compute in", when="jax, tensorflow"),
    Field(
        "matmul_precision",
        "str",
        "the products' precision asked of XLA",
        when="jax, tensorflow on a TPU",
    ),
    Field("tf32", "bool", "TensorFlow's TF32 execution setting", when="tensorflow"),
    Field("batchnorm_kernel", "str", "the batch norm's kernel, or n/a", when="tensorflow"),
    Field(
        "tensorflow_param_count",
        "int",
        "parameters as Keras counts them",
        when="tensorflow",
    ),
    Field(
        "lstm_bias",
        "str",
        "how the LSTM's two bias halves map onto Keras's one",
        when="tensorflow, LSTM",
    ),
    Field(
        "strategy", "str", "the distribution strategy and its replicas", when="tensorflow on a TPU"
    ),
    Field("tpu_device", "str", "TensorFlow's name of the TPU core", when="tensorflow on a TPU"),
    Field("tpu_cores", "int", "cores of the TPU system", when="tensorflow on a TPU"),
    Field("tpu_mesh_shape", "str", "the TPU system's mesh, e.g. 2x2x1", when="tensorflow on a TPU"),
    Field(
        "tpu_core_coordinates",
        "list",
        "the mesh coordinates of the core used",
        when="tensorflow on a TPU",
    ),
    Field("execution_provider", "str", "the provider that ran", when="onnxruntime"),
    Field("session_providers", "list", "the session's providers, in order", when="onnxruntime"),
    Field(
        "graph_optimization_level", "str", "the session's graph optimization", when="onnxruntime"
    ),
    Field("intra_op_num_threads", "int", "the session's intra-op threads", when="onnxruntime"),
    Field("inter_op_num_threads", "int", "the session's inter-op threads", when="onnxruntime"),
    Field("io_binding", "bool", "inputs and outputs bound to the device", when="onnxruntime"),
    Field(
        "cuda_use_tf32",
        "bool | null",
        "the CUDA provider's use_tf32; null on the CPU",
        when="onnxruntime",
    ),
    Field("onnx_opset", "int", "the graph's opset", when="onnxruntime"),
    Field(
        "fused_operators",
        "object",
        "fused operator -> how many the transformer optimizer made (the fused mode)",
        when="onnxruntime, mode fused",
    ),
    Field(
        "int8_logits_rel_err",
        "float | null",
        "the int8 logits' distance from fp32's on the check samples: |q - f| / |f| (Frobenius)",
        when=INT8,
    ),
    Field(
        "int8_top1_agreement",
        "float",
        "share of check samples (and positions) whose top class is fp32's",
        when=INT8,
    ),
    Field(
        "int8_check_samples", "int", "synthetic samples of the check (adapters/int8.py)", when=INT8
    ),
    Field("int8_quantization", "object", "how the network was quantized", when=INT8),
    Field(
        "int8_cpu_isa",
        "str",
        "the int8 dot-product instructions the CPU offers, which the kernels dispatch to: "
        "AMX-INT8, AVX-512 VNNI, AVX-VNNI, or 'no VNNI or AMX' (ONEDNN_MAX_CPU_ISA can lower "
        "oneDNN's)",
        when=INT8,
    ),
    Field(
        "int8_quantize_nodes",
        "int",
        "quantize and dequantize nodes of the converted graph",
        when="torch, precision int8",
    ),
)
NETWORK_CELL = CELL + (
    Field("preset", "str", "the preset that chose warm-up and rounds"),
    Field("status", "str", "ok"),
    Field("seconds_per_batch", "float", "median seconds per mini-batch: stats.median"),
    Field("samples_per_s", "float", "batch_size / seconds_per_batch"),
    Field(
        "tokens_per_s",
        "float | null",
        "batch_size x tokens / seconds_per_batch (token models); null for the others",
    ),
    Field("flops_per_step", "int", "analytic FLOPs of one step (training: 3x the forward)"),
    Field("achieved_tflops", "float", "flops_per_step / seconds_per_batch / 1e12"),
    Field(
        "mfu",
        "float | null",
        "model FLOPs utilisation: achieved_tflops over mfu_peak_tflops (roofline/mfu.py)",
        when="train, in a run's merged results",
    ),
    Field(
        "mfu_peak_tflops",
        "float | null",
        "the peak the run measured for the cell's precision where it ran (roofs.json)",
        when="train, in a run's merged results",
    ),
    Field(
        "mfu_reason",
        "str | null",
        "why mfu is null (no roofs, or no peak of that precision, there); null otherwise",
        when="train, in a run's merged results",
    ),
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
    *COPIES,
    Field("threads_config", "object", "CPUs allowed and what the framework reports it uses"),
    Field("versions", "object", "library and runtime versions"),
    Field("cpu_model", "str", "the CPU's model name, as the CPU reports it"),
    Field(
        "cpu_isa",
        "list",
        "the CPU's vector extensions that kernels choose by (avx2, avx512f, avx512_bf16, "
        "amx_tile, ...)",
    ),
    Field("weights_source", "str", "seed or onnx: where the initial weights came from"),
    *ADAPTER,
    PID,
    Field(
        "layer_times",
        "list",
        "each top-level spec layer's median forward_s and backward_s (null for inference) "
        "over 3 profiled steps after the timed rounds, in the spec's order, then "
        '"(outside layers)": the rest of the step (roofline/layers.py)',
        when="--profile-layers, where the framework is profiled per layer",
    ),
    Field(
        "layer_times_reason",
        "str",
        "why the cell's layers were not timed",
        when="--profile-layers, where the framework is not profiled per layer",
    ),
)

# GEMM fields written only when the product was right (a wrong one stops before timing).
OK = "status ok"
GEMM = (
    Field("suite", "str", "gemm"),
    Field("task", "str", "gemm"),
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
    Field("preset", "str", "the preset that chose warm-up and rounds"),
    Field("call", "str", "the library call timed (e.g. torch.matmul, torch._scaled_mm)"),
    Field("device_name", "str", "the device's name"),
    Field("flops_per_call", "int", "2 m n k"),
    Field("status", "str", "ok, or failed when the product was wrong"),
    Field("reason", "str", "why the product was wrong", when="status failed"),
    Field("check_error", "float", "error of a checked block against float64"),
    Field("check_tolerance", "float", "the bound for dtype and k, derived in gemm/check.py"),
    Field("check_block", "list", "[rows, columns] of the block of C checked"),
    Field("compile_s", "float", "seconds of the first product: compilation, autotuning, check"),
    Field(
        "input_sets",
        "int",
        "distinct (A, B) pairs cycled through, so no product reuses a cached operand",
    ),
    Field("threads_requested", "int", "threads asked for"),
    Field("threads_config", "object", "CPUs allowed and what the library reports it uses"),
    Field("versions", "object", "library and runtime versions"),
    Field("tf32_mode", "str", "the implementation's TF32 setting, or n/a"),
    Field(
        "fp16_reduced_precision_reduction",
        "bool",
        "whether cuBLAS may reduce fp16 split-K sums in fp16",
        when="torch",
    ),
    Field(
        "bf16_reduced_precision_reduction",
        "bool",
        "whether cuBLAS may reduce bf16 split-K sums in bf16",
        when="torch",
    ),
    Field("fp8", "str", "the fp8 operand and output types and scaling", when="torch, fp8"),
    Field("seconds_per_call", "float", "median seconds per product", when=OK),
    Field("tflops", "float", "2 m n k / seconds_per_call / 1e12", when=OK),
    Field(
        "peak_tflops",
        "float | null",
        "the device's datasheet peak for dtype, if known",
        when=OK,
    ),
    Field("peak_share", "float | null", "tflops / peak_tflops", when=OK),
    Field(
        "share_of_best",
        "float | null",
        "tflops over the best implementation's (filled in at the session's end)",
        when=OK,
    ),
    Field(
        "timer",
        "str",
        "what timed the rounds: perf_counter (pytest-benchmark) on the CPU, else the "
        "implementation's device timer",
        when=OK,
    ),
    Field("calls_per_round", "int", "products per timed round (1 on the CPU)", when=OK),
    Field("rounds", "int", "timed rounds", when=OK),
    Field("warmup_rounds", "int", "untimed rounds before them", when=OK),
    Field("threads_used", "float", "process CPU time over wall time in the timed rounds", when=OK),
    *(
        Field(f.name, f.type, f.meaning, when=f"{OK}, {f.when}" if f.when else OK)
        for f in CONTENTION + ENERGY
    ),
    Field(
        "gflops_per_joule",
        "float",
        "the products' GFLOP over energy_j",
        when="energy measured",
    ),
    PID,
)

# Written by the scaling workers (scaling/torch_ddp.py, jax_sharding.py, ...), when they say.
WORKER = "the worker reports it"
SCALING = (
    Field("network", "str", "network id"),
    Field("framework", "str", "torch, jax or tensorflow"),
    Field("device", "str", "cpu or cuda"),
    Field("workers", "int", "data-parallel workers"),
    Field("scaling", "str", "strong (fixed global batch) or weak (fixed per-worker batch)"),
    Field("batch", "int", "the --batch-size the cell was given (global or per worker)"),
    Field("threads_per_worker", "int", "CPU threads of each worker"),
    Field("precision", "str", "fp32, tf32, bf16 or fp16"),
    Field("scale", "str", "full or smoke"),
    Field("cell_id", "str", "the cell's test id"),
    Field("global_batch", "int", "samples per step over all workers"),
    Field("per_worker_batch", "int", "samples per step per worker"),
    Field("preset", "str", "the preset that chose warm-up and rounds"),
    Field("status", "str", "ok"),
    Field("seconds_per_batch", "float", "median seconds per global step"),
    Field("samples_per_s", "float", "global_batch / seconds_per_batch"),
    Field("speedup", "float | null", "against one worker of the same cell, when measured"),
    Field("efficiency", "float | null", "speedup / workers (weak: per-worker throughput ratio)"),
    Field("speedup_baseline", "str | null", "the cell_id of the one-worker cell compared with"),
    Field("flops_per_step", "int", "analytic FLOPs of one global training step"),
    Field("achieved_tflops", "float", "flops_per_step / seconds_per_batch / 1e12"),
    Field("rounds", "int", "timed steps"),
    Field("backend", "str", "gloo, nccl, XLA host devices, ...", when=WORKER),
    Field(
        "comm_share",
        "float | null",
        "share of the step spent in the gradient all-reduce",
        when=WORKER,
    ),
    Field("comm_share_how", "str", "how comm_share was measured, or why not", when=WORKER),
    Field("compile_s", "float", "seconds of compilation and the first step", when=WORKER),
    Field("warmup_steps", "int", "untimed steps", when=WORKER),
    Field("replicas_agree", "bool", "every replica ended with the same weights", when=WORKER),
    Field("replicas_max_diff", "float", "the largest difference between replicas", when=WORKER),
    Field("loss", "float", "the last step's loss, averaged over workers", when=WORKER),
    Field("threads_used", "float", "CPU time over wall time of the workers", when=WORKER),
    Field("threads_config", "object", "what the framework reports it uses", when=WORKER),
    Field("device_name", "str", "the device's name", when=WORKER),
    Field("versions", "object", "library and runtime versions", when=WORKER),
    Field("layout", "str", "the image tensors' layout, or n/a", when=WORKER),
    Field("mode", "str", "execution mode", when=WORKER),
    Field("cpus", "list | null", "the CPUs each worker was pinned to; null on GPUs", when=WORKER),
    Field("sharding", "str", "how the batch and weights are sharded", when="jax"),
    PID,
)

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

# The generation suite (xfbench/generation): GPT-2 decoding B prompts of ISL tokens into
# OSL new ones with a key/value cache.
TOKEN_CHECK = (
    Field(
        "verified",
        "bool",
        "every new token is the reference's choice (or within the margin) and the logits "
        "are the reference's within the tolerance",
    ),
    Field(
        "tokens_checked",
        "int",
        "new tokens checked (the sequences checked x new tokens)",
    ),
    Field(
        "sequences_checked",
        "list",
        "the rows of the batch checked: the first and the last (the check's cost does not "
        "grow with the batch)",
    ),
    Field(
        "worst_gap",
        "float",
        "the largest (reference's best logit - the chosen token's) over that position's "
        "largest |logit|",
    ),
    Field("near_ties", "int", "positions whose reference top two are within the margin"),
    Field("margin", "float", "the gap allowed, of a position's largest |logit|"),
    Field("reference", "str", "what the tokens were checked against"),
    Field("first_divergence", "object | null", "where a token first broke the margin"),
    Field("tokens_verified", "bool", "the tokens rule held"),
    Field(
        "logits_rel_err",
        "float",
        "the logits the framework computed through its cache at every step, from the "
        "reference's (max |difference| over max |reference|)",
    ),
    Field("logits_tolerance", "float", "the bound logits_rel_err is held to"),
)
TORCH_COMPILED = "torch compile or cudagraph"
# What a generator reports of how it ran and what it compiled (adapters' generation.py).
GENERATOR_COMPILED = (
    Field("compiled_graphs", "int", "graphs Dynamo compiled", when=TORCH_COMPILED),
    Field("graph_breaks", "int", "Dynamo's graph breaks (0)", when=TORCH_COMPILED),
    Field(
        "compile_mode",
        "str",
        "torch.compile's mode (on the CPU: max-autotune in fp32, default in bf16)",
        when=TORCH_COMPILED,
    ),
    *CUDAGRAPH_PROOF,
    Field(
        "compilations",
        "object",
        "jit's compilations of prefill and decode, or of the loop mode's loop (1 each)",
        when="jax",
    ),
    Field(
        "lowered_precisions",
        "object",
        "each step's products and convolutions by the precision its lowered program gives "
        "XLA ({prefill: {HIGHEST: n}}): fp32 all HIGHEST, tf32 all HIGH",
        when="jax",
    ),
    Field(
        "traces",
        "object",
        "tf.function's traces of prefill and decode (1 each)",
        when="tensorflow function, xla",
    ),
)
GENERATOR_INFO = (
    Field("device_name", "str", "the device's name (cpu on the host)"),
    Field("attention_kernel", "str", "what ran attention in prefill and decode"),
    Field("cache_write", "str", "how a step writes the cache"),
    Field(
        "decode_products",
        "str",
        "how a decode step's products are written: linear (addmm) or mm + bias, which "
        "Inductor fuses into a reduction at batch 1 on a GPU",
        when="torch",
    ),
    Field(
        "decode_step_inputs",
        "str",
        "what the host hands each decode step (none: token, position and output on the device)",
        when="torch",
    ),
    Field(
        "fullgraph", "bool", "torch.compile's fullgraph (a graph break fails)", when=TORCH_COMPILED
    ),
    Field(
        "coordinate_descent_tuning",
        "bool",
        "Inductor's coordinate-descent tuning of its kernels (on a GPU)",
        when=TORCH_COMPILED,
    ),
    Field(
        "decode_steps_per_graph",
        "int",
        "decode steps in the one CUDA graph the loop mode replays a generation",
        when="torch loop",
    ),
    Field(
        "weights_dtype",
        "str",
        "the dtype the decoder's weights are held in (bfloat16 in a bf16 cell)",
        when="torch, jax",
    ),
    Field("cache_dtype", "str", "the dtype of the key/value cache", when="torch, jax"),
    Field(
        "matmul_precision",
        "str",
        "jax_default_matmul_precision the steps are traced under",
        when="jax",
    ),
    Field("backend", "str", "what the framework ran on", when="jax, tensorflow, onnxruntime"),
    Field("xla_cpu_target", "object", "the CPU and ISA XLA compiles for", when="jax on the CPU"),
    Field("onednn", "bool", "TensorFlow runs oneDNN's CPU kernels", when="tensorflow"),
    Field("inductor_freezing", "bool", "Inductor's freezing", when="torch compile on the CPU"),
    Field(
        "inductor_cpp_wrapper", "bool", "Inductor's C++ wrapper", when="torch compile on the CPU"
    ),
    Field(
        "inductor_weight_prepack",
        "bool",
        "Inductor's prepacked linear weights",
        when="torch compile on the CPU",
    ),
    Field(
        "inductor_gemm_backends",
        "str",
        "what max-autotune chose GEMMs among",
        when="torch compile on the CPU in fp32 (max-autotune)",
    ),
    Field("execution_provider", "str", "the provider that ran", when="onnxruntime"),
    Field(
        "graph_optimization_level", "str", "the session's optimization level", when="onnxruntime"
    ),
    Field("intra_op_num_threads", "int", "the session's intra-op threads", when="onnxruntime"),
    Field("inter_op_num_threads", "int", "the session's inter-op threads", when="onnxruntime"),
    Field("io_binding", "bool", "the cache and outputs bound once", when="onnxruntime"),
    Field("onnx_opset", "int", "the decoder graph's opset", when="onnxruntime"),
)
GENERATION = replaced(
    CELL,
    Field("task", "str", "generate"),
    Field("batch_size", "int", "sequences decoded together (a static batch)"),
    Field("data", "str", "resident (the prompt's token ids, drawn from the seed)"),
    Field("tokens", "null", "unused (prompt_tokens and new_tokens say the lengths)"),
) + (
    Field("prompt_tokens", "int", "ISL: tokens of each prompt"),
    Field("new_tokens", "int", "OSL: tokens each sequence decodes (greedy, no stop token)"),
    Field("preset", "str", "the preset that chose warm-up and timed generations"),
    Field("status", "str", "ok"),
    Field("ttft_s", "float", "time to first token: the prefill, median over generations"),
    Field("ttft_min_s", "float", "the least TTFT"),
    Field("ttft_max_s", "float", "the greatest TTFT"),
    Field("tpot_s", "float", "time per output token: (e2e - TTFT) / (OSL - 1), median"),
    Field("tpot_min_s", "float", "the least TPOT"),
    Field("tpot_max_s", "float", "the greatest TPOT"),
    Field("e2e_s", "float", "a whole generation, prefill and every decode step, median"),
    Field("itl_p50_s", "float", "the decode steps' times (gaps), pooled: median"),
    Field("itl_p90_s", "float", "their 90th percentile"),
    Field("itl_p99_s", "float", "their 99th percentile"),
    Field("itl_max_s", "float", "the longest"),
    Field("output_tokens_per_s", "float", "batch x OSL / e2e"),
    Field("total_tokens_per_s", "float", "batch x (ISL + OSL) / e2e"),
    Field("decode_tokens_per_s", "float", "batch / TPOT"),
    Field("per_sequence_tokens_per_s", "float", "1 / TPOT: one sequence's (one user's) rate"),
    Field("prefill_tokens_per_s", "float", "batch x ISL / TTFT"),
    Field(
        "output_tokens_per_s_ci",
        "list",
        "[low, high]: the median's interval over the timed generations (harness/stats.py)",
    ),
    Field("per_sequence_tokens_per_s_ci", "list", "[low, high] of 1 / TPOT, likewise"),
    Field(
        "ci_coverage",
        "float",
        "the intervals' coverage: order statistics over the generations (3 give 75 %)",
    ),
    Field("generations", "int", "timed generations (pytest-benchmark's rounds)"),
    Field("warmup_generations", "int", "untimed generations after the first"),
    Field(
        "repeat_identical",
        "bool",
        "every timed generation and the checked one decoded the first's tokens",
    ),
    Field(
        "token_check", "object", "the second generation's tokens and logits checked", of=TOKEN_CHECK
    ),
    Field("check_s", "float", "seconds of that generation and its check (outside every timing)"),
    Field("weights", "str", "the weights decoded with"),
    Field("build_s", "float", "seconds to build the decoder and allocate the cache"),
    Field(
        "compile_s",
        "float",
        "the first generation's prefill and first decode step: where each compiles",
    ),
    Field("first_generation_s", "float", "the whole first generation"),
    Field(
        "decode_loop",
        "str",
        "where the decode loop ran: on the device, the host reading the tokens once a "
        "generation and each step timed on the device's clock (CUDA events; JAX's loop "
        "mode: one program, its steps' mean), or from the host, tokens read every step",
    ),
    Field(
        "kernels_per_decode_step",
        "int | null",
        "device kernels one decode step launched, by the profiler (PyTorch on a GPU)",
    ),
    Field(
        "decode_step_kernel_us",
        "float | null",
        "those kernels' device time in all, microseconds: against the step's TPOT, the "
        "share the kernels hold and the share their launches do",
    ),
    Field(
        "decode_step_kernels",
        "list | null",
        "the costliest of them by name, [{name, calls, us}], at most 8",
    ),
    Field(
        "decode_step_kernel_share",
        "float | null",
        "decode_step_kernel_us over TPOT: the share of a step its kernels hold",
    ),
    Field(
        "decode_step_gap_us",
        "float | null",
        "TPOT less the kernels' time, microseconds: launches, the host and waits between them",
    ),
    Field(
        "decode_profile_reason",
        "str | null",
        "why the kernel fields are null (the CPU, or a framework not profiled); null otherwise",
    ),
    *GENERATOR_COMPILED,
    Field("param_count", "int", "parameters of the network"),
    Field("weights_bytes", "int", "the parameters' bytes at the cell's precision (4 or 2 a value)"),
    Field("cache_bytes", "int", "the key/value cache as allocated, every layer"),
    Field("cache_share_of_peak", "float | null", "cache_bytes over the peak memory"),
    Field(
        "decode_bytes_per_step",
        "int",
        "bytes a decode step reads at least: every weight once and the whole cache",
    ),
    Field("layers", "int", "transformer blocks"),
    Field(
        "peak_host_rss_bytes",
        "int",
        "peak resident memory from the build to the last timed generation (before the check)",
    ),
    Field("peak_host_rss_scope", "str", "cell or process"),
    Field("peak_device_bytes", "int | null", "peak device memory (null on the host)"),
    Field("threads_requested", "int", "threads asked for"),
    Field("threads_used", "float", "CPU time over wall time during the timed generations"),
    *CONTENTION,
    Field("threads_config", "object", "the thread settings in force"),
    Field("versions", "object", "library versions"),
    Field("cpu_model", "str", "the CPU's model name"),
    Field("cpu_isa", "list", "the CPU's ISA extensions"),
    Field("energy_method", "str", "how energy was read, or none"),
    Field("energy_reason", "str | null", "why there is no energy reading"),
    Field("energy_j", "float | null", "joules over the timed generations"),
    Field("energy_per_generation_j", "float | null", "joules per generation"),
    Field("joules_per_token", "float | null", "joules per output token"),
    Field("energy_domains", "object | null", "joules per RAPL domain"),
    *GENERATOR_INFO,
    PID,
)

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
    Field("compile_s", "float", "every bucket's first prefill and decode step, before load"),
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

TRAIN = "train"
FP64 = "train-fp64"
EQUIVALENCE = (
    Field("network", "str", "network id"),
    Field("framework", "str", "torch, tensorflow or jax"),
    Field("mode", "str", "execution mode"),
    Field("device", "str", "cpu or cuda:N", when="infer, train"),
    Field("precision", "str", "fp32 or tf32 (train-fp64: fp64)"),
    Field("check", "str", "infer, train or train-fp64"),
    Field("seed", "int", "the canonical weights' seed"),
    Field("scale", "str", "full or smoke"),
    Field("batch_size", "int", "batch checked"),
    Field("verified", "bool", "max_rel_err within tolerance"),
    Field("asserted", "bool", "false: recorded only, as tf32", when="infer, train"),
    Field("max_rel_err", "float", "the largest relative error of the checks"),
    Field("worst_tensor", "str", "the tensor it is in"),
    Field("tolerance", "float", "the bound (harness/equivalence.py)"),
    Field("reference", "str", "what it was compared with"),
    Field("loss", "float", "the framework's loss", when=TRAIN),
    Field("float64_loss", "float", "the float64 step's loss", when=TRAIN),
    Field("loss_rel_err", "float", "the loss's relative error", when=f"{TRAIN}, {FP64}"),
    Field("weights_rel_err", "float", "the updated weights' relative error", when=TRAIN),
    Field("weights_tolerance", "float", "the updated weights' bound", when=TRAIN),
    Field("fp32_floor", "float", "a plain fp32 step's distance from float64", when=TRAIN),
    Field(
        "near_ties", "int", "ReLU and max-pool decisions within fp32's error of a tie", when=TRAIN
    ),
    Field("tie_allowance", "float", "what those ties are allowed", when=TRAIN),
    Field("worst_single_tensor", "str", "the weight tensor with the largest error", when=TRAIN),
    Field("worst_tensor_rel_err", "float", "its relative error", when=TRAIN),
    Field(
        "update_rel_err", "float", "the update's (w1 - w0) relative error", when=f"{TRAIN}, {FP64}"
    ),
    Field("logits_rel_err", "float", "the logits' relative error", when=FP64),
    Field("worst_update_tensor", "str", "the tensor of the largest update error", when=FP64),
    Field("closest_tie", "float", "the float64 reference's nearest decision to a tie", when=FP64),
)

FIELDS: dict[str, tuple[Field, ...]] = {
    "train": NETWORK_CELL,
    "infer": NETWORK_CELL,
    "gemm": GEMM,
    "scaling": SCALING,
    "allreduce": ALLREDUCE,
    "serving": SERVING,
    "generation": GENERATION,
    "token_serving": TOKEN_SERVING,
    "equivalence": (
        Field(
            "equivalence",
            "object",
            "one check of a framework against the reference (docs/exchange.md)",
            of=EQUIVALENCE,
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


# Kinds a suite outside this file declares with its fields (plugin.Suite's `kind` and
# `fields`), known once its plugin is imported.
DECLARED: dict[str, tuple[Field, ...]] = {}


def declare_kind(kind: str, fields: tuple[Field, ...]) -> None:
    """A suite's own record kind: written with header(kind), read by kind_of, its fields
    FIELDS[kind]. A kind of its own name twice is refused (one line)."""
    if kind in KINDS or DECLARED.get(kind, fields) != fields:
        raise ValueError(f"record kind {kind!r} is declared already")
    DECLARED[kind] = FIELDS[kind] = fields


def known_kinds() -> tuple[str, ...]:
    return KINDS + tuple(DECLARED)


def render_markdown() -> str:
    lines = [
        "# Records",
        "",
        "Generated from `xfbench/records.py` and `xfbench/bundle/database.py` by",
        "`python -m xfbench.bundle.database > docs/records.md`; a test fails when they differ.",
        "",
        f"Every record carries `kind` (one of {', '.join(f'`{k}`' for k in KINDS)}) and",
        f"`schema_version` (now {SCHEMA_VERSION}). A network, GEMM, scaling, all-reduce or",
        "equivalence record is the `extra_info` of one pytest-benchmark entry; a failure",
        "record is a cell that gave no number, in a runner folder's `failed/` or under the",
        "top-level `xfbench` key of a JSON file. `xfbench report` reads records by their",
        "`kind`, reads files written before records carried one (version 0), and stops",
        "with one line at an unknown kind or a newer version.",
        "",
        "A record holds no field but these; `written` says which are in every record of",
        "its kind and when the others are (a test writes each kind and holds it to this).",
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
            "| field | type | written | meaning |",
            "|---|---|---|---|",
        ]
        lines += _rows(fields, "")
        lines.append("")
    return "\n".join(lines)


def _rows(fields: tuple[Field, ...], prefix: str) -> list[str]:
    out = []
    for f in fields:
        type_ = f.type.replace("|", "\\|")  # a bare | would split the table's cell
        out.append(f"| `{prefix}{f.name}` | {type_} | {f.when or 'always'} | {f.meaning} |")
        # a list's items are named name[].key, an object's name.key
        out += _rows(f.of, f"{prefix}{f.name}{'[]' if f.type == 'list' else ''}.")
    return out


# -- reading a record's values: what a file holds may be anything ---------------------------
def number(value) -> float | None:
    """A finite number, else None (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def count(value) -> int | None:
    """A whole number from 0 below 2**62, else None."""
    found = number(value)
    return (
        int(found)
        if found is not None and found >= 0 and found == int(found) and found < 2**62
        else None
    )


def one_line(text) -> str:
    """A reason as one line, whatever was written."""
    return " ".join(str(text or "no reason recorded").split())


if __name__ == "__main__":
    sys.stdout.write(render_markdown())  # the records alone; docs/records.md adds the database
