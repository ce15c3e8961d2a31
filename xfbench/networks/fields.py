"""What a record of one network cell holds (kinds train and infer: the cell, the adapter's
facts, contention, energy, copies, real data) and an equivalence check's fields (kind
equivalence): Table 7's network suite's records, which it declares to xfbench/records.py
(xfbench/networks/plugin.py)."""

from __future__ import annotations

from xfbench.harness.fields import ADAPTER, CELL, CONTENTION, ENERGY
from xfbench.records import PID, Field

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
    Field(
        "mfu_datasheet",
        "float | null",
        "MFU as PaLM and llm.c report it: the model's FLOPs (mfu_datasheet_flops) over the "
        "datasheet's dense peak for the precision (roofline/mfu.py); null on the CPU",
        when="train on a GPU, in a run's merged results",
    ),
    Field(
        "mfu_datasheet_peak_tflops",
        "float | null",
        "that datasheet peak (published.toml)",
        when="train on a GPU, in a run's merged results",
    ),
    Field(
        "mfu_datasheet_flops",
        "str | null",
        "how its FLOPs were counted: a transformer's 6N + 6LCT a token (llm.c; 12LCT "
        "bidirectional), else 3x the forward",
        when="train on a GPU, in a run's merged results",
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

# A record of kind equivalence holds one check.
EQUIVALENCE_RECORD = (
    Field(
        "equivalence",
        "object",
        "one check of a framework against the reference (docs/exchange.md)",
        of=EQUIVALENCE,
    ),
)


def older_network(task: str):
    """Recognises a network record of `task` written before records carried their kind."""
    infer = task == "infer"
    return lambda record: (
        "network" in record and "framework" in record and (record.get("task") == "infer") == infer
    )


def older_equivalence(record: dict) -> bool:
    """An equivalence record written before records carried their kind."""
    return "equivalence" in record
