"""The token-serving suite's step of the GPU acceptance plan (xfbench/acceptance/steps.py
runs it): GPT-2's generation served through LoadGen's token mode."""

from __future__ import annotations

from xfbench.harness.gpu_plan import Context, Step, sweep_command


def steps(c: Context) -> list[Step]:
    return [
        Step(
            name="token-serving",
            part="generation-serving",  # the generation suite's part
            cap_s=240,
            argv=sweep_command(
                "--suite=token-serving",
                "--framework=torch,jax",
                "--mode=eager,jit",
                "--precision=fp32",
                *c.sweep,
            ),
            # two decoders' three scenarios at 128/128, the largest batch 64: each bucket a
            # compilation and a check, 10 s runs, a Server search of at most 60 s and its
            # confirmation over 459 queries; LoadGen from gpu/wheels (gpu/window.sh)
            what="GPT-2 generation served through LoadGen's token mode (docs/token-serving.md), "
            "PyTorch eager and JAX: p90 TTFT and TPOT, Server QPS under MLPerf's llama3.1-8b "
            "bounds, Offline tokens/s",
        )
    ]
