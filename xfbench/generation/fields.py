"""What a generation record holds (kind generation), declared with the suite
(generation/plugin.py); the compiled generator's fields, which token serving shares."""

from __future__ import annotations

from xfbench.harness.fields import CELL, CONTENTION, CUDAGRAPH_PROOF
from xfbench.records import PID, Field, replaced

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
    Field(
        "timed_version",
        "int",
        "the version of the code that timed it (generation/cell.py's TIMED; absent: 1)",
    ),
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
        "the first generation's prefill and first decode step, where each compiles, and its "
        "first-call work outside them (the torch loop mode's compilation and graph capture): "
        "its whole call less its later decode steps",
    ),
    Field(
        "first_generation_s",
        "float",
        "the whole first generation's call, wall clock (compilation and capture included)",
    ),
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
        "TPOT less the kernels' time, microseconds: launches, the host and waits between "
        "them; null where the kernels outlast TPOT (decode_step_split_note)",
    ),
    Field(
        "decode_step_split_note",
        "str | null",
        "why there is no gap though the kernels were profiled: their time exceeds TPOT (a "
        "share above 1, flagged in the report); null otherwise",
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
