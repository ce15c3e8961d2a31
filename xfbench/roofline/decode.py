"""The decode roofline: what one decode step of a transformer language model must move and
compute, against a machine's measured bandwidth and peak.

A decode step of B sequences reads every weight once (shared by the batch) and each
sequence's key/value cache, and computes about two FLOPs per weight per sequence plus
attention over the cache. The weights dominate at small batches, so decode is
bandwidth-bound there; the FLOPs grow with B and the weights' bytes do not, so at some
batch (the ridge) the step becomes compute-bound, unless the cache, which also grows
with B, keeps it bandwidth-bound for ever (long contexts).

The cache counted is the one xfbench's decoders read: the whole static cache of ISL + OSL
positions each step (masked past the filled ones; docs/generation.md). A decoder that
reads only the filled positions moves less, on average (ISL + OSL / 2) positions.
"""

from __future__ import annotations

from dataclasses import dataclass

from xfbench.models import Spec
from xfbench.models import layers as L


@dataclass(frozen=True)
class DecodeStep:
    batch: int
    positions: int  # cache positions each sequence's step reads
    weights_bytes: int
    cache_bytes: int  # every sequence's keys and values, every layer
    flops: int

    @property
    def bytes(self) -> int:
        return self.weights_bytes + self.cache_bytes

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    def seconds(self, bandwidth_gbps: float, peak_tflops: float | None) -> tuple[float, str]:
        """(the least time the step can take, what bounds it: bandwidth or compute)."""
        moved = self.bytes / (bandwidth_gbps * 1e9)
        computed = self.flops / (peak_tflops * 1e12) if peak_tflops else 0.0
        return (moved, "bandwidth") if moved >= computed else (computed, "compute")


def _sizes(spec: Spec) -> tuple[int, int, int]:
    """(layers, model width, weights used as matrices: all but the position table)."""
    embed = spec.layer(L.TokenEmbedding)[0]
    blocks = spec.layer(L.TransformerBlock)
    return len(blocks), embed.dim, spec.param_count - embed.positions * embed.dim


def step(spec: Spec, batch: int, positions: int, value_bytes: int = 4) -> DecodeStep:
    """One decode step of batch sequences over a cache of `positions` positions."""
    layers, d, matrices = _sizes(spec)
    per_sequence_cache = 2 * layers * positions * d * value_bytes  # keys and values
    # two FLOPs per matrix weight (the tied embedding is the head's matrix); attention:
    # q.K and p.V over the positions, 2 x positions x d each, per layer
    per_sequence_flops = 2 * matrices + 4 * layers * positions * d
    return DecodeStep(
        batch=batch,
        positions=positions,
        weights_bytes=spec.param_count * value_bytes,
        cache_bytes=batch * per_sequence_cache,
        flops=batch * per_sequence_flops,
    )


def ridge_batch(
    spec: Spec, positions: int, roofs: tuple[float, float], value_bytes: int = 4
) -> float | None:
    """The batch from which a decode step is compute-bound at roofs (bandwidth GB/s, peak
    TFLOP/s): (W + B C) / bw = B F / peak
    gives B = W / (F bw / peak - C). None where F bw / peak <= C: each sequence's cache
    takes longer to read than its FLOPs to compute, and no batch is compute-bound."""
    bandwidth_gbps, peak_tflops = roofs
    one = step(spec, 1, positions, value_bytes)
    weights, cache, flops = one.weights_bytes, one.cache_bytes, one.flops
    denominator = flops * (bandwidth_gbps * 1e9) / (peak_tflops * 1e12) - cache
    return weights / denominator if denominator > 0 else None


HEADERS = [
    "batch",
    "bytes/step MB",
    "GFLOP/step",
    "FLOP/byte",
    "bound ms/step",
    "bound by",
    "tokens/s per sequence",
    "tokens/s",
]


def rows(
    spec: Spec, batches, positions: int, *, roofs: tuple[float, float | None], value_bytes: int
) -> list[list[str]]:
    """One row per batch; roofs: (bandwidth GB/s, peak TFLOP/s or None)."""
    bandwidth_gbps, peak_tflops = roofs
    out = []
    for b in batches:
        s = step(spec, b, positions, value_bytes)
        seconds, limit = s.seconds(bandwidth_gbps, peak_tflops)
        out.append(
            [
                str(b),
                f"{s.bytes / 1e6:.4g}",
                f"{s.flops / 1e9:.4g}",
                f"{s.intensity:.3g}",
                f"{seconds * 1e3:.4g}",
                limit,
                f"{1 / seconds:.4g}",
                f"{b / seconds:.4g}",
            ]
        )
    return out


def table(
    spec: Spec,
    *,
    batches,
    lengths: tuple[int, int],
    bandwidth_gbps: float,
    peak_tflops: float | None,
    precision: str = "fp32",
    fmt: str = "md",
) -> str:
    """The decode roofline of spec at lengths (ISL, OSL) for each batch, with the ridge;
    weights and cache held in precision."""
    from tabulate import tabulate

    from xfbench.roofline.profile import VALUE_BYTES

    size = VALUE_BYTES[precision]
    positions = sum(lengths)
    body = rows(spec, batches, positions, roofs=(bandwidth_gbps, peak_tflops), value_bytes=size)
    if fmt == "csv":
        return "\n".join(",".join(r) for r in [HEADERS, *body])
    ridge = (
        ridge_batch(spec, positions, (bandwidth_gbps, peak_tflops), size) if peak_tflops else None
    )
    said = (
        f"decode is compute-bound from batch {ridge:.3g} (the ridge)"
        if ridge
        else "no batch is compute-bound: each sequence's cache read outlasts its FLOPs"
        if peak_tflops
        else "no peak given: the compute bound is not drawn"
    )
    return "\n".join(
        [
            f"{spec.id}: one decode step, {positions} cache positions ({lengths[0]}/{lengths[1]}), "
            f"{precision}, at {bandwidth_gbps:.4g} GB/s"
            + (f" and {peak_tflops:.4g} TFLOP/s" if peak_tflops else "")
            + f"; {said}",
            "",
            tabulate(body, headers=HEADERS, tablefmt="github", disable_numparse=True),
        ]
    )
