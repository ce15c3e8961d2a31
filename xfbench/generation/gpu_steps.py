"""The generation suite's steps of the GPU acceptance plan (xfbench/acceptance/steps.py runs
them): GPT-2's decoding in the first part; today's fast decoding (PyTorch's CUDA graphs and
loop mode, JAX's loop; fp32 and bf16) in the decode part, right after it, a step a batch
size; the other modes in parts of their own, one a precision; its compiled modes beside
token serving.
"""

from __future__ import annotations

from xfbench.harness.gpu_plan import Context, Step, sweep_command

# Its parts, and where they run among the plan's parts (acceptance/steps.py)
# The decode parts first after the first part: batch 1 with JAX's bf16 cells, then batch 8,
# then 64, each part one window's call.
PARTS = {
    "decode": 5,
    "decode-b8": 6,
    "decode-b64": 7,
    "decode-6.7b": 8,
    "decode-6.7b-b8": 9,
    "decode-6.7b-b64": 10,
    "generation": 11,
    "generation-bf16": 30,
    "generation-serving": 140,
}
# The first part's decoding: one sequence (batch 64 took 50-57 s a cell more on the H100's
# slower host, past the part's budget: the generation part measures it); the CPU's
# rehearsal decodes 2, the batch's indexing, which batch 1 leaves untried.
FIRST_BATCH = {"quick": "1", "paper": "1", "smoke": "2"}


