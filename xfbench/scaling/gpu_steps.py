"""The scaling suite's step of the GPU acceptance plan (xfbench/acceptance/steps.py runs
it): DDP over NCCL on one worker, among the checks."""

from __future__ import annotations

from xfbench.harness.gpu_plan import SUITES, Context, Step, pytest_command


def steps(c: Context) -> list[Step]:
    return [
        Step(
            name="ddp",
            part="checks",
            cap_s=180,
            argv=pytest_command(
                str(SUITES / "test_scaling.py"),
                "--framework=torch",
                "--model=resnet56",
                "--workers=1",
                f"--device={c.device}",
                f"--preset={c.preset}",
                c.json("scaling"),
            ),
            what="data-parallel training on one worker (DDP over NCCL on a GPU)",
        )
    ]
