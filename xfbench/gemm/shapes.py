"""Which products are timed: square sizes and the layer shapes, per preset.

A shape is (m, n, k): C (m x n) = A (m x k) @ B (k x n), 2*m*n*k floating-point
operations. The layer shapes are fully connected layers written as in x out
(after Raina et al. 2009): 576x1024, 1024x4096, 2304x16000 and 4096x11008. A
forward pass through such a layer is (batch x in) @ (in x out), so m = batch,
k = in, n = out. The batch is 4096: large enough that even the smallest layer
(2*4096*576*1024 = 4.8 GFLOP) keeps a current GPU's tensor cores busy, so the
figure measures the GEMM engine rather than launch overhead, and a common
large-batch training size. The smoke preset scales the batch down to 16 (and the
squares to 256 and 512) so that CI runs every code path on a CPU in seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xfbench.errors import UsageError
from xfbench.harness.selection import comma_list

SQUARES = (1024, 2048, 4096, 8192, 16384)
SMOKE_SQUARES = (256, 512)
LAYERS = ((576, 1024), (1024, 4096), (2304, 16000), (4096, 11008))  # (in, out)
LAYER_BATCH = 4096
SMOKE_LAYER_BATCH = 16


@dataclass(frozen=True)
class Shape:
    m: int
    n: int
    k: int
    label: str  # "8192" for a square, "b4096-2304x16000" for a layer, else "MxNxK"

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def elements(self) -> tuple[int, int, int]:
        """Elements of A, B and C."""
        return self.m * self.k, self.k * self.n, self.m * self.n


def square(n: int) -> Shape:
    return Shape(n, n, n, str(n))


def layer(batch: int, fan_in: int, fan_out: int) -> Shape:
    return Shape(batch, fan_out, fan_in, f"b{batch}-{fan_in}x{fan_out}")


def preset_shapes(preset: str) -> list[Shape]:
    if preset == "smoke":
        return [square(n) for n in SMOKE_SQUARES] + [
            layer(SMOKE_LAYER_BATCH, i, o) for i, o in LAYERS
        ]
    return [square(n) for n in SQUARES] + [layer(LAYER_BATCH, i, o) for i, o in LAYERS]


def parse_sizes(text: str) -> list[Shape]:
    """'1024,8192' (squares), 'MxNxK' (C is MxN, the inner dimension K), or
    'layers' / 'layers:B' (the four layer shapes at batch B, default 4096)."""
    out: list[Shape] = []
    for token in (t.lower() for t in comma_list(text)):
        m = re.fullmatch(r"layers(?::(\d+))?", token)
        if m:
            batch = int(m.group(1) or LAYER_BATCH)
            out += [layer(batch, i, o) for i, o in LAYERS]
            continue
        if re.fullmatch(r"\d+", token):
            out.append(square(int(token)))
            continue
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", token)
        if m:
            mm, nn, kk = (int(g) for g in m.groups())
            out.append(Shape(mm, nn, kk, f"{mm}x{nn}x{kk}"))
            continue
        raise UsageError(
            f"--gemm-sizes: cannot read {token!r}; use N (square), MxNxK, or layers[:BATCH]"
        )
    if any(min(s.m, s.n, s.k) < 1 for s in out):
        raise UsageError("--gemm-sizes: every dimension must be at least 1")
    if not out:
        raise UsageError("--gemm-sizes: no sizes given")
    return list(dict.fromkeys(out))
