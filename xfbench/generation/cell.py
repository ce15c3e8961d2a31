"""A generation cell: GPT-2 decoding B sequences of ISL prompt tokens into OSL new ones,
in one framework, mode, precision, device and thread count; the cells a selection expands
to, and the defaults."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from xfbench.adapters import Cell, get_adapter
from xfbench.errors import UsageError
from xfbench.frameworks import FRAMEWORKS
from xfbench.harness.selection import Selection, fit_positions, option_list, token_lengths
from xfbench.models import get_spec
from xfbench.models import layers as L

TASK = "generate"
KIND = "generation"  # the kind of record its cells write (its fields: fields.py)
# Token generation needs a causal language model: GPT-2 small, and the decoder the size
# buyers serve (GPT-2's layers at GPT-3 6.7B's shape: models.DECODERS), decoded only when
# --model names it (DEFAULT_NETWORKS).
NETWORKS = ("gpt2", "gpt3_6_7b")
DEFAULT_NETWORKS = ("gpt2",)
NAMES = {"gpt2": "GPT-2", "gpt3_6_7b": "GPT-3 6.7B"}  # what a line or a table calls each
# (prompt tokens, new tokens) and batch sizes when --lengths and --batch-size are not
# given: 128/128 at batch 1 and 8 (full size); the smoke network's 64 positions hold 16/16.
LENGTHS = {"full": ((128, 128),), "smoke": ((16, 16),)}
BATCHES = {"full": (1, 8), "smoke": (1, 2)}
# On an accelerator decode stays bandwidth-bound to far larger batches (the decode
# roofline's ridge, docs/token-serving.md): its defaults add batch 64.
ACCELERATOR_BATCHES = {"full": (1, 8, 64), "smoke": (1, 2)}
# Precisions when --precision is not given: fp32, and on an accelerator bf16 beside it,
# in the frameworks that decode in it (half the bytes a decode step reads).
ACCELERATOR_PRECISIONS = ("fp32", "bf16")
# Each framework's modes of token generation, its usual fast path first. JAX's loop: the
# decode steps in one compiled lax.fori_loop (jit's program underneath: a generation-only
# mode). ONNX Runtime: the decoder's opset-24 graph, which its fused optimizer does not
# take; TensorRT is not measured here.
MODES = {
    "torch": ("eager", "compile", "cudagraph", "loop"),
    "jax": ("jit", "loop"),
    "tensorflow": ("eager", "function", "xla"),
    "onnxruntime": ("cpu", "cuda"),
}
# The precisions each framework decodes in: fp32, and bf16 where its weights and cache are
# bf16.
BF16_TOO = {"torch": ("fp32", "bf16"), "jax": ("fp32", "bf16")}


# The version of the code a cell times, by (framework, mode) (1 where not listed), raised
# in the commit that changes that timed path: a GPU reference's cell of an older version is
# not held by today's code, and the window planner measures it again first
# (xfbench/acceptance/plan.py). PyTorch's compiled decode, 2: the step as its own fast
# decoding writes it on a GPU (mm + bias, attention written out for Inductor, coordinate-
# descent tuning), the loop mode, and bf16 attention scores summed into float32.
TIMED = {("torch", "compile"): 2, ("torch", "cudagraph"): 2, ("torch", "loop"): 2}


def timed_version(cell: dict) -> int:
    """The version of the code that times a cell of these fields (TIMED)."""
    return TIMED.get((cell.get("framework"), cell.get("mode")), 1)


def held_precisions(framework: str) -> tuple[str, ...]:
    return BF16_TOO.get(framework, ("fp32",))


@dataclass(frozen=True, kw_only=True)
class GenerationCell(Cell):
    task: str = TASK
    prompt_tokens: int = 128  # ISL
    new_tokens: int = 128  # OSL: greedy decoding of exactly this many, no stop token

    @property
    def id(self) -> str:
        return f"{super().id}-p{self.prompt_tokens}-n{self.new_tokens}"

    def as_infer(self) -> Cell:
        """The inference cell of the same network, framework, mode, precision and device:
        what the adapter's check() asks about. A mode of generation only (JAX's loop) is
        asked about as its framework's own mode, which it compiles with."""
        own = {f.name: getattr(self, f.name) for f in fields(Cell)}
        modes = FRAMEWORKS[self.framework].modes
        mode = self.mode if self.mode in modes else modes[0]
        return Cell(**{**own, "task": "infer", "mode": mode})


def lengths(
    value: str | None, scale: str, networks: tuple[str, ...] = DEFAULT_NETWORKS
) -> list[tuple[int, int]]:
    """--lengths: prompt/new token pairs, e.g. 128/128,256/64 (default: the scale's)."""
    out = token_lengths(value)
    if not out:
        return list(LENGTHS[scale])
    for network in networks:
        positions = get_spec(network, scale).layer(L.TokenEmbedding)[0].positions
        fit_positions(out, NAMES[network], positions, scale)
    return out


def batches(value: str | None, scale: str, device: str = "cpu") -> list[int]:
    """--batch-size: one or more sizes, comma-separated (default: the scale's, on the
    device's kind)."""
    items = option_list("batch-size", value)
    if not items:
        return list((BATCHES if device == "cpu" else ACCELERATOR_BATCHES)[scale])
    for item in items:
        if not item.isdigit() or int(item) < 1:
            raise UsageError(f"--batch-size takes whole numbers above 0, not {item!r}")
    return sorted({int(i) for i in items})


def precisions(sel: Selection, framework: str, device: str) -> tuple[str, ...]:
    """The precisions a framework decodes in on a device: those asked for (each skipped
    with its reason where it cannot), else fp32, and on an accelerator bf16 where the
    framework decodes in it."""
    if sel.precisions_explicit or device == "cpu":
        return sel.precisions
    held = held_precisions(framework)
    return tuple(p for p in ACCELERATOR_PRECISIONS if p in held)


def modes(framework: str, device: str, asked: tuple[str, ...] | None) -> list[str]:
    """The generation modes of a framework on a device: those asked for that it has (each
    skipped with its reason if it cannot run there), else every one that runs there."""
    own = MODES.get(framework, ())
    if asked is not None:
        return [m for m in asked if m in own]
    adapter = get_adapter(framework)
    return [m for m in own if adapter.mode_reason(m, device) is None]


def expand(
    sel: Selection, pairs: Sequence[tuple[int, int]], sizes: Sequence[int] | None
) -> list[GenerationCell]:
    """Every generation cell of the selection; sizes None: each device's default batches."""
    for network in sel.networks:
        if network not in NETWORKS:
            raise UsageError(
                f"--model {network}: token generation runs {', '.join(NETWORKS)} (a "
                "decoder with a causal language-model head)"
            )
    out = []
    for network in sel.networks:
        for fw in sel.frameworks:
            if fw not in MODES and not sel.frameworks_explicit:
                continue
            for device in sel.devices:
                out += _cells(sel, network, fw, device=device, pairs=pairs, sizes=sizes)
    return out


def _cells(sel: Selection, network: str, fw: str, *, device: str, pairs, sizes) -> list:
    """A network's cells in one framework on one device."""
    return [
        GenerationCell(
            network=network,
            framework=fw,
            mode=mode,
            precision=precision,
            device=device,
            threads=sel.threads,
            batch_size=b,
            scale=sel.preset.scale,
            prompt_tokens=isl,
            new_tokens=osl,
        )
        for mode in modes(fw, device, sel.modes)
        for precision in precisions(sel, fw, device)
        for isl, osl in pairs
        for b in sizes or batches(None, sel.preset.scale, device)
    ]
