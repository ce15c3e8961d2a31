"""The steps of the acceptance run, as data: what each runs, in which part, for how long.

Every step is one child process: a pytest run of a suite (its --benchmark-json in the
output folder) or an `xfbench run` sweep (its cells in OUT/results, the runner's folder,
which `xfbench report` reads and which resumes where an earlier call stopped). Parts group
steps that fit one call of about ten minutes on an H100; `--part` picks them.

A suite declares its own steps and parts (plugin.Suite's `gpu_steps` and `gpu_parts`,
with the step's vocabulary in xfbench/harness/gpu_plan.py); here are the machine's steps
(the probe, the roofs, the GPU tests), the network suite's (Table 7, the transformers,
the equivalence checks), and the order: the parts by their rank, the first part's steps by
their `order`.

`--device cpu --preset smoke` gives the same steps at smoke sizes on the CPU: the GPU-only
cells skip with their reason, and the commands, their outputs and the summary are checked
(tests/test_acceptance.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from xfbench.harness.gpu_plan import (
    PRESETS,
    SUITES,
    TESTS,
    Context,
    Step,
    pytest_command,
    sweep_command,
)
from xfbench.models.networks import PAPER_NETWORKS
from xfbench.plugin import declared

# PARTS too, read once the suites are declared (__getattr__ below)
__all__ = ["BUDGET_S", "PRESETS", "Step", "chosen", "parts", "steps"]

# Each part fits one 15-minute GPU window: its caps, the probe's and RESERVE_S within
# BUDGET_S (tests/test_gpu_window.py). The parts run in the order of what they measure
# against the GPU goals (docs/gpus.md): the first window's headline figures, decoding,
# compiled training, Table 7's launch-bound column, then the rest. Each part's rank places
# it: these are the network suite's and the machine's; a suite ranks its own (gpu_parts).
# The raw GEMM at 8192 (CuPy against torch.matmul and JAX, 46 s on the H100) is the first
# part's; the GEMM's own part sweeps every shape and type.
OWN_PARTS = {
    "probe": -1,
    "first": 0,
    "transformers": 40,
    "table7": 50,
    "resnet50": 70,
    "table7-inference": 80,
    "table7-eager": 90,
    "table7-jax": 100,
    "transformers-jax": 110,
    "resnet50-jax": 120,
    "checks": 150,
    "equivalence": 160,
}
# The first part's steps run by their `order`, the figures a buyer reads first first: the
# device's roofs (0: does it deliver its datasheet), the raw GEMM (10), the headline
# networks' training (20), GPT-2's decoding (30), Table 7's column and JAX (40), then the
# GPU tests (50) and the equivalence checks (60). Caps from the H100's window (docs/gpus.md:
# measured there, then with a margin).
BUDGET_S = 540  # 9 minutes: a window's 15 less the machine's start, transfers, margin

# Figures the acceptance run must reach: CuPy's bf16 GEMM within 5 % of torch.matmul in
# the same run (xfbench/gemm/report.py, CUPY_OVER_TORCH_MIN); ResNet-50 against the
# published H100 range, which xfbench/published.toml holds and the report prints beside
# our cells.


@dataclass(frozen=True)
class Sizes:
    """What the preset changes in the network suite's steps: the full sizes on a GPU, tiny
    ones for the CPU check."""

    batch: int  # ResNet-50's training batch
    models: str  # Table 7's networks
    # the first part's JAX cells (its LSTM-32 had not finished compiling in the H100's 51 s)
    jax_subset: str = "fcn5,resnet56"
    # the first part's equivalence checks: a dense net, convolutions and pooling, cuDNN's
    # LSTM, attention (ResNet-56's BatchNorm waits for the equivalence part: its float64 step
    # compiles for long in JAX)
    checked: str = "fcn5,alexnet,lstm32,gpt2"


NINE = ",".join(PAPER_NETWORKS)
SIZES = {
    "quick": Sizes(batch=256, models=NINE),
    "paper": Sizes(batch=256, models=NINE),
    "smoke": Sizes(batch=8, models="fcn5,resnet56,lstm32"),
}


def ranks() -> dict[str, int]:
    """Every part's rank: the machine's and the network suite's, and each suite's own."""
    found = dict(OWN_PARTS)
    for suite in declared().values():
        found.update(suite.gpu_parts)
    return found


def parts() -> tuple[str, ...]:
    """The parts in the order a window runs them (the probe aside: every call runs it)."""
    return tuple(p for p, _ in sorted(ranks().items(), key=lambda kv: kv[1]) if p != "probe")


def __getattr__(name: str):
    if name == "PARTS":  # read once the suites are declared
        return parts()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def steps(device: str, preset: str, out: Path) -> list[Step]:
    """Every step, in the order it runs."""
    results = str(out / "results")
    sweep = ("--device", device, "--preset", preset, "--results", results)
    if device == "cpu":  # the CPU check: one thread count, not the sweep over them
        sweep += ("--threads", "1")
    c = Context(device=device, preset=preset, out=out, sweep=sweep)
    probe = Step(
        name="probe",
        part="probe",
        cap_s=16,  # 7-13 s on the H100's machines
        argv=(sys.executable, "-m", "xfbench.acceptance.probe", str(out / "probe.json")),
        what="the machine, and the versions and devices each framework sees",
        writes=(out / "probe.json",),
        cpu_cap_s=30,
    )
    s = SIZES[preset]
    every = [
        probe,
        _roofs_step(c),
        *_first_headline(s, c.first),
        *_first_column(s, c.first),
        *_first_checks(device, s, out),
        *_transformer_sweeps(sweep),
        *_table7_sweeps(s, sweep),
        *_resnet50_sweeps(s, sweep),
        *_later_checks(device, s, out),
    ]
    for suite in declared().values():
        every += suite.gpu_steps(c) if suite.gpu_steps else []
    rank = ranks()
    every.sort(key=lambda step: (rank[step.part], step.order))  # stable: declared order next
    if device != "cpu":
        return every
    # The CPU's rehearsal of the first part (`--device cpu --preset smoke`, which CI runs)
    # under caps of its own (cpu_cap_s): three times each step's time on a 2-vCPU AMD EPYC
    # of family 25 (Zen 3, AVX2 only, the slowest CPU these runs have met), run alone, where
    # the GPU's cap is shorter. Under the GPU's caps its roofs (7 s of 10) and equivalence
    # checks (34 of 68) had timed out with other checks running beside them. The budget on
    # the CPU is the sum of its steps' caps (cli.py), so a slow CPU never runs out of it.
    return [replace(step, cap_s=max(step.cap_s, step.cpu_cap_s)) for step in every]


def _roofs_step(c: Context) -> Step:
    """The device's roofs, into the sweeps' folder (the report reads them there)."""
    roofs = ("--device", c.device) if c.device != "cpu" else ("--threads", "1")
    return Step(
        name="first-roofs",
        part="first",
        cap_s=10,
        argv=(
            sys.executable,
            "-m",
            "xfbench.roofline.roofs",
            *roofs,
            "--into",
            str(c.out / "results" / "roofs.json"),
        ),
        what="the device's roofs: device-to-device bandwidth and each type's matmul peak",
        cpu_cap_s=21,
    )


def _first_headline(s: Sizes, first: tuple[str, ...]) -> list[Step]:
    """The first part's headline training: ResNet-50 and the transformers."""
    return [
        Step(
            name="first-resnet50",
            part="first",
            cap_s=48,
            argv=sweep_command(
                "--framework=torch",
                "--model=resnet50",
                "--task=train",
                "--mode=eager",
                "--precision=bf16",
                f"--batch-size={s.batch}",
                *first,
            ),
            what=f"ResNet-50 training, batch {s.batch}, PyTorch eager, bf16 (channels-last)",
            order=20,
            cpu_cap_s=36,
        ),
        Step(
            name="first-transformers",
            part="first",
            cap_s=38,
            argv=sweep_command(
                "--framework=torch",
                "--model=gpt2,bert_base",
                "--task=train",
                "--mode=eager",
                "--precision=bf16",
                *first,
            ),
            what="GPT-2 small (1024 tokens) and BERT-base (128) training at their published "
            "batches, PyTorch eager, bf16",
            order=20,
            cpu_cap_s=36,
        ),
    ]


