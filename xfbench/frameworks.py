"""Every framework xfbench runs, declared once: selection, the runner, the reports, the
suites and the adapters all read this table. What a framework does in one suite (its GEMM
implementation, its scaling or all-reduce worker, its modes of token generation) is that
suite's own table, in its package.

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
    default: bool = True  # in a run that names no --framework
    aliases: tuple[str, ...] = ()  # other names a suite may accept for it (GEMM's --framework)


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
            table7_mode="eager",
        ),
        Framework(
            name="jax",
            display="JAX",
            package="jax",
            install_hint=f"{INSTALL} (GPU: the 'cuda12' or 'cuda13' extra, TPU: the 'tpu' extra)",
            adapter="xfbench.adapters.jax",
            modes=("jit",),
            table7_mode="jit",
        ),
        Framework(
            name="tensorflow",
            display="TensorFlow",
            package="tensorflow",
            install_hint=f"{INSTALL} (GPU: the 'cuda12' extra; TensorFlow has no CUDA 13 build)",
            adapter="xfbench.adapters.tensorflow",
            modes=("eager", "function", "xla"),
            table7_mode="function",
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
            tasks=("infer",),
            table7_mode="cpu",
            aliases=("onnx", "ort"),
        ),
    )
}


def names(**has) -> tuple[str, ...]:
    """Framework names, in table order, whose fields are true for every keyword given
    (e.g. names(default=True))."""
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
