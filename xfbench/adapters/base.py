"""The adapter protocol: how one framework runs one cell.

An adapter module may be imported without importing its framework: everything
that needs the framework is imported inside methods, so listing adapters,
their modes and whether they are installed never starts a runtime (and never
starts one framework's thread pool inside another's process).

Lifecycle of one cell, as the harness drives it:
  1. configure_threads(n) in a fresh process, before the framework's first operation
     (the harness has already set the OMP/MKL/OpenBLAS variables and the CPU affinity);
  2. build(spec, cell, weights) -> Workload, with the batch resident on the device;
  3. workload.prepare() (ahead-of-time compilation where the framework has it),
     then the first step: both timed together as the compile time;
  4. warm-up steps, then the timed steps; each step returns only when the device
     has finished.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from xfbench.errors import CannotRun
from xfbench.frameworks import FRAMEWORKS, Framework

# fp64 is IEEE float64 throughout, on the CPU only: it is there to prove, far below fp32's
# round-off, that every framework computes the same function (harness/equivalence.py).
# int8: inference only, where a framework has a documented CPU path (statically quantized,
# calibrated on the synthetic samples; its distance from fp32 is recorded beside its speed).
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp64", "int8")
INT8_TRAIN_REASON = (
    "int8 is an inference precision here: training cells run fp32, tf32, bf16, fp16 or fp64"
)
TASKS = ("train", "infer")
# real: batches from the data set under --data-dir through the framework's own pipeline
DATA_MODES = ("resident", "copied", "real")


def not_installed(package: str, hint: str) -> str | None:
    """None when package can be imported, else why not and how to install it; imports
    nothing (a framework's import starts its thread pools)."""
    if importlib.util.find_spec(package) is None:
        return f"{package} is not installed ({hint})"
    return None


# The dtype each precision's matrix arithmetic (convolutions, dense layers, the LSTM's
# products) runs in: tf32 is float32 storage with TF32 tensor-core products.
MATH_DTYPES = {
    "fp32": "float32",
    "tf32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp64": "float64",
    "int8": "int8",
}


# The bytes of one value at each precision (the roofline's traffic, a decoder's weights).
VALUE_BYTES = {
    precision: 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
    for precision, dtype in MATH_DTYPES.items()
}


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> the nearest bfloat16 value (ties to even), kept as float32: what a bf16
    operand or weight holds, for a reference that computes with the same values."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return r.view(np.float32)


def check_layer_dtypes(precision: str, dtypes: dict[str, str], math_kinds) -> None:
    """Raise when a layer kind doing the cell's matrix arithmetic (math_kinds, as the
    adapter names them in dtypes: layer kind -> the dtype or dtypes it ran, comma
    separated) ran another dtype than the precision names: a cell labelled bf16 must not
    time an fp16 or fp32 LSTM. Adapters record dtypes as layer_dtypes."""
    want = MATH_DTYPES[precision]
    wrong = {
        kind: ran
        for kind, ran in dtypes.items()
        if kind in math_kinds and set(ran.split(",")) != {want}
    }
    if wrong:
        said = ", ".join(f"{kind} ran {ran}" for kind, ran in sorted(wrong.items()))
        raise RuntimeError(f"a {precision} cell must compute in {want}, but {said}")


def cpu_half_reason(cell) -> str | None:
    """Why a full-size CPU cell in a half type is not run: the CPU has no arithmetic of that
    type (machine.half_arithmetic), so every framework would time its slow fallback
    (PyTorch's bf16 matmul: 1.2 GFLOP/s on an AVX2 Zen 3, against 32 in fp32). Smoke
    sizes still run: they check the code, not its speed."""
    from xfbench.machine import half_arithmetic

    if cell.device != "cpu" or cell.precision not in ("bf16", "fp16") or cell.scale != "full":
        return None
    why = half_arithmetic(cell.precision)
    return f"not measured at full size: {why}" if why else None


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One measurement: (network, framework, mode, precision, device, threads, batch[,
    sequence length])."""

    network: str
    framework: str
    mode: str
    precision: str
    device: str  # "cpu", "cuda:N" or "tpu:N"
    threads: int  # CPU threads the process is pinned to
    batch_size: int
    task: str = "train"  # "train" or "infer"
    data: str = "resident"  # "resident", "copied" (host-to-device copy inside each step), "real"
    scale: str = "full"  # "full" or "smoke"
    tokens: int | None = None  # a transformer's sequence length (None: the network's own)

    @property
    def id(self) -> str:
        return (
            f"{self.framework}-{self.network}-{self.mode}-{self.precision}-"
            f"{self.device.replace(':', '')}-t{self.threads}-b{self.batch_size}"
            + (f"-s{self.tokens}" if self.tokens else "")
            + ("" if self.data == "resident" else f"-{self.data}")
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict[str, Any]):
        """The cell as_dict() describes (other keys, such as a record's kind, ignored)."""
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})