def steps(c: Context) -> list[Step]:
    return [
        *_first(c),
        *_decode(c),
        *_decoder(c),
        *_decoding(c, "fp32"),
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


# Today's fast decoding, a step a batch size: PyTorch's CUDA graphs and loop mode in fp32
# and bf16 (4 cells), each batch's in a part of its own (batch 1's with JAX's bf16 cells).
# Its caps: a cudagraph cell took 45-50 s on the H100's slower host (build 8-11 s,
# compilation 21-25 s, the check 10.6-13 s), the loop mode's compilation and capture planned
# at 60 s a cell (not yet run on a GPU), a process's start 10-12 s; batch 64 a quarter
# longer (its check and generations).
# (batch, its part, its cap; the CPU's rehearsal decodes smoke's batch sizes 1 and 2)
DECODE = (("1", "decode", 240), ("8", "decode-b8", 240), ("64", "decode-b64", 300))
SMOKE_BATCH = {"1": "1", "8": "2", "64": "2"}


def _decode(c: Context) -> list[Step]:
    """The decode parts: the cells the buyer's question reads (docs/gpus.md), batch 1
    first. A cell already measured in the same window (the first part's batch-1 fp32
    cudagraph cell) is not measured again: the sweeps share one results folder."""
    torch_steps = [
        _torch_decode(c, f"decode-torch-b{batch}", part, cap=cap, batch=batch,
                      chosen=("--precision=fp32,bf16",),
                      what=f"GPT-2 decoding at batch {batch}, 128/128, fp32 and bf16, in "
                      "PyTorch's CUDA graphs (a graph a step) and loop mode (a generation's "
                      "steps one graph), compiled as its own fast decoding compiles it: TPOT, "
                      "its kernels and gaps, the tokens checked")
        for batch, part, cap in DECODE
    ]  # fmt: skip
    jax_bf16 = Step(
        name="decode-jax-bf16",
        part="decode",
        # a JAX loop cell took about 40 s on the H100's slower host (compilation 16.6 s);
        # its fp32 cells are the generation part's
        cap_s=150,
        argv=sweep_command(
            "--suite=generation",
            "--framework=jax",
            "--mode=loop",
            "--precision=bf16",
            *c.sweep,
        ),
        what="GPT-2 decoding at batch 1, 8 and 64, 128/128, bf16, in JAX's loop mode "
        "(every decode step in one compiled loop), the tokens checked",
    )
    return [*torch_steps, jax_bf16]


# The decoder the size buyers serve (GPT-2's layers at GPT-3 6.7B's shape), bf16, a part a
# batch size (batch 1's with JAX's cells), right after GPT-2's decode parts. Planned, not
# yet run on a GPU: its weights made on the device (seconds), 32 layers to compile where
# GPT-2 has 12 (a cudagraph cell's compilation took 21-25 s for GPT-2 on the H100's slower
# host: about 60 s planned, with coordinate-descent tuning), the check's float32 copy made
# on the device and run once; the smoke network in the CPU's rehearsal.
DECODER = (("1", "decode-6.7b", 300), ("8", "decode-6.7b-b8", 300), ("64", "decode-6.7b-b64", 360))


def _decoder(c: Context) -> list[Step]:
    """The 6.7B decoder's steps."""
    torch_steps = [
        _torch_decode(c, f"decode-6.7b-torch-b{batch}", part, cap=cap, batch=batch,
                      chosen=("--model=gpt3_6_7b", "--precision=bf16"),
                      what=f"GPT-3 6.7B's shape (GPT-2's layers; 13.3 GB of bf16 weights made "
                      f"on the device) decoding at batch {batch}, 128/128, bf16, in PyTorch's "
                      "CUDA graphs and loop mode: TPOT against the step's bound at the "
                      "measured bandwidth, the tokens checked against the same network in "
                      "float32 on the device")
        for batch, part, cap in DECODER
    ]  # fmt: skip
    jax_step = Step(
        name="decode-6.7b-jax",
        part="decode-6.7b",
        cap_s=180,
        argv=sweep_command(
            "--suite=generation",
            "--model=gpt3_6_7b",
            "--framework=jax",
            "--mode=loop",
            "--precision=bf16",
            *c.sweep,
        ),
        what="GPT-3 6.7B's shape decoding at batch 1, 8 and 64, 128/128, bf16, in JAX's "
        "loop mode, the tokens checked against the same network in float32 on the device",
    )
    return [*torch_steps, jax_step]


def _torch_decode(c: Context, name: str, part: str, *, cap: int, batch: str, chosen: tuple,
                  what: str) -> Step:  # fmt: skip
    """One batch size's PyTorch decode step in CUDA graphs and the loop mode; the CPU's
    rehearsal decodes eagerly (CUDA graphs replay only on a GPU, and a step whose every
    cell skipped would fail) at smoke's batch sizes."""
    modes = "cudagraph,loop" if c.device != "cpu" else "eager"
    return Step(
        name=name,
        part=part,
        cap_s=cap,
        argv=sweep_command(
            "--suite=generation",
            *chosen,
            "--framework=torch",
            f"--mode={modes}",
            f"--batch-size={SMOKE_BATCH[batch] if c.preset == 'smoke' else batch}",
            *c.sweep,
        ),
        what=what,
    )


def _decoding(c: Context, precision: str) -> list[Step]:
    """GPT-2's decoding at batch 1, 8 and 64 in the modes the decode parts leave (PyTorch
    eager, JAX's loop in fp32, JAX's jit: one call a step), one part a precision, fp32 in
    `generation` and bf16 in `generation-bf16`. Times from the H100's third window, on its slower host: a
    PyTorch process's start 10-12 s, an eager cell about 17 s; JAX's jit step was cut at
    110 s on the H200 while at batch 64 (batch 1 and 8 measured); bf16 planned as fp32."""
    return [
        Step(
            name=name + ("" if precision == "fp32" else f"-{precision}"),
            part="generation" if precision == "fp32" else f"generation-{precision}",
            cap_s=cap,
            argv=sweep_command(
                "--suite=generation",
                f"--framework={framework}",
                f"--mode={mode}",
                f"--precision={precision}",
                *c.sweep,
            ),
            what=f"GPT-2 token generation {how}, 128/128 at batch 1, 8 and 64 "
            f"(docs/generation.md), {precision}: TTFT, TPOT and tokens/s, the tokens checked",
        )
        for name, framework, mode, cap, how in (
            ("generation-torch", "torch", "eager", 90, "in PyTorch eager"),
            (
                "generation-jax",
                "jax",
                "loop",
                150,
                "in JAX, every decode step in one compiled loop",
            ),
            ("generation-jax-jit", "jax", "jit", 110, "in JAX, one jitted call a decode step"),
        )
        if precision == "fp32" or mode != "loop"  # JAX's bf16 loop: the decode part's
    ]


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
