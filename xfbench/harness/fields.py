"""The groups of fields that the suites' records share: a cell's (network, framework,
mode, precision, device, threads, ...), the adapter's facts, contention, energy, a CUDA
graph's proof. Each suite's own fields are in its package's fields.py (Table 7's network
suite's in xfbench/networks/fields.py)."""

from __future__ import annotations

from xfbench.records import Field

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
        "AMX-INT8, AVX-512 VNNI, AVX-VNNI, I8MM (SMMLA), dot product (SDOT), 'no VNNI, AMX or SDOT', or unknown (ONEDNN_MAX_CPU_ISA can lower "
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
