"""The all-reduce suite's step of the GPU acceptance plan (xfbench/acceptance/steps.py runs
it): world size 1, beside the GEMM, the device's own figures."""

from __future__ import annotations

from xfbench.harness.gpu_plan import SUITES, Context, Step, pytest_command


def steps(c: Context) -> list[Step]:
    return [
        Step(
            name="allreduce",
            part="gemm",  # the GEMM suite's part: the device's own figures
            cap_s=150,
            argv=pytest_command(
                str(SUITES / "test_allreduce.py"),
                "--framework=torch",
                "--world-sizes=1",
                f"--device={c.device}",
                f"--preset={c.preset}",
                c.json("allreduce"),
            ),
            what="all-reduce at world size 1 (NCCL on a GPU)",
        )
    ]
