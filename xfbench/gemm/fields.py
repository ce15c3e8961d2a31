"""What a GEMM record holds (kind gemm), declared with the suite (gemm/plugin.py)."""

from __future__ import annotations

from xfbench.harness.fields import CONTENTION, ENERGY
from xfbench.records import PID, Field

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


def older(record: dict) -> bool:
    """A GEMM record written before records carried their kind."""
    return ("implementation" in record or record.get("suite") == "gemm") and "tflops" in record
