"""Every layer of a network, from its spec, with its FLOPs, the bytes it moves and its
arithmetic intensity, and the totals of a forward pass and of a training step: what
`xfbench profile NETWORK` prints (roofline/cli.py).

The traffic model is a lower bound (docs/measurement.md, The roofline): each layer reads
its inputs and weights and writes its outputs once (for a block that is not split into
parts, every value it produces inside). A training step moves its forward pass's bytes
three times (forward; backward: the output gradient and the input read, the input and
weight gradients written) plus the optimizer's: SGD with momentum reads the weight, its
gradient and its momentum and writes two of them (5 values a parameter), AdamW reads four
and writes three (7). The FLOPs are the spec's, the numbers docs/models.md gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xfbench.adapters.base import VALUE_BYTES
from xfbench.models import Spec

# Bytes of one activation or weight value as a precision computes it (mixed precision:
# the half-precision copies the products read), from the adapters' one table of dtypes.
TOKEN_BYTES = 8  # token ids are int64
OPTIMIZER_VALUES = {"sgd": 5, "adamw": 7}  # values read and written per parameter


@dataclass(frozen=True)
class Row:
    name: str
    kind: str
    out_shape: tuple[int, ...]  # one sample's
    params: int
    flops: int
    in_bytes: int
    weight_bytes: int
    out_bytes: int

    @property
    def working_set(self) -> int:
        return self.in_bytes + self.weight_bytes + self.out_bytes

    @property
    def intensity(self) -> float:
        return self.flops / self.working_set if self.working_set else 0.0


def split(layer, x) -> list:
    """A layer with its input shape, or a block's parts, each with its own."""
    parts = getattr(layer, "parts", None)
    return parts(x) if parts else [(layer, x)]


def _parts(spec: Spec):
    """Every layer with its input shape, blocks that list their parts split into them."""
    for layer, x in spec.shapes:
        yield from split(layer, x)


def rows(spec: Spec, batch: int, precision: str = "fp32", task: str = "infer") -> list[Row]:
    """One row per layer for a batch: forward (infer), or forward and backward (train,
    3 x the FLOPs and bytes)."""
    value = VALUE_BYTES[precision]
    times = 3 if task == "train" else 1
    out = []
    for i, (layer, x) in enumerate(_parts(spec)):
        first_tokens = i == 0 and spec.sequence
        in_bytes = prod(x) * batch * (TOKEN_BYTES if first_tokens else value)
        params = sum(p.size for p in layer.params(x))
        out.append(
            Row(
                name=getattr(layer, "name", "") or type(layer).__name__,
                kind=type(layer).__name__,
                out_shape=tuple(layer.out_shape(x)),
                params=params,
                flops=times * 2 * layer.macs(x) * batch,
                in_bytes=times * in_bytes,
                weight_bytes=times * params * value,
                out_bytes=times * layer.activations(x) * batch * value,
            )
        )
    return out


def traffic(spec: Spec, task: str, batch: int, precision: str = "fp32") -> int:
    """The bytes one step moves at least: the forward pass's rows, three times for a
    training step, plus the optimizer's reads and writes of every parameter (4-byte
    master weights)."""
    forward = sum(r.working_set for r in rows(spec, batch, precision))
    if task != "train":
        return forward
    return 3 * forward + OPTIMIZER_VALUES[spec.optimizer] * spec.param_count * 4


def intensity(spec: Spec, task: str, batch: int, precision: str = "fp32") -> float:
    """FLOPs per byte of one step (the spec's FLOPs over traffic())."""
    return spec.flops(task, batch) / traffic(spec, task, batch, precision)


def _human(n: float) -> str:
    for unit in ("", "K", "M", "G", "T", "P"):
        if abs(n) < 1000:
            return f"{n:.3g}{unit}"
        n /= 1000
    return f"{n:.3g}E"


def table(spec: Spec, batch: int, precision: str, task: str, fmt: str) -> str:
    from tabulate import tabulate

    body = rows(spec, batch, precision, task)
    headers = [
        "layer",
        "kind",
        "output (per sample)",
        "params",
        "FLOPs",
        "input B",
        "weight B",
        "output B",
        "working set B",
        "FLOP/B",
    ]
    lines = []
    for r in body:
        numbers = (r.params, r.flops, r.in_bytes, r.weight_bytes, r.out_bytes, r.working_set)
        shown = numbers if fmt == "csv" else tuple(_human(n) for n in numbers)
        lines.append(
            [r.name, r.kind, "x".join(map(str, r.out_shape)), *shown, f"{r.intensity:.3g}"]
        )
    if fmt == "csv":
        import csv
        import io

        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(headers)
        writer.writerows(lines)
        return buffer.getvalue().rstrip("\n")
    text = tabulate(lines, headers=headers, tablefmt="github", disable_numparse=True)
    totals = []
    for name in ("infer", "train"):
        flops = spec.flops(name, batch)
        moved = traffic(spec, name, batch, precision)
        what = "forward pass" if name == "infer" else f"training step ({spec.optimizer})"
        totals.append([what, _human(flops), _human(moved), f"{flops / moved:.3g}"])
    text += "\n\n" + tabulate(
        totals, headers=["totals", "FLOPs", "bytes (lower bound)", "FLOP/B"], tablefmt="github"
    )
    return text


def plot(spec: Spec, batch: int, precision: str, task: str, path: str) -> None:
    """Per-layer FLOPs and working set, two bar charts one above the other."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    body = rows(spec, batch, precision, task)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(8, len(body) * 0.12), 6), sharex=True)
    xs = range(len(body))
    top.bar(xs, [r.flops for r in body])
    top.set_ylabel("FLOPs")
    top.set_yscale("log")
    bottom.bar(xs, [r.working_set for r in body], color="tab:orange")
    bottom.set_ylabel("working set, bytes")
    bottom.set_yscale("log")
    bottom.set_xlabel("layer (in order)")
    top.set_title(f"{spec.paper_name}: per layer, {task}, batch {batch}, {precision}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
