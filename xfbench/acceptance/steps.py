"""The steps of the acceptance run, as data: what each runs, in which part, for how long.

Every step is one child process: a pytest run of a suite (its --benchmark-json in the
output folder) or an `xfbench run` sweep (its cells in OUT/results, the runner's folder,
which `xfbench report` reads and which resumes where an earlier call stopped). Parts group
steps that fit one call of about ten minutes on an H100; `--part` picks them.

`--device cpu --preset smoke` gives the same steps at smoke sizes on the CPU: the GPU-only
cells skip with their reason, and the commands, their outputs and the summary are checked
(tests/test_acceptance.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import xfbench
from xfbench.models.networks import PAPER_NETWORKS

SUITES = Path(xfbench.__file__).resolve().parent / "suites"
# The suite's own tests exist in a checkout only (they are not installed).
TESTS = Path(xfbench.__file__).resolve().parents[1] / "tests"

# Each part fits one 15-minute GPU window: its caps, the probe's and RESERVE_S within
# BUDGET_S (tests/test_gpu_window.py). The parts come in the order of what they measure
# against the GPU goals (docs/gpus.md): the first window's headline figures, decoding,
# compiled training, Table 7's launch-bound column, then the rest. The raw GEMM at 8192 (CuPy
# against torch.matmul and JAX, 46 s on the H100) is the first part's; the `gemm` part
# sweeps every shape and type.
PARTS = (
    "first",
    "generation",
    "generation-loop",
    "generation-bf16",
    "transformers",
    "table7",
    "gemm",
    "resnet50",
    "table7-inference",
    "table7-eager",
    "table7-jax",
    "transformers-jax",
    "resnet50-jax",
    "serving",
    "generation-serving",
    "checks",
    "equivalence",
)
BUDGET_S = 540  # 9 minutes: a window's 15 less the machine's start, transfers, margin

# Figures the acceptance run must reach: CuPy's bf16 GEMM within 5 % of torch.matmul in
# the same run (xfbench/gemm/report.py, CUPY_OVER_TORCH_MIN); ResNet-50 against the
# published H100 range, which xfbench/published.toml holds and the report prints beside
# our cells.


# The options through which a step's command names what it writes.
OUTPUT_OPTIONS = ("--benchmark-json", "--junitxml", "--results", "--into")


@dataclass(frozen=True)
class Step:
    name: str
    part: str
    cap_s: int  # its own time-out; the run's budget may cut it shorter
    argv: tuple[str, ...]
    what: str  # one line for the summary
    needs: tuple[Path, ...] = field(default=())  # files that must exist (tests/ in a checkout)
    writes: tuple[Path, ...] = field(default=())  # outputs not named by an OUTPUT_OPTIONS

    @property
    def outputs(self) -> tuple[Path, ...]:
        """The files and folders the step writes: read off its command line, and writes."""
        found = list(self.writes)
        for i, arg in enumerate(self.argv):
            name, eq, value = arg.partition("=")
            if name in OUTPUT_OPTIONS:
                found.append(Path(value if eq else self.argv[i + 1]))
        return tuple(found)


@dataclass(frozen=True)
class Sizes:
    """What the preset changes: the full sizes on a GPU, tiny ones for the CPU check."""

    preset: str
    gemm: str
    batch: int  # ResNet-50's training batch
    models: str  # Table 7's networks
    serving: str  # the serving step's network
    # the first part's decoding: one sequence (batch 64 took 50-57 s a cell more on the
    # H100's slower host, past the part's budget: the generation part measures it)
    generation_batches: str = "1"
    # the first part's JAX cells (its LSTM-32 had not finished compiling in the H100's 51 s)
    jax_subset: str = "fcn5,resnet56"
    # the first part's equivalence checks: a dense net, convolutions and pooling, cuDNN's
    # LSTM, attention (ResNet-56's BatchNorm waits for the equivalence part: its float64 step
    # compiles for long in JAX)
    checked: str = "fcn5,alexnet,lstm32,gpt2"


NINE = ",".join(PAPER_NETWORKS)
SIZES = {
    "quick": Sizes(preset="quick", gemm="8192", batch=256, models=NINE, serving="resnet50"),
    "paper": Sizes(preset="paper", gemm="8192", batch=256, models=NINE, serving="resnet50"),
    "smoke": Sizes(
        preset="smoke",
        gemm="256",
        batch=8,
        models="fcn5,resnet56,lstm32",
        serving="resnet56",
        generation_batches="2",  # the batch's indexing, which batch 1 leaves untried
    ),
}


def _pytest(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args)


def _sweep(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "xfbench.harness.cli", "run", "--quiet", *args)


def steps(device: str, preset: str, out: Path) -> list[Step]:
    """Every step, in the order it runs."""
    s = SIZES[preset]
    results = str(out / "results")
    sweep = ("--device", device, "--preset", s.preset, "--results", results)
    if device == "cpu":  # the CPU check: one thread count, not the sweep over them
        sweep += ("--threads", "1")
    probe = Step(
        name="probe",
        part="probe",
        cap_s=16,  # 7-13 s on the H100's machines
        argv=(sys.executable, "-m", "xfbench.acceptance.probe", str(out / "probe.json")),
        what="the machine, and the versions and devices each framework sees",
        writes=(out / "probe.json",),
    )
    every = [probe, *_first(device, s, out, sweep), *_later(device, s, out, sweep)]
    if device != "cpu":
        return every
    return [replace(step, cap_s=max(step.cap_s, CPU_CAPS_S.get(step.name, 0))) for step in every]


# The CPU's rehearsal of the first part (`--device cpu --preset smoke`, which CI runs) under
# caps of its own: three times each step's time on a 2-vCPU AMD EPYC of family 25 (Zen 3,
# AVX2 only, the slowest CPU these runs have met), run alone, where the GPU's cap is
# shorter. Under the GPU's caps its roofs (7 s of 10) and equivalence checks (34 of 68)
# had timed out with other checks running beside them. The budget on the CPU is the sum
# of its steps' caps (cli.py), so a slow CPU never runs out of it.
CPU_CAPS_S = {
    "probe": 30,
    "first-roofs": 21,
    "first-gemm": 30,
    "first-resnet50": 36,
    "first-transformers": 36,
    "first-generation-torch": 27,
    "first-generation-jax": 33,
    "first-table7": 33,
    "first-jax": 69,
    "first-gpu-tests": 9,
    "first-equivalence": 102,
}


def _first(device: str, s: Sizes, out: Path, sweep: tuple[str, ...]) -> list[Step]:
    """The first window's steps, the figures a buyer reads first first: the GPU's roofs
    (does it deliver its datasheet), the headline networks' training, GPT-2's decoding,
    Table 7's column and JAX; then the GPU-only checks. Caps from the H100's window
    (docs/gpus.md: measured there, then with a margin); the sweeps measure no roofs
    (--skip-roofs): the roofs step has, into the same folder."""
    first = (*sweep, "--skip-roofs")
    return [
        _roofs_step(device, out),
        _gemm_step(device, s, out),
        *_first_headline(s, first),
        *_generation_steps(device, s, first),
        *_first_column(s, first),
        *_first_checks(device, s, out),
    ]


def _roofs_step(device: str, out: Path) -> Step:
    """The device's roofs, into the sweeps' folder (the report reads them there)."""
    roofs = ("--device", device) if device != "cpu" else ("--threads", "1")
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
            str(out / "results" / "roofs.json"),
        ),
        what="the device's roofs: device-to-device bandwidth and each type's matmul peak",
    )


def _gemm_step(device: str, s: Sizes, out: Path) -> Step:
    """The design's own figure: raw CuPy (cuBLAS) against torch.matmul and JAX at one
    square, fp32 (TF32 off), TF32 and bf16. 46 s on the H100 (its first window, whose
    JSON was then lost to pytest-benchmark 5.2.3's open file: fixed since)."""
    return Step(
        name="first-gemm",
        part="first",
        cap_s=60,
        argv=_pytest(
            str(SUITES / "test_gemm.py"),
            "--gemm-impl=cupy,torch,jax",
            f"--gemm-sizes={s.gemm}",
            "--precision=fp32,tf32,bf16",
            f"--device={device}",
            f"--preset={s.preset}",
            _json(out, "gemm"),
        ),
        what=f"GEMM {s.gemm}: CuPy, torch.matmul and JAX at fp32 (TF32 off), TF32 and bf16",
    )


def _generation_steps(device: str, s: Sizes, first: tuple[str, ...]) -> list[Step]:
    """GPT-2's decoding, each framework's fastest loop, one step a framework: one that
    fails or overruns leaves the other its time. Caps from the H100's third window, on a
    host about 1.45 times slower than the second's (its compilations and checks): PyTorch's
    batch-1 cudagraph cell ended 67 s after its step began (start and build 11.4 s,
    compilation 24.8 s, the float64 check 10.6 s), JAX's loop cell 49 s (compilation
    16.6 s, check 12.6 s)."""
    return [
        Step(
            name=f"first-generation-{framework}",
            part="first",
            cap_s=cap,
            argv=_sweep(
                "--suite=generation",
                f"--framework={framework}",
                f"--mode={mode}",
                "--precision=fp32",
                f"--batch-size={s.generation_batches}",
                *first,
            ),
            what=f"GPT-2 small decoding, 128/128 at batch {s.generation_batches}, fp32: "
            f"{label}, the host out of the decode loop, the tokens checked",
        )
        for framework, mode, cap, label in (
            # the CPU's rehearsal decodes PyTorch eagerly: CUDA graphs replay only on a
            # GPU, and a step whose every cell skipped would fail
            ("torch", "cudagraph" if device != "cpu" else "eager", 80, "PyTorch's CUDA graphs"),
            ("jax", "loop", 62, "JAX's whole-loop mode"),
        )
    ]


def _first_headline(s: Sizes, first: tuple[str, ...]) -> list[Step]:
    """The first part's headline training: ResNet-50 and the transformers."""
    return [
        Step(
            name="first-resnet50",
            part="first",
            cap_s=48,
            argv=_sweep(
                "--framework=torch",
                "--model=resnet50",
                "--task=train",
                "--mode=eager",
                "--precision=bf16",
                f"--batch-size={s.batch}",
                *first,
            ),
            what=f"ResNet-50 training, batch {s.batch}, PyTorch eager, bf16 (channels-last)",
        ),
        Step(
            name="first-transformers",
            part="first",
            cap_s=38,
            argv=_sweep(
                "--framework=torch",
                "--model=gpt2,bert_base",
                "--task=train",
                "--mode=eager",
                "--precision=bf16",
                *first,
            ),
            what="GPT-2 small (1024 tokens) and BERT-base (128) training at their published "
            "batches, PyTorch eager, bf16",
        ),
    ]


def _first_column(s: Sizes, first: tuple[str, ...]) -> list[Step]:
    """The first part's Table 7 column, and JAX's subset of it."""
    return [
        Step(
            name="first-table7",
            part="first",
            cap_s=38,
            argv=_sweep(
                "--framework=torch",
                "--mode=eager",
                "--precision=fp32",
                "--task=train",
                "--model",
                s.models,
                *first,
            ),
            what="Table 7's GPU column: PyTorch eager training, fp32 (TF32 off)",
        ),
        Step(
            name="first-jax",
            part="first",
            cap_s=40,
            argv=_sweep(
                "--framework=jax",
                "--precision=fp32",
                "--task=train",
                "--model",
                s.jax_subset,
                *first,
            ),
            what=f"JAX training, fp32, on a subset of Table 7 ({s.jax_subset})",
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
            argv=_pytest(
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
        ),
        Step(
            name="first-equivalence",
            part="first",
            cap_s=68,
            argv=_pytest(
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
        ),
    ]


def _json(out: Path, name: str) -> str:
    return f"--benchmark-json={out / (name + '.json')}"


def _later(device: str, s: Sizes, out: Path, sweep: tuple[str, ...]) -> list[Step]:
    """The steps of the parts for later windows, in the order of PARTS."""
    return [
        *_generation_sweeps(sweep),
        *_transformer_sweeps(sweep),
        *_table7_sweeps(s, sweep),
        *_device_steps(device, s, out),
        *_resnet50_sweeps(s, sweep),
        *_serving_sweeps(s, sweep),
        *_generation_serving_sweeps(sweep),
        *_later_checks(device, s, out),
    ]


def _device_steps(device: str, s: Sizes, out: Path) -> list[Step]:
    """The GEMM over every shape and type (the first part has its headline square) and
    the all-reduce: the device's own figures."""
    return [
        Step(
            name="gemm",
            part="gemm",
            # the preset's squares and layer shapes, five types: the first part's nine cells
            # at one square took 46 s with JAX's compilations. A superset of the first
            # part's cells, so it may replace its gemm.json in a folder resumed
            cap_s=300,
            argv=_pytest(
                str(SUITES / "test_gemm.py"),
                "--gemm-impl=cupy,torch,jax",
                "--precision=fp32,tf32,bf16,fp16,fp8",
                f"--device={device}",
                f"--preset={s.preset}",
                _json(out, "gemm"),
            ),
            what="GEMM over the preset's squares and layer shapes: CuPy, torch.matmul and JAX "
            "at fp32 (TF32 off), TF32, bf16, fp16 and fp8",
        ),
        Step(
            name="allreduce",
            part="gemm",
            cap_s=150,
            argv=_pytest(
                str(SUITES / "test_allreduce.py"),
                "--framework=torch",
                "--world-sizes=1",
                f"--device={device}",
                f"--preset={s.preset}",
                _json(out, "allreduce"),
            ),
            what="all-reduce at world size 1 (NCCL on a GPU)",
        ),
    ]


def _resnet50_sweeps(s: Sizes, sweep: tuple[str, ...]) -> list[Step]:
    """ResNet-50's training: PyTorch's part, then JAX's."""
    return [
        Step(
            name=f"resnet50-{framework}",
            part="resnet50" if framework == "torch" else "resnet50-jax",
            cap_s=cap,
            argv=_sweep(
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
            argv=_sweep(
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


def _transformer_sweeps(sweep: tuple[str, ...]) -> list[Step]:
    """The transformers' training: PyTorch compiled first (its goal is beside llm.c's
    figure; eager bf16 is the first part's), then JAX and PyTorch eager at TF32."""
    trained = ("--model=bert_base,gpt2", "--task=train")
    return [
        Step(
            name="transformers-torch-compiled",
            part="transformers",
            cap_s=480,
            argv=_sweep(
                "--framework=torch", *trained, "--mode=compile", "--precision=bf16,tf32", *sweep
            ),
            what="BERT-base (128 tokens) and GPT-2 (1024) training at the published batches "
            "(docs/models.md), PyTorch compiled, bf16 and TF32",
        ),
        Step(
            name="transformers-jax",
            part="transformers-jax",
            cap_s=420,
            argv=_sweep("--framework=jax", *trained, "--precision=bf16,tf32", *sweep),
            what="BERT-base and GPT-2 training, JAX, bf16 and TF32",
        ),
        Step(
            name="transformers-torch-eager",
            part="transformers-jax",
            # the first part's eager bf16 step took 27-31 s for both networks
            cap_s=60,
            argv=_sweep("--framework=torch", *trained, "--mode=eager", "--precision=tf32", *sweep),
            what="BERT-base and GPT-2 training, PyTorch eager, TF32",
        ),
    ]


def _serving_sweeps(s: Sizes, sweep: tuple[str, ...]) -> list[Step]:
    """The serving part: ResNet-50 through LoadGen's four scenarios."""
    return [
        Step(
            name="serving",
            part="serving",
            cap_s=480,
            argv=_sweep(
                "--suite=serving",
                "--framework=torch,jax",
                "--mode=eager,compile,jit",
                f"--model={s.serving}",
                "--precision=bf16",
                *sweep,
            ),
            # three (framework, mode) cells x four scenarios: at quick, about 10 s a scenario,
            # up to 75 s of Server search, and each bucket's compilation
            what=f"{s.serving} served through LoadGen's four scenarios (docs/serving.md), "
            "PyTorch eager and compiled and JAX, bf16: p90 latency, Server QPS under the "
            "bound, Offline samples/s",
        ),
    ]


def _generation_serving_sweeps(sweep: tuple[str, ...]) -> list[Step]:
    """GPT-2's compiled generation (PyTorch's Inductor, ONNX Runtime's CUDA) and its
    serving through LoadGen's token mode."""
    return [
        Step(
            name="generation-compiled",
            part="generation-serving",
            cap_s=160,
            argv=_sweep(
                "--suite=generation",
                "--framework=torch,onnxruntime",
                "--mode=compile,cuda",
                "--precision=fp32",
                *sweep,
            ),
            # ONNX Runtime's cuda mode where onnxruntime-gpu is installed (else skipped with
            # the reason)
            what="GPT-2 token generation in PyTorch's compile mode (Inductor, no CUDA graphs) "
            "and ONNX Runtime's cuda mode, 128/128 at batch 1, 8 and 64, fp32",
        ),
        Step(
            name="token-serving",
            part="generation-serving",
            cap_s=240,
            argv=_sweep(
                "--suite=token-serving",
                "--framework=torch,jax",
                "--mode=eager,jit",
                "--precision=fp32",
                *sweep,
            ),
            # two decoders' three scenarios at 128/128, the largest batch 64: each bucket a
            # compilation and a check, 10 s runs, a Server search of at most 60 s and its
            # confirmation over 459 queries; LoadGen from gpu/wheels (gpu/window.sh)
            what="GPT-2 generation served through LoadGen's token mode (docs/token-serving.md), "
            "PyTorch eager and JAX: p90 TTFT and TPOT, Server QPS under MLPerf's llama3.1-8b "
            "bounds, Offline tokens/s",
        ),
    ]


def _generation_sweeps(sweep: tuple[str, ...]) -> list[Step]:
    """GPT-2's decoding at batch 1, 8 and 64: the cells a buyer reads first, one part (one
    call of 540 s) a precision, fp32 in `generation` and bf16 in `generation-bf16`. Times
    from the H100's third window, on its slower host: a PyTorch process's start 10-12 s;
    a cudagraph cell 45-50 s (build 8-11 s, compilation 21-25 s, the float64 check of at
    most two sequences 10.6-13 s), an eager cell about 17 s, a JAX loop cell about 40 s
    (compilation 16.6 s at batch 1); bf16 planned as fp32 (not yet run on a GPU). Between
    them the `generation-loop` part: PyTorch's loop mode in both precisions."""
    return [*_decoding_sweeps(sweep, "fp32"), _loop_step(sweep), *_decoding_sweeps(sweep, "bf16")]


def _loop_step(sweep: tuple[str, ...]) -> Step:
    return Step(
        name="generation-torch-loop",
        part="generation-loop",
        # 6 cells, each a compilation with coordinate-descent tuning, a capture of 127 steps
        # and the check: planned at 60 s a cell (not yet run on a GPU)
        cap_s=400,
        argv=_sweep(
            "--suite=generation",
            "--framework=torch",
            "--mode=loop",
            "--precision=fp32,bf16",
            *sweep,
        ),
        what="GPT-2 token generation in PyTorch as its own fast decoding runs it (compiled "
        "with coordinate-descent tuning, products as mm + bias), every decode step of a "
        "generation replayed as one CUDA graph, 128/128 at batch 1, 8 and 64, fp32 and "
        "bf16: TTFT, TPOT and tokens/s, the tokens checked",
    )


def _decoding_sweeps(sweep: tuple[str, ...], precision: str) -> list[Step]:
    return [
        Step(
            name=name + ("" if precision == "fp32" else f"-{precision}"),
            part="generation" if precision == "fp32" else f"generation-{precision}",
            cap_s=cap,
            argv=_sweep(
                "--suite=generation",
                f"--framework={framework}",
                f"--mode={modes}",
                f"--precision={precision}",
                *sweep,
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


def _later_checks(device: str, s: Sizes, out: Path) -> list[Step]:
    """The checks part (the GPU tests, DDP over NCCL), then the equivalence part."""
    return [
        Step(
            name="gpu-tests",
            part="checks",
            cap_s=300,
            argv=_pytest(
                str(TESTS / "test_gpu.py"),
                "-m",
                "gpu",
                f"--junitxml={out / 'gpu-tests.xml'}",
            ),
            what="the GPU tests (the gpu marker)",
            needs=(TESTS / "test_gpu.py",),
        ),
        Step(
            name="ddp",
            part="checks",
            cap_s=180,
            argv=_pytest(
                str(SUITES / "test_scaling.py"),
                "--framework=torch",
                "--model=resnet56",
                "--workers=1",
                f"--device={device}",
                f"--preset={s.preset}",
                _json(out, "scaling"),
            ),
            what="data-parallel training on one worker (DDP over NCCL on a GPU)",
        ),
        Step(
            name="equivalence",
            part="equivalence",
            cap_s=420,
            argv=_pytest(
                str(SUITES / "test_equivalence.py"),
                f"--device={device}",
                "--precision=fp32,tf32",
                "--preset=smoke",  # the function, not the size, is what is checked
                _json(out, "equivalence"),
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
