"""Canonical (ONNX-layout) weights to and from the JAX parameter dict.

Names are the same on both sides; only layouts change:
- conv kernels: canonical (O, I, KH, KW) <-> JAX HWIO (KH, KW, I, O);
- dense kernels: canonical (out, in) <-> JAX (in, out);
- the dense layer right after a Flatten of a (C, H, W) map: its input features are
  also reordered from channels-first (C, H, W) to the NHWC flatten's (H, W, C), so
  that the same canonical weights give the same function;
- LSTM: W (4H, in) <-> (in, 4H) and R (4H, H) <-> (H, 4H), gate blocks kept in the
  canonical order i, o, f, c; B (8H,) is used as it is (both biases kept);
- biases, BatchNorm scale and shift, and the embedding table: unchanged.
"""

from __future__ import annotations

import numpy as np

from xfbench.models import Spec
from xfbench.models import layers as L

# Layout kinds: how one canonical tensor maps to its JAX layout.
CONV, DENSE, FLAT_DENSE, PLAIN = "conv", "dense", "flat_dense", "plain"


def layouts(spec: Spec) -> dict[str, tuple[str, tuple[int, ...]]]:
    """canonical name -> (layout kind, the (C, H, W) map flattened before it, if any)."""
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    flattened: tuple[int, ...] = ()

    def visit(layer: L.Layer, x: tuple[int, ...]) -> None:
        nonlocal flattened
        if isinstance(layer, (L.BasicBlock, L.Bottleneck)):
            for part, shape in layer.parts(x):
                visit(part, shape)
            return
        if isinstance(layer, L.Flatten):
            flattened = x if len(x) == 3 else ()
            return
        for p in layer.params(x):
            kind = PLAIN
            if p.name.endswith(".weight") and isinstance(layer, L.Conv):
                kind = CONV
            elif p.name.endswith(".weight") and isinstance(layer, L.Dense):
                kind = FLAT_DENSE if flattened else DENSE
            elif isinstance(layer, L.LSTM) and p.name.endswith((".W", ".R")):
                kind = DENSE
            out[p.name] = (kind, flattened if kind == FLAT_DENSE else ())
        if isinstance(layer, L.Dense):
            flattened = ()

    for layer, x in spec.shapes:
        visit(layer, x)
    return out


def to_jax(spec: Spec, weights: dict[str, np.ndarray], dtype=np.float32) -> dict[str, np.ndarray]:
    """The JAX parameter dict (host arrays, float32 unless asked) from canonical weights."""
    out = {}
    for name, (kind, chw) in layouts(spec).items():
        if name not in weights:
            raise ValueError(f"{spec.id}: no canonical weight {name!r}")
        w = np.asarray(weights[name], dtype)
        if kind == CONV:
            w = w.transpose(2, 3, 1, 0)
        elif kind == DENSE:
            w = w.T
        elif kind == FLAT_DENSE:
            c, h, wd = chw
            w = w.reshape(w.shape[0], c, h, wd).transpose(2, 3, 1, 0).reshape(h * wd * c, -1)
        out[name] = np.ascontiguousarray(w)
    return out


def to_canonical(
    spec: Spec, params: dict[str, np.ndarray], dtype=np.float32
) -> dict[str, np.ndarray]:
    """Canonical weights (float32 unless asked) from the JAX parameter dict (host arrays)."""
    out = {}
    for name, (kind, chw) in layouts(spec).items():
        w = np.asarray(params[name], dtype)
        if kind == CONV:
            w = w.transpose(3, 2, 0, 1)
        elif kind == DENSE:
            w = w.T
        elif kind == FLAT_DENSE:
            c, h, wd = chw
            w = w.reshape(h, wd, c, -1).transpose(3, 2, 0, 1).reshape(-1, c * h * wd)
        out[name] = np.ascontiguousarray(w)
    return out
