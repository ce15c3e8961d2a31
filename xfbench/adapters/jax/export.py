"""Export a JAX network to ONNX through jax2onnx.

The forward pass in evaluation mode, with the current parameters and running
statistics closed over (they become the file's initializers), is traced by
jax2onnx.to_onnx. The exported graph keeps the exchange interface: "input"
channels-first images, or (N, T) token ids, and "logits" (N, classes) or
(N, T, classes); the NHWC and time-major transposes happen inside. Token ids are
int32 in the file, as JAX (without 64-bit types) traces them.

jax2onnx 0.17.1 turns lax.reduce_window pooling into a MaxPool over four axes
(batch and channels with window 1), which ONNX Runtime cannot run. The export
therefore traces pooling written as k*k strided slices combined by maximum (exact)
or by sum (the same up to the order of additions); the check that ONNX Runtime
reproduces the JAX network's own logits covers this.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from xfbench.adapters.jax import networks
from xfbench.exchange.graph import INPUT, OPSET, OUTPUT


def _windows(x, k: int, s: int):
    """The k*k strided slices of NHWC x that a k x k window with stride s visits."""
    _, h, w, _ = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    return [
        x[:, i : i + s * (oh - 1) + 1 : s, j : j + s * (ow - 1) + 1 : s, :]
        for i in range(k)
        for j in range(k)
    ]


def _max_pool(x, k: int, s: int, p: int = 0):
    if p:
        x = jnp.pad(x, ((0, 0), (p, p), (p, p), (0, 0)), constant_values=-jnp.inf)
    parts = _windows(x, k, s)
    out = parts[0]
    for part in parts[1:]:
        out = jnp.maximum(out, part)
    return out


def _avg_pool(x, k: int, s: int):
    return sum(_windows(x, k, s)) / (k * k)


def export_onnx(work, path: str) -> None:
    from jax2onnx import to_onnx

    spec = work.spec
    state = jax.device_get(work.state)
    params = {k: np.asarray(v) for k, v in state["params"].items()}
    stats = {k: np.asarray(v) for k, v in state["stats"].items()}

    def forward(x):
        if spec.time_major:
            logits, _ = networks.apply(
                spec=spec, params=params, stats=stats, x=x.T, train=False, dtype=work.dtype
            )
            return jnp.transpose(logits, (1, 0, 2))
        if networks.image_layout(spec):
            x = jnp.transpose(x, (0, 2, 3, 1))
        logits, _ = networks.apply(
            spec=spec, params=params, stats=stats, x=x, train=False, dtype=work.dtype
        )
        return logits

    dtype = jnp.int32 if spec.sequence else jnp.float32
    example = jax.ShapeDtypeStruct((work.cell.batch_size,) + spec.input_shape, dtype)
    pools = networks.max_pool, networks.avg_pool
    networks.max_pool, networks.avg_pool = _max_pool, _avg_pool
    try:
        to_onnx(
            forward,
            [example],
            opset=OPSET,
            input_names=[INPUT],
            output_names=[OUTPUT],
            return_mode="file",
            output_path=str(path),
        )
    finally:
        networks.max_pool, networks.avg_pool = pools