class Workload:
    """A built network with its batch, ready to step. Subclassed per framework."""

    #: facts about how the cell really ran, merged into the result's extra_info
    #: (device_name, layout, library versions, ...)
    info: dict[str, Any]

    def prepare(self) -> None:
        """Compile ahead of the first step where the framework can (timed as compile)."""

    def step(self) -> None:
        """One training or inference step; returns when the device has finished."""
        raise NotImplementedError

    def loss(self) -> float:
        """The loss computed by the last training step."""
        raise NotImplementedError

    def output(self) -> np.ndarray:
        """The logits of the last inference step, as float32 (float64 for fp64), shaped
        (N, classes) or (N, T, classes)."""
        raise NotImplementedError

    def weights(self) -> dict[str, np.ndarray]:
        """Current parameters in canonical names and layouts (see models/layers.py), as
        float32 (float64 for fp64)."""
        raise NotImplementedError

    def export_onnx(self, path: str) -> None:
        """Write the network, with its current weights, as an ONNX file at path that
        maps "input" (the batch as synthetic_batch gives it) to "logits" (as output()
        returns them), in evaluation mode. Frameworks without an exporter raise."""
        raise CannotRun(f"{type(self).__name__} has no ONNX export")

    # --data real: the loader workers the pipeline really runs, where that is not the
    # number asked for (ONNX Runtime's has none); None: as asked
    input_workers: int | None = None

    def input_batches(self, source, seed: int, workers: int):
        """--data real: an endless iterator of batches of source (data/sources.py) through
        the framework's own input pipeline, with workers loader workers, in the shared
        seeded order; each batch goes to feed(). Its close(), where it has one, stops
        the workers."""
        raise CannotRun(f"{type(self).__name__} has no input pipeline")

    def infer_samples(self, x: np.ndarray) -> np.ndarray:
        """Serving (xfbench/serving): x, host samples as synthetic_batch gives them (as many
        as this workload's batch), copied to the device in the network's layout, one
        inference step, and its logits back on the host (as output() gives them). An
        inference workload only."""
        raise CannotRun(f"{type(self).__name__} cannot serve samples")

    def feed(self, x, y) -> None:
        """Make a batch from input_batches the one the next step trains on (on the
        device, in the network's layout), as the resident batch is made."""
        raise CannotRun(f"{type(self).__name__} has no input pipeline")

    def compile_facts(self) -> dict:
        """After the first step: what was compiled (graphs, graph breaks), for the record.
        Raises RuntimeError when a compiled mode fell back to running uncompiled, so a
        cell labelled compiled never times eager code. Default: nothing to say."""
        return {}

    def replay_facts(self) -> dict:
        """After the timed rounds, one more step, untimed, proving what the mode claims
        that only a run shows (a cudagraph cell's graphs replayed); RuntimeError where it
        does not hold. Default: nothing to prove."""
        return {}

    def layer_times(self, steps: int) -> list[dict]:
        """Each top-level spec layer's seconds inside the running network, the median of
        `steps` profiled steps of the cell's own step (after its warm-up; never in timed
        rounds): [{"layer", "forward_s", "backward_s" (None for inference)}] in the spec's
        order, then "(outside layers)", the rest of the step. Raises CannotRun saying why
        where the framework cannot attribute its work to the spec's layers."""
        raise CannotRun(f"{type(self).__name__} does not time its layers")

    def reset_peak_memory(self) -> None:
        """Start a new peak of device memory (no-op on the host)."""

    def peak_device_memory(self) -> int | None:
        """Peak bytes allocated on the device since reset, None on the host."""
        return None

    def close(self) -> None:
        """Release device memory."""


