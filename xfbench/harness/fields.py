"""What a record of one network cell holds (kinds train and infer), the groups of those
fields that other suites' records share (the cell, the adapter's facts, contention, energy,
copies, real data), and an equivalence check's fields (kind equivalence). The network suite
declares the kinds to xfbench/records.py (xfbench/plugin.py)."""

from __future__ import annotations

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
        "CUDA graphs replayed by one more step (or run of the generator), untimed, after the rounds",
        when="torch cudagraph",
    ),
)

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
    Field("loss_scale", "str", "the fp16 loss scale, or none", when="torch, jax, tensorflow"),
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
    Field("blas", "str", "the BLAS library PyTorch calls", when="torch on the CPU"),
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