def _first_column(s: Sizes, first: tuple[str, ...]) -> list[Step]:
    """The first part's Table 7 column, and JAX's subset of it."""
    return [
        Step(
            name="first-table7",
            part="first",
            cap_s=38,
            argv=sweep_command(
                "--framework=torch",
                "--mode=eager",
                "--precision=fp32",
                "--task=train",
                "--model",
                s.models,
                *first,
            ),
            what="Table 7's GPU column: PyTorch eager training, fp32 (TF32 off)",
            order=40,
            cpu_cap_s=33,
        ),
        Step(
            name="first-jax",
            part="first",
            cap_s=40,
            argv=sweep_command(
                "--framework=jax",
                "--precision=fp32",
                "--task=train",
                "--model",
                s.jax_subset,
                *first,
            ),
            what=f"JAX training, fp32, on a subset of Table 7 ({s.jax_subset})",
            order=40,
            cpu_cap_s=69,
        ),
    ]


def _first_checks(device: str, s: Sizes, out: Path) -> list[Step]:
    """The first part's checks, after its measurements: the GPU tests and the equivalence
    checks on the device."""
    return [
        Step(
            name="first-gpu-tests",
            part="first",
            cap_s=48,
            argv=pytest_command(
                str(TESTS / "test_gpu.py"),
                "-m",
                "gpu",
                # Inductor's first compilations take minutes, and bf16 decoding is the
                # generation's: the checks part runs those, within the 38 s measured
                "-k",
                "not compiled and not bf16",
                f"--junitxml={out / 'gpu-tests.xml'}",
            ),
            what="the GPU tests (the gpu marker), but for the compiled modes and bf16 decoding",
            needs=(TESTS / "test_gpu.py",),
            order=50,
            cpu_cap_s=9,
        ),
        Step(
            name="first-equivalence",
            part="first",
            cap_s=68,
            argv=pytest_command(
                str(SUITES / "test_equivalence.py"),
                f"--device={device}",
                "--framework=torch,jax",
                "--mode=eager,jit",
                f"--model={s.checked}",
                "--precision=fp32",
                "--preset=smoke",  # the function, not the size, is what is checked
                f"--benchmark-json={out / 'equivalence.json'}",
            ),
            what=f"the equivalence checks on the device ({s.checked}), PyTorch eager and JAX, "
            "fp32 (TF32 off)",
            order=60,
            cpu_cap_s=102,
        ),
    ]


