"""What a scaling record holds (kind scaling), declared with the suite (scaling/plugin.py)."""

from __future__ import annotations

from xfbench.records import PID, Field

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