# What Generator.decode_profile gives a generation record.
DECODE_PROFILE = ("kernels_per_decode_step", "decode_step_kernel_us", "decode_step_kernels")


class Generator:
    """Greedy decoding of one static batch of sequences with a key/value cache allocated
    once, for prompt_tokens + new_tokens positions (xfbench/generation). Subclassed per
    framework; each call returns only once the device has finished (it hands back the
    chosen token ids, on the host).

    prefill(prompt) starts a new batch: the prompt (B, ISL) int64 fills cache positions
    [0, ISL) and the ids of the next token come back, (B,) int64. Each decode(tokens)
    then writes the next position for those ids (B,) and returns the ids after them.
    Greedy: each id is the argmax of its logits, taken on the device; logits() is those
    of the last call, (B, vocab) float32, for the token check only."""

    info: dict[str, Any]
    cache_bytes: int  # the key/value cache as allocated (keys and values, every layer)

    def prefill(self, prompt: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def decode(self, tokens: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def logits(self) -> np.ndarray:
        raise NotImplementedError

    def compile_facts(self) -> dict:
        """After the first sequence: what was compiled; raises RuntimeError where a
        compiled mode fell back to running uncompiled."""
        return {}

    def run(self, prompt: np.ndarray, new_tokens: int, keep: list[int] | None = None):
        """The whole generation with the host out of the decode loop: (tokens (B, OSL),
        TTFT s, each decode step's s, the kept rows' logits (rows, OSL, vocab) or None),
        the steps timed on the device. None (the default): the generator decodes step by
        step from the host, and metrics.generate times each call."""
        return None

    def decode_profile(self, tokens: np.ndarray) -> dict:
        """One decode step under a GPU's profiler (untimed): its kernels, their device time,
        the costliest by name (DECODE_PROFILE's fields); None each where there is none."""
        return dict.fromkeys(DECODE_PROFILE)

    def replay_facts(self, generation: Callable[[], object]) -> dict:
        """After the timed generations, generation() once more, untimed, proving what the
        mode claims that only a run shows (a cudagraph cell's graphs replayed);
        RuntimeError where it does not hold. Default: nothing to prove."""
        return {}

    def peak_device_memory(self) -> int | None:
        """Peak bytes on the device since reset_peak_memory (the cell's own), None on the
        host."""
        return None

    def reset_peak_memory(self) -> None:
        """Start a new peak of device memory (no-op on the host)."""

    def close(self) -> None:
        """Release device memory."""


class Adapter:
    """One framework. Subclasses set `name` (its entry in xfbench.frameworks, which gives
    its package, modes, tasks and install hint) and implement the methods."""

    name: str = ""  # the --framework value
    precisions: tuple[str, ...] = PRECISIONS
    # whether its generator makes a decoder's weights on its device (models/seeded.py:
    # given seeded.Made), never through the host
    makes_weights: bool = False
    # Why int8 cells skip, for a framework without "int8" in precisions.
    int8_reason: str = "has no int8 inference path in this suite"

    @property
    def framework(self) -> Framework:
        return FRAMEWORKS[self.name]

    @property
    def package(self) -> str:
        """The importable module that must be installed."""
        return self.framework.package

    @property
    def modes(self) -> tuple[str, ...]:
        return self.framework.modes

    @property
    def tasks(self) -> tuple[str, ...]:
        """ "train" and/or "infer"."""
        return self.framework.tasks

    @property
    def install_hint(self) -> str:
        return self.framework.install_hint

    def import_error(self) -> str | None:
        """None when the framework is installed, else why not (no import is done)."""
        return not_installed(self.package, self.install_hint)

    def versions(self) -> dict[str, str]:
        """Library and runtime versions (framework, CUDA, cuDNN, ...)."""
        raise NotImplementedError

    def devices(self) -> list[str]:
        """The devices this framework can really use here, in harness names."""
        raise NotImplementedError

    def mode_reason(self, mode: str, device: str) -> str | None:
        """None when mode runs on this kind of device, else why not."""
        return None

    def mode_applies(self, mode: str, network: str) -> bool:
        """Whether mode is one for this network at all (a mode for some networks only is
        left out of a sweep that did not name it, and skipped with its reason if named)."""
        return True

    def precision_reason(self, mode: str, precision: str, device: str) -> str | None:
        """None when mode computes in precision on this kind of device, else why not
        (checked after the device)."""
        return None

    #: why per-layer time is not measured in this framework (layer_times_reason)
    layers_reason = "is not profiled per layer by xfbench"

    def layer_times_reason(self, cell: Cell) -> str | None:
        """None when Workload.layer_times can time this cell's layers, else why not
        (asked before building, so a sweep never builds a cell only to hear no)."""
        return f"{self.framework.display} {self.layers_reason}"

    def configure_threads(self, threads: int) -> dict[str, Any]:
        """Set the framework's own thread knobs; returns what it reports it will use."""
        return {}

    def attention_scores_kept(self, cell: Cell) -> int:
        """How many (T, T) matrices of attention scores or probabilities, per head and
        layer, the cell's attention keeps in the master dtype: for its backward pass
        (training) or in flight (inference). 0 for a fused kernel that keeps none. Read by
        the memory pre-check before anything is built; imports no framework."""
        return 0

    def build(self, spec, cell: Cell, weights: dict[str, np.ndarray]) -> Workload:
        raise NotImplementedError

    def generator(self, spec, cell, weights: dict[str, np.ndarray]) -> Generator:
        """A generation cell's decoder (xfbench/generation/cell.py) with the weights."""
        raise CannotRun(f"{self.framework.display} has no token generation in xfbench")

    def check(self, cell: Cell) -> str | None:
        """Why this cell cannot run here, or None. Imports the framework."""
        if cell.mode not in self.modes:
            return f"{self.name} has no mode {cell.mode!r} (modes: {', '.join(self.modes)})"
        if cell.precision == "int8" and cell.task == "train":
            return INT8_TRAIN_REASON
        if cell.precision == "int8" and "int8" not in self.precisions:
            return f"{self.framework.display} {self.int8_reason}"
        if cell.precision not in self.precisions:
            return f"{self.name} does not run {cell.precision}"
        reason = self.mode_reason(cell.mode, cell.device)
        if reason:
            return reason
        if cell.precision == "tf32" and not cell.device.startswith("cuda"):
            return "tf32 is a mode of NVIDIA tensor cores; it has no meaning on " + cell.device
        if cell.precision == "fp64" and cell.device != "cpu":
            # Accelerators run float64 slowly or not at all; the proof needs only the CPU.
            return "fp64 runs on the CPU only (it is the equivalence proof's precision)"
        reason = self.precision_reason(cell.mode, cell.precision, cell.device)
        if reason:
            return reason
        reason = cpu_half_reason(cell)
        if reason:
            return reason
        seen = self.devices()
        if cell.device not in seen:
            return f"{cell.device} is not present to {self.name} (it sees: {', '.join(seen)})"
        return None