def _transformer_sweeps(sweep: tuple[str, ...]) -> list[Step]:
    """The transformers' training: PyTorch compiled first (its goal is beside llm.c's
    figure; eager bf16 is the first part's), then JAX and PyTorch eager at TF32."""
    trained = ("--model=bert_base,gpt2", "--task=train")
    return [
        Step(
            name="transformers-torch-compiled",
            part="transformers",
            cap_s=480,
            argv=sweep_command(
                "--framework=torch", *trained, "--mode=compile", "--precision=bf16,tf32", *sweep
            ),
            what="BERT-base (128 tokens) and GPT-2 (1024) training at the published batches "
            "(docs/models.md), PyTorch compiled, bf16 and TF32",
        ),
        Step(
            name="transformers-jax",
            part="transformers-jax",
            cap_s=420,
            argv=sweep_command("--framework=jax", *trained, "--precision=bf16,tf32", *sweep),
            what="BERT-base and GPT-2 training, JAX, bf16 and TF32",
        ),
        Step(
            name="transformers-torch-eager",
            part="transformers-jax",
            # the first part's eager bf16 step took 27-31 s for both networks
            cap_s=60,
            argv=sweep_command(
                "--framework=torch", *trained, "--mode=eager", "--precision=tf32", *sweep
            ),
            what="BERT-base and GPT-2 training, PyTorch eager, TF32",
        ),
    ]


