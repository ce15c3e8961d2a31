"""The network suite's steps of the GPU acceptance plan (xfbench/acceptance/steps.py runs
them): Table 7's networks and the transformers, trained and inferred on the device, and the
equivalence checks. Its headline figures are the first part's; each sweep over Table 7's
GPU column, the transformers and ResNet-50 is a part of its own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xfbench.harness.gpu_plan import SUITES, Context, Step, pytest_command, sweep_command
from xfbench.models.networks import PAPER_NETWORKS

# Its parts, and where they run among the plan's parts (acceptance/steps.py): its compiled
# training first (the transformers', then Table 7's launch-bound column), then the rest.
PARTS = {
    "transformers": 40,
    "table7": 50,
    "resnet50": 70,
    "table7-inference": 80,
    "table7-eager": 90,
    "table7-jax": 100,
    "transformers-jax": 110,
    "resnet50-jax": 120,
    "equivalence": 160,
}


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


def steps(c: Context) -> list[Step]:
    s = SIZES[c.preset]
    return [
        *_first_headline(s, c.first),
        *_first_column(s, c.first),
        _first_equivalence(c.device, s, c.out),
        *_transformer_sweeps(c.sweep),
        *_table7_sweeps(s, c.sweep),
        *_resnet50_sweeps(s, c.sweep),
        _equivalence(c.device, c.out),
    ]


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


def _first_equivalence(device: str, s: Sizes, out: Path) -> Step:
    """The first part's equivalence checks, on the device, after its measurements."""
    return Step(
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
    )


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


def _equivalence(device: str, out: Path) -> Step:
    """The equivalence part: every network's checks on the device."""
    return Step(
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
    )
