"""The serving suite's step of the GPU acceptance plan (xfbench/acceptance/steps.py runs
it): a network through LoadGen's four scenarios."""

from __future__ import annotations

from xfbench.harness.gpu_plan import Context, Step, sweep_command

# Its part, and where it runs among the plan's parts (acceptance/steps.py)
PARTS = {"serving": 130}
# The network served, on a GPU and in the CPU's rehearsal
NETWORK = {"quick": "resnet50", "paper": "resnet50", "smoke": "resnet56"}


def steps(c: Context) -> list[Step]:
    network = NETWORK[c.preset]
    return [
        Step(
            name="serving",
            part="serving",
            cap_s=480,
            argv=sweep_command(
                "--suite=serving",
                "--framework=torch,jax",
                "--mode=eager,compile,jit",
                f"--model={network}",
                "--precision=bf16",
                *c.sweep,
            ),
            # three (framework, mode) cells x four scenarios: at quick, about 10 s a scenario,
            # up to 75 s of Server search, and each bucket's compilation
            what=f"{network} served through LoadGen's four scenarios (docs/serving.md), "
            "PyTorch eager and compiled and JAX, bf16: p90 latency, Server QPS under the "
            "bound, Offline samples/s",
        )
    ]
