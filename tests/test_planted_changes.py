"""The function check (harness.equivalence.check_function) sees a small change of function:
planted in each framework where each can happen (the GELU of the other form, a causal mask
one position off, a softmax scale off by a factor), the framework's logits at trained-range
weights fail it, where the same framework unplanted passes. Each plant is made in that
framework's own code path only: the float64 reference and the plain fp32 floor are built
from the canonical graph as written."""

from __future__ import annotations

import contextlib
import math

import pytest

from xfbench.harness.equivalence import check_function
from xfbench.models import get_spec, initial_weights

BATCH = 4
SCALE_OFF = 1.25  # a softmax scale 25 % off
PLANTS = ("gelu", "mask", "scale")


def _check(framework: str, mode: str, network: str = "gpt2") -> dict:
    spec = get_spec(network, "smoke")
    return check_function(framework, spec, initial_weights(spec, 0), BATCH, mode=mode)


def _torch(monkeypatch, plant: str) -> None:
    torch = pytest.importorskip("torch")
    from xfbench.adapters.torch import transformer

    sdpa = torch.nn.functional.scaled_dot_product_attention
    if plant == "gelu":
        gelu = transformer.F.gelu
        monkeypatch.setattr(
            transformer.F,
            "gelu",
            lambda x, approximate="none": gelu(
                x, approximate="none" if approximate == "tanh" else "tanh"
            ),
        )
        return

    def planted(self, q, k, v):
        t = q.shape[-2]
        if plant == "mask":  # each query also sees the next key
            allowed = torch.ones(t, t, dtype=torch.bool).tril(diagonal=1)
            return sdpa(q, k, v, attn_mask=allowed if self.causal else None)
        scale = SCALE_OFF / math.sqrt(q.shape[-1])
        return sdpa(q, k, v, is_causal=self.causal, scale=scale)

    monkeypatch.setattr(transformer.ScaledDotProduct, "forward", planted)


def _jax(monkeypatch, plant: str) -> None:
    jax = pytest.importorskip("jax")
    from xfbench.adapters.jax import transformer

    if plant == "gelu":
        monkeypatch.setattr(
            transformer,
            "gelu",
            lambda x, kind: jax.nn.gelu(x, approximate=kind != "tanh"),
        )
        return
    attention = jax.nn.dot_product_attention

    def planted(q, k, v, *, is_causal=False, implementation=None, **kwargs):
        if plant == "mask" and is_causal:
            t = q.shape[1]
            allowed = jax.numpy.tril(jax.numpy.ones((t, t), bool), k=1)
            return attention(q, k, v, mask=allowed, implementation=implementation)
        scale = SCALE_OFF / math.sqrt(q.shape[-1])
        return attention(q, k, v, is_causal=is_causal, scale=scale, implementation=implementation)

    monkeypatch.setattr(jax.nn, "dot_product_attention", planted)


def _tensorflow(monkeypatch, plant: str) -> None:
    tf = pytest.importorskip("tensorflow")
    from xfbench.adapters.tensorflow import transformer

    if plant == "gelu":
        gelu = transformer._gelu
        monkeypatch.setattr(
            transformer, "_gelu", lambda x, tanh, written=False: gelu(x, not tanh, written)
        )
    elif plant == "mask":
        monkeypatch.setattr(
            transformer,
            "_causal",
            lambda t: tf.linalg.band_part(tf.ones((t, t), tf.bool), -1, 1),
        )
    else:
        monkeypatch.setattr(transformer, "_scale", lambda dh: SCALE_OFF / math.sqrt(dh))


def _onnxruntime(monkeypatch, plant: str, fused: bool = False) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import numpy as np

    from xfbench.adapters.onnxruntime import workload
    from xfbench.exchange import graph

    if fused and plant == "gelu":
        # the fault the fused mode had: the optimizer's erf BiasGelu for GPT-2's GELU,
        # here with the guard that refuses such a graph silenced
        from onnxruntime.transformers import fusion_options

        stays_off = property(lambda self: False, lambda self, value: None)
        monkeypatch.setattr(
            fusion_options.FusionOptions, "enable_gelu_approximation", stays_off, raising=False
        )
        monkeypatch.setattr(workload, "gelus", lambda model: [])
        return

    changes = {
        "gelu": ("_GELU", {"erf": "tanh", "tanh": "none"}),
        "mask": ("causal_mask", lambda t: np.triu(np.full((t, t), -np.inf, np.float32), k=2)),
        "scale": ("score_scale", lambda dh: SCALE_OFF / np.sqrt(dh)),
    }
    name, value = changes[plant]
    model = workload._model

    def planted(spec, weights, seed):  # the plant in ONNX Runtime's graph only
        with pytest.MonkeyPatch.context() as inside:
            inside.setattr(graph, name, value)
            return model(spec, weights, seed)

    monkeypatch.setattr(workload, "_model", planted)


PLANTERS = {
    ("torch", "eager"): _torch,
    ("torch", "compile"): _torch,  # Inductor's kernels: slow to compile, the slow tier
    ("jax", "jit"): _jax,
    ("tensorflow", "eager"): _tensorflow,
    ("tensorflow", "function"): _tensorflow,
    ("tensorflow", "xla"): _tensorflow,
    ("onnxruntime", "cpu"): _onnxruntime,
    ("onnxruntime", "fused"): lambda m, plant: _onnxruntime(m, plant, fused=True),
}


SLOW_PLANTERS = {
    ("torch", "compile"),
    ("tensorflow", "xla"),
    ("tensorflow", "eager"),
    ("jax", "jit"),
    ("tensorflow", "function"),
}


@pytest.mark.parametrize(
    "framework, mode",
    [
        # torch.compile, and the slowest of command 2's on a 2-core Zen 3: CI runs them
        pytest.param(*key, marks=pytest.mark.slow) if key in SLOW_PLANTERS else key
        for key in PLANTERS
    ],
)
def test_each_planted_change_fails_the_function_check(framework, mode, monkeypatch):
    with contextlib.suppress(ImportError):
        assert _check(framework, mode)["verified"], "unplanted, the framework must pass"
    for plant in PLANTS:
        with pytest.MonkeyPatch.context() as m:
            PLANTERS[framework, mode](m, plant)
            record = _check(framework, mode)
        assert not record["verified"], (
            f"{plant} planted in {framework} {mode}: {record['max_rel_err']:.2e} is within "
            f"{record['tolerance']:.2e}"
        )


def test_the_erf_gelu_of_bert_planted_as_tanh_fails_too(monkeypatch):
    """BERT's GELU is the erf one: the tanh form is as visible there."""
    _torch(monkeypatch, "gelu")
    record = _check("torch", "eager", "bert_base")
    assert not record["verified"] and record["max_rel_err"] > 10 * record["tolerance"]
