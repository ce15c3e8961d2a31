"""Every framework xfbench runs, declared once: selection, the runner, the reports, the
GEMM, scaling and all-reduce suites and the adapters all read this table.

Adding a framework is one entry here plus its adapter package (docs/adding-a-framework.md).
Nothing here imports a framework.
"""

from __future__ import annotations

from dataclasses import dataclass

INSTALL = "pip install -r requirements.lock"


@dataclass(frozen=True)
class Framework:
    name: str  # the --framework value
    display: str  # its name in reports
    package: str  # the module that must be importable for it to run
    install_hint: str  # how to install it, said when it is missing
    adapter: str  # the module holding its ADAPTER
    modes: tuple[str, ...]  # its execution modes, its usual idiomatic path first
    tasks: tuple[str, ...] = ("train", "infer")
    table7_mode: str | None = None  # the one mode the table7 preset runs (None: the first)
    gemm: str | None = None  # its GEMM implementation (a name in xfbench.gemm.IMPLS)
    scaling: str | None = None  # its data-parallel worker module
    allreduce: str | None = None  # its all-reduce worker module
    # its modes of token generation (xfbench/generation), its usual fast path first
    generation_modes: tuple[str, ...] = ()
    # the precisions it decodes in: fp32, and bf16 where its weights and cache are bf16
    generation_precisions: tuple[str, ...] = ("fp32",)
    default: bool = True  # in a run that names no --framework
    aliases: tuple[str, ...] = ()  # other names the GEMM suite accepts for it


FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework(
            name="torch",
            display="PyTorch",
            package="torch",
            install_hint=INSTALL,
            adapter="xfbench.adapters.torch",
            modes=("eager", "compile", "cudagraph"),
            generation_modes=("eager", "compile", "cudagraph", "loop"),
            generation_precisions=("fp32", "bf16"),
            table7_mode="eager",
            gemm="torch",
            scaling="xfbench.scaling.torch_ddp",
            allreduce="xfbench.allreduce.torch_collectives",
        ),
        Framework(
            name="jax",
            display="JAX",
            package="jax",
            install_hint=f"{INSTALL} (GPU: the 'cuda12' or 'cuda13' extra, TPU: the 'tpu' extra)",
            adapter="xfbench.adapters.jax",
            modes=("jit",),
            # loop: token generation's decode steps in one compiled lax.fori_loop (jit's
            # program underneath: a generation-only mode)
            generation_modes=("jit", "loop"),
            generation_precisions=("fp32", "bf16"),
            table7_mode="jit",
            gemm="jax",
            scaling="xfbench.scaling.jax_sharding",
            allreduce="xfbench.allreduce.jax_psum",
        ),
        Framework(
            name="tensorflow",
            display="TensorFlow",
            package="tensorflow",
            install_hint=f"{INSTALL} (GPU: the 'cuda12' extra; TensorFlow has no CUDA 13 build)",
            adapter="xfbench.adapters.tensorflow",
            modes=("eager", "function", "xla"),
            generation_modes=("eager", "function", "xla"),
            table7_mode="function",
            gemm="tensorflow",
            scaling="xfbench.scaling.tensorflow_mirrored",
            aliases=("tf",),
        ),
        Framework(
            name="null",
            display="null (harness cost)",
            package="numpy",
            install_hint=INSTALL,
            adapter="xfbench.adapters.null",
            modes=("none",),
            default=False,
        ),
        Framework(
            name="onnxruntime",
            display="ONNX Runtime",
            package="onnxruntime",
            install_hint=f"{INSTALL} (CUDA 13 machines: the 'cuda13' extra's onnxruntime-gpu)",
            adapter="xfbench.adapters.onnxruntime",
            modes=("cpu", "cuda", "tensorrt", "fused"),
            # the decoder's opset-24 graph: the fused optimizer does not take it, TensorRT
            # is not measured here
            generation_modes=("cpu", "cuda"),
            tasks=("infer",),
            table7_mode="cpu",
            gemm="onnxruntime",
            aliases=("onnx", "ort"),
        ),
    )
}


def names(**has) -> tuple[str, ...]:
    """Framework names, in table order, whose fields are true for every keyword given
    (e.g. names(scaling=True), names(default=True))."""
    return tuple(
        f.name
        for f in FRAMEWORKS.values()
        if all(bool(getattr(f, key)) == bool(want) for key, want in has.items())
    )


def training() -> tuple[str, ...]:
    return tuple(f.name for f in FRAMEWORKS.values() if "train" in f.tasks and f.default)


def display(name: str) -> str:
    f = FRAMEWORKS.get(name)
    return f.display if f else name
