"""The generation suite's steps of the GPU acceptance plan (xfbench/acceptance/steps.py runs
them): GPT-2's decoding in the first part, at batch 1, 8 and 64 in parts of their own (one
a precision, PyTorch's loop mode between them), and its compiled modes beside token serving.
"""

from __future__ import annotations

from xfbench.harness.gpu_plan import Context, Step, sweep_command

# Its parts, and where they run among the plan's parts (acceptance/steps.py)
PARTS = {"generation": 10, "generation-loop": 20, "generation-bf16": 30, "generation-serving": 140}
# The first part's decoding: one sequence (batch 64 took 50-57 s a cell more on the H100's
# slower host, past the part's budget: the generation part measures it); the CPU's
# rehearsal decodes 2, the batch's indexing, which batch 1 leaves untried.
FIRST_BATCH = {"quick": "1", "paper": "1", "smoke": "2"}


def steps(c: Context) -> list[Step]:
    return [
        *_first(c),
        *_decoding(c, "fp32"),
        _loop(c),
        *_decoding(c, "bf16"),
        _compiled(c),
    ]


def _first(c: Context) -> list[Step]:
    """GPT-2's decoding, each framework's fastest loop, one step a framework: one that
    fails or overruns leaves the other its time. Caps from the H100's third window, on a
    host about 1.45 times slower than the second's (its compilations and checks): PyTorch's
    batch-1 cudagraph cell ended 67 s after its step began (start and build 11.4 s,
    compilation 24.8 s, the float64 check 10.6 s), JAX's loop cell 49 s (compilation
    16.6 s, check 12.6 s)."""
    batch = FIRST_BATCH[c.preset]
    return [
        Step(
            name=f"first-generation-{framework}",
            part="first",
            cap_s=cap,
            argv=sweep_command(
                "--suite=generation",
                f"--framework={framework}",
                f"--mode={mode}",
                "--precision=fp32",
                f"--batch-size={batch}",
                *c.first,
            ),
            what=f"GPT-2 small decoding, 128/128 at batch {batch}, fp32: "
            f"{label}, the host out of the decode loop, the tokens checked",
            order=30,
            cpu_cap_s=cpu_cap,
        )
        for framework, mode, cap, cpu_cap, label in (
            # the CPU's rehearsal decodes PyTorch eagerly: CUDA graphs replay only on a
            # GPU, and a step whose every cell skipped would fail
            (
                "torch",
                "cudagraph" if c.device != "cpu" else "eager",
                80,
                27,
                "PyTorch's CUDA graphs",
            ),
            ("jax", "loop", 62, 33, "JAX's whole-loop mode"),
        )
    ]


def _decoding(c: Context, precision: str) -> list[Step]:
    """GPT-2's decoding at batch 1, 8 and 64: the cells a buyer reads first, one part (one
    call of 540 s) a precision, fp32 in `generation` and bf16 in `generation-bf16`. Times
    from the H100's third window, on its slower host: a PyTorch process's start 10-12 s;
    a cudagraph cell 45-50 s (build 8-11 s, compilation 21-25 s, the float64 check of at
    most two sequences 10.6-13 s), an eager cell about 17 s, a JAX loop cell about 40 s
    (compilation 16.6 s at batch 1); bf16 planned as fp32 (not yet run on a GPU)."""
    return [
        Step(
            name=name + ("" if precision == "fp32" else f"-{precision}"),
            part="generation" if precision == "fp32" else f"generation-{precision}",
            cap_s=cap,
            argv=sweep_command(
                "--suite=generation",
                f"--framework={framework}",
                f"--mode={modes}",
                f"--precision={precision}",
                *c.sweep,
            ),
            what=f"GPT-2 token generation {how}, 128/128 at batch 1, 8 and 64 "
            f"(docs/generation.md), {precision}: TTFT, TPOT and tokens/s, the tokens checked",
        )
        for name, framework, modes, cap, how in (
            (
                "generation-torch",
                "torch",
                "eager,cudagraph",
                222,
                "in PyTorch, eager and CUDA graphs",
            ),
            (
                "generation-jax",
                "jax",
                "loop",
                150,
                "in JAX, every decode step in one compiled loop",
            ),
            ("generation-jax-jit", "jax", "jit", 110, "in JAX, one jitted call a decode step"),
        )
    ]


def _loop(c: Context) -> Step:
    """PyTorch's loop mode in both precisions, between the fp32 and bf16 parts."""
    return Step(
        name="generation-torch-loop",
        part="generation-loop",
        # 6 cells, each a compilation with coordinate-descent tuning, a capture of 127 steps
        # and the check: planned at 60 s a cell (not yet run on a GPU)
        cap_s=400,
        argv=sweep_command(
            "--suite=generation",
            "--framework=torch",
            "--mode=loop",
            "--precision=fp32,bf16",
            *c.sweep,
        ),
        what="GPT-2 token generation in PyTorch as its own fast decoding runs it (compiled "
        "with coordinate-descent tuning, products as mm + bias), every decode step of a "
        "generation replayed as one CUDA graph, 128/128 at batch 1, 8 and 64, fp32 and "
        "bf16: TTFT, TPOT and tokens/s, the tokens checked",
    )


def _compiled(c: Context) -> Step:
    """GPT-2's compiled generation (PyTorch's Inductor, ONNX Runtime's CUDA), in the part
    token serving's step shares."""
    return Step(
        name="generation-compiled",
        part="generation-serving",
        cap_s=160,
        argv=sweep_command(
            "--suite=generation",
            "--framework=torch,onnxruntime",
            "--mode=compile,cuda",
            "--precision=fp32",
            *c.sweep,
        ),
        # ONNX Runtime's cuda mode where onnxruntime-gpu is installed (else skipped with the
        # reason)
        what="GPT-2 token generation in PyTorch's compile mode (Inductor, no CUDA graphs) "
        "and ONNX Runtime's cuda mode, 128/128 at batch 1, 8 and 64, fp32",
    )
