"""The GEMM suite's steps of the GPU acceptance plan (xfbench/acceptance/steps.py runs them):
the raw product at one square in the first part, every shape and type in its own part."""

from __future__ import annotations

from xfbench.harness.gpu_plan import SUITES, Context, Step, pytest_command

# Its part, and where it runs among the plan's parts (acceptance/steps.py)
PARTS = {"gemm": 60}
# The first part's square, a GPU's and the CPU rehearsal's
SQUARE = {"quick": "8192", "paper": "8192", "smoke": "256"}


def steps(c: Context) -> list[Step]:
    return [
        Step(
            # The design's own figure: raw CuPy (cuBLAS) against torch.matmul and JAX at one
            # square, fp32 (TF32 off), TF32 and bf16. 46 s on the H100 (its first window,
            # whose JSON was then lost to pytest-benchmark 5.2.3's open file: fixed since).
            name="first-gemm",
            part="first",
            cap_s=60,
            argv=pytest_command(
                str(SUITES / "test_gemm.py"),
                "--gemm-impl=cupy,torch,jax",
                f"--gemm-sizes={SQUARE[c.preset]}",
                "--precision=fp32,tf32,bf16",
                f"--device={c.device}",
                f"--preset={c.preset}",
                c.json("gemm"),
            ),
            what=f"GEMM {SQUARE[c.preset]}: CuPy, torch.matmul and JAX at fp32 (TF32 off), "
            "TF32 and bf16",
            order=10,
            cpu_cap_s=30,
        ),
        Step(
            name="gemm",
            part="gemm",
            # the preset's squares and layer shapes, five types: the first part's nine cells
            # at one square took 46 s with JAX's compilations. A superset of the first
            # part's cells, so it may replace its gemm.json in a folder resumed
            cap_s=300,
            argv=pytest_command(
                str(SUITES / "test_gemm.py"),
                "--gemm-impl=cupy,torch,jax",
                "--precision=fp32,tf32,bf16,fp16,fp8",
                f"--device={c.device}",
                f"--preset={c.preset}",
                c.json("gemm"),
            ),
            what="GEMM over the preset's squares and layer shapes: CuPy, torch.matmul and JAX "
            "at fp32 (TF32 off), TF32, bf16, fp16 and fp8",
        ),
    ]