# Table 7's GPU column, one part a call: (step, part, cap, its options, what it runs)
TABLE7_STEPS = (
    ("table7-torch-compiled", "table7", 480, "torch", "cudagraph,compile", "fp32", "train",
     "PyTorch's CUDA graphs and compiled, training, fp32"),
    ("table7-torch-compiled-infer", "table7-inference", 420, "torch", "cudagraph,compile",
     "fp32", "infer", "PyTorch's CUDA graphs and compiled, inference, fp32"),
    ("table7-torch-eager", "table7-eager", 420, "torch", "eager", "fp32,tf32,bf16",
     "train,infer", "PyTorch eager, training and inference, fp32, TF32, bf16"),
    ("table7-jax", "table7-jax", 480, "jax", "", "fp32,tf32,bf16", "train,infer",
     "JAX, training and inference, fp32, TF32, bf16"),
)  # fmt: skip


def _table7_sweeps(s: Sizes, sweep: tuple[str, ...]) -> list[Step]:
    """Table 7's GPU column: PyTorch's compiled and CUDA-graph training first (the paper's
    column is training, and eager left the small networks launch-bound: docs/gpus.md),
    then their inference, PyTorch eager at TF32 and bf16, and JAX (TABLE7_STEPS)."""
    return [
        Step(
            name=name,
            part=part,
            cap_s=cap,
            argv=sweep_command(
                f"--framework={framework}",
                *([f"--mode={modes}"] if modes else []),
                f"--precision={precisions}",
                f"--task={tasks}",
                *("--model", s.models),
                *sweep,
            ),
            what=f"Table 7's GPU column: {what}",
        )
        for name, part, cap, framework, modes, precisions, tasks, what in TABLE7_STEPS
    ]


def _resnet50_sweeps(s: Sizes, sweep: tuple[str, ...]) -> list[Step]:
    """ResNet-50's training: PyTorch's part, then JAX's."""
    return [
        Step(
            name=f"resnet50-{framework}",
            part="resnet50" if framework == "torch" else "resnet50-jax",
            cap_s=cap,
            argv=sweep_command(
                f"--framework={framework}",
                "--model=resnet50",
                "--task=train",
                *modes,
                "--precision=bf16,tf32",
                f"--batch-size={s.batch}",
                *sweep,
            ),
            what=f"ResNet-50 training, batch {s.batch}, {how}, bf16 and TF32",
        )
        for framework, modes, cap, how in (
            ("torch", ("--mode=eager,compile",), 420, "PyTorch eager and compiled"),
            ("jax", (), 300, "JAX"),
        )
    ]


def _later_checks(device: str, s: Sizes, out: Path) -> list[Step]:
    """The checks part's GPU tests (the scaling suite's DDP over NCCL beside them), then the
    equivalence part."""
    return [
        Step(
            name="gpu-tests",
            part="checks",
            cap_s=300,
            argv=pytest_command(
                str(TESTS / "test_gpu.py"),
                "-m",
                "gpu",
                f"--junitxml={out / 'gpu-tests.xml'}",
            ),
            what="the GPU tests (the gpu marker)",
            needs=(TESTS / "test_gpu.py",),
        ),
        Step(
            name="equivalence",
            part="equivalence",
            cap_s=420,
            argv=pytest_command(
                str(SUITES / "test_equivalence.py"),
                f"--device={device}",
                "--precision=fp32,tf32",
                "--preset=smoke",  # the function, not the size, is what is checked
                f"--benchmark-json={out / 'equivalence.json'}",
            ),
            what="the equivalence checks on the device: fp32 (TF32 off) held to the rule, TF32 recorded",
        ),
    ]


def chosen(all_steps: list[Step], parts: list[str], names: list[str] | None) -> list[Step]:
    """The probe, then the steps of the parts asked for, or those named (--steps), in
    run order: every call records the machine it ran on."""
    if names:
        return [s for s in all_steps if s.part == "probe" or s.name in names]
    return [s for s in all_steps if s.part == "probe" or s.part in parts]
