"""GPT-2's greedy decoding in JAX with a static key/value cache (xfbench/generation).

Pure functions of the canonical parameter dict (transformer.py's pieces) and of the cache,
one (B, heads, ISL + OSL, dh) array per layer for keys and one for values (heads before
positions: a decode step's batched products read the cache without transposing it). Prefill and the decode step are each jitted once; the
cache is donated to them, so XLA writes the new position into the same buffer
(lax.dynamic_update_slice at a traced position: one compilation for every step). Prefill
attends causally within the prompt; a decode step attends to the whole cache under a mask
of the positions written so far. Greedy's argmax is inside the step, on the device.
Both are traced under the cell's matmul precision (workload.MATMUL_PRECISION: fp32 is
HIGHEST, never a GPU's TF32 default), which each reads back from its lowered program.
"""

from __future__ import annotations

import re
import time

import jax
import jax.numpy as jnp
import numpy as np

from xfbench.adapters.base import DECODE_PROFILE, Generator
from xfbench.adapters.jax.transformer import gelu, layer_norm, logits
from xfbench.adapters.jax.weights import to_jax
from xfbench.adapters.jax.workload import (
    COMPUTE_DTYPES,
    MATMUL_PRECISION,
    backend,
    resolve_device,
    step_peak_bytes,
)
from xfbench.models import Spec, seeded
from xfbench.models import layers as L


def kernels(params: dict) -> dict:
    """The parameters with each layer's matrix as flax's Dense keeps it, (in, out)."""
    return {name: w.T if _kernel(name, w.shape) else w for name, w in params.items()}


def _kernel(name: str, shape: tuple) -> bool:
    """Whether a canonical parameter is a layer's matrix, which kernels() transposes."""
    return len(shape) == 2 and not name.startswith("embed.")


def dense(x, params, name: str):
    """x @ W + b with W (in, out): XLA:CPU's products at batch 8 run up to twice as fast
    with the weight so than transposed, (out, in). x in the weights' type (a layer norm's
    float32 output into a bf16 product)."""
    w = params[f"{name}.weight"]
    return x.astype(w.dtype) @ w + params[f"{name}.bias"]


def write(cache, position, new):
    """new (B, heads, n, dh) into cache at positions position.. (a traced int32)."""
    return jax.lax.dynamic_update_slice(cache, new.astype(cache.dtype), (0, 0, position, 0))


def _attend(q, keys, values, seen):
    """One query per sequence against the cache, (B, heads, 1, dh) and (B, heads, L, dh):
    batched products over (B, heads) with no transpose of the cache."""
    # the suite's rule for the half types (docs/frameworks.md): the scores summed in
    # float32 and kept so through the mask and the softmax, the probabilities back in the
    # values' type for their product with v
    z = jnp.einsum("bhqd,bhkd->bhqk", q, keys, preferred_element_type=jnp.float32)
    z = jnp.where(seen, z / jnp.sqrt(jnp.float32(q.shape[-1])), -jnp.inf)
    p = jax.nn.softmax(z, axis=-1).astype(values.dtype)
    return jnp.einsum("bhqk,bhkd->bhqd", p, values)


def _forward(spec: Spec, params, x, caches, *, position, seen):
    """x (B, T, d) at positions position.. through every block, each writing its keys and
    values to the cache first; seen: None (the prompt: causal within x) or (L,) bool, the
    cache positions the one new token may see. -> (the last position's next token and
    logits, caches)"""
    out = []
    for layer, (keys, values) in zip(spec.layer(L.TransformerBlock), caches):
        n, t, d = x.shape
        qkv = dense(layer_norm(x, params, f"{layer.name}.ln1", layer.eps), params,
                    f"{layer.name}.attn.qkv")  # fmt: skip
        q, k, v = (qkv.reshape(n, t, 3, layer.heads, d // layer.heads)[:, :, i] for i in range(3))
        heads_first = lambda a: a.transpose(0, 2, 1, 3)  # noqa: E731  (B, heads, T, dh)
        keys, values = (
            write(keys, position, heads_first(k)),
            write(values, position, heads_first(v)),
        )
        if seen is None:  # (B, T, heads, dh), as dot_product_attention takes them
            y = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
        else:
            y = heads_first(_attend(heads_first(q), keys, values, seen))
        x = x + dense(y.reshape(n, t, d), params, f"{layer.name}.attn.out")
        z = layer_norm(x, params, f"{layer.name}.ln2", layer.eps)
        z = gelu(dense(z, params, f"{layer.name}.mlp.fc"), layer.gelu)
        x = x + dense(z, params, f"{layer.name}.mlp.proj")
        out.append((keys, values))
    final = spec.layer(L.LayerNorm)[-1]
    z = logits(layer_norm(x[:, -1], params, final.name, final.eps), params, "embed.word",
               params["embed.word"].dtype)  # fmt: skip
    return (jnp.argmax(z, axis=-1), z), out


def under(precision: str, step):
    """step with every product traced at precision: set inside the traced function, it
    holds however the caller's own default is set (a GPU's is TF32 for float32)."""

    def traced(*args):
        with jax.default_matmul_precision(precision):
            return step(*args)

    return traced


def lowered_precisions(text: str) -> dict[str, int]:
    """How many of a lowered (StableHLO) program's products and convolutions run at each
    precision, as XLA is told: {"HIGHEST": 26}; one with no precision named counts as
    DEFAULT."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if "stablehlo.dot_general" in line or "stablehlo.convolution" in line:
            # `precision = [HIGHEST, HIGHEST]`, or `precision_config = [#stablehlo<precision
            # HIGHEST>, ...]`: the two operands' (XLA runs the product at the higher)
            named = re.search(r"precision(?:_config)? = \[([^\]]*)\]", line)
            words = re.findall(r"\b(DEFAULT|HIGHEST|HIGH)\b", named.group(1)) if named else []
            p = max(words or ["DEFAULT"], key=["DEFAULT", "HIGH", "HIGHEST"].index)
            counts[p] = counts.get(p, 0) + 1
    return counts


def check_precision(cell_precision: str, counts: dict[str, int], where: str) -> None:
    """An fp32 or tf32 cell's every product at the precision it names, or RuntimeError."""
    want = {"fp32": "HIGHEST", "tf32": "HIGH"}.get(cell_precision)  # HIGH: TF32 on a GPU
    if want and set(counts) != {want}:
        raise RuntimeError(
            f"{where} computes products at {counts}, not all at {want} as {cell_precision} needs"
        )


def shapes_of(tree):
    """The tree's arrays as shapes and dtypes: enough to lower a function again."""
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), tree)


def make_steps(spec: Spec, length: int, precision: str = "fp32"):
    """(prefill, decode), jitted at the cell precision's matmul precision, each donating
    the cache."""
    prefill, decode = step_functions(spec, length)
    matmul = MATMUL_PRECISION[precision]
    return (
        jax.jit(under(matmul, prefill), donate_argnums=2),
        jax.jit(under(matmul, decode), donate_argnums=3),
    )


def make_loop(spec: Spec, length: int, *, precision: str, new_tokens: int, rows: tuple):
    """The `loop` mode's decoding: every decode step after the prefill in one compiled
    lax.fori_loop, each step's token fed to the next on the device, the cache donated and
    carried; its tokens (B, new_tokens) and the logits of the batch's `rows` come back
    whole. (params, (the prefill's tokens, its logits, its position), caches) -> (tokens,
    kept logits (rows, new_tokens, vocab), caches)"""
    _, decode = step_functions(spec, length)
    picked = np.asarray(rows, np.int32)

    def loop(params, start, caches):
        token, logits, position = start
        batch, vocab = logits.shape
        out = jnp.zeros((batch, new_tokens), jnp.int32).at[:, 0].set(token)
        kept = jnp.zeros((len(rows), new_tokens, vocab), jnp.float32)
        kept = kept.at[:, 0].set(logits[picked].astype(jnp.float32))

        def step(j, carry):
            token, caches, out, kept = carry
            (token, logits), caches = decode(params, token, position + j - 1, caches)
            token = token.astype(jnp.int32)
            kept = kept.at[:, j].set(logits[picked].astype(jnp.float32))
            return token, caches, out.at[:, j].set(token), kept

        _, caches, out, kept = jax.lax.fori_loop(1, new_tokens, step, (token, caches, out, kept))
        return out, kept, caches

    return jax.jit(under(MATMUL_PRECISION[precision], loop), donate_argnums=2)


def step_functions(spec: Spec, length: int):
    """prefill(params, prompt, caches) and decode(params, tokens, position, caches), each
    -> ((next tokens, logits), caches): pure, to be jitted."""

    def prefill(params, prompt, caches):
        t = prompt.shape[1]
        x = jnp.take(params["embed.word"], prompt, axis=0) + params["embed.position"][:t]
        return _forward(spec, params, x, caches, position=0, seen=None)

    def decode(params, tokens, position, caches):
        x = jnp.take(params["embed.word"], tokens, axis=0)
        x = x + jax.lax.dynamic_index_in_dim(params["embed.position"], position, 0, False)
        seen = jnp.arange(length) <= position
        return _forward(
            spec, params, x[:, None], caches, position=position, seen=seen[None, None, None]
        )

    return prefill, decode


# Instructions of an optimized module that launch nothing
NOT_LAUNCHED = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}


def entry_kernels(text: str) -> int:
    """The instructions of an optimized HLO module's entry computation that run (fusions,
    library calls such as cuBLAS's, copies): on a GPU, a call's kernel launches."""
    entry = text.split("\nENTRY ", 1)[1].split("\n}", 1)[0]
    ops = (re.search(r"= .*? ([a-z][a-z0-9-]*)\(", line) for line in entry.splitlines()[1:])
    return sum(1 for op in ops if op and op.group(1) not in NOT_LAUNCHED)


class JaxGenerator(Generator):
    def __init__(self, spec: Spec, cell, weights: dict[str, np.ndarray]):
        self.device = resolve_device(cell.device)
        # bf16: the weights (rounded to it already: check.decoding_weights), the cache and
        # the activations in bfloat16; layer norms and the softmax in float32
        dtype = COMPUTE_DTYPES[cell.precision]
        self.made = weights if isinstance(weights, seeded.Made) else None
        if self.made:  # made on the device, never on the host
            # each matrix made in the layout kernels() gives, never held twice
            self.params = {d.name: seeded.jax_value(d, self.device, dtype, self.made.seed,
                                                    transposed=_kernel(d.name, d.shape))
                           for d in seeded.plan(spec)}  # fmt: skip
        else:
            held = jax.tree.map(lambda a: a.astype(dtype), kernels(to_jax(spec, weights)))
            self.params = jax.device_put(held, self.device)
        block = spec.layer(L.TransformerBlock)[0]
        d = spec.layer(L.TokenEmbedding)[0].dim
        length = cell.prompt_tokens + cell.new_tokens
        shape = (cell.batch_size, block.heads, length, d // block.heads)
        self.caches = [
            (jnp.zeros(shape, dtype, device=self.device),
             jnp.zeros(shape, dtype, device=self.device))
            for _ in spec.layer(L.TransformerBlock)
        ]  # fmt: skip
        self.cache_bytes = sum(k.nbytes + v.nbytes for k, v in self.caches)
        self.precision = cell.precision
        self._prefill, self._decode = make_steps(spec, length, cell.precision)
        self.mode, self.spec, self.length = cell.mode, spec, length
        self._loops: dict = {}  # the loop mode's compiled loop, per rows of logits kept
        self.position = 0
        self._logits = None
        # each compiled step's function and first arguments' shapes, to lower it again
        # for its facts (precision, memory): prefill, decode, or the loop mode's loop
        self._args: dict = {}
        self.info = {
            "device_name": self.device.device_kind if self.device.platform != "cpu" else "cpu",
            "attention_kernel": "prefill: jax.nn.dot_product_attention, XLA's, is_causal; "
            "decode: softmax(q k^T / sqrt(dh)) v over the cache, masked, in einsums",
            "cache_write": "lax.dynamic_update_slice into the donated cache",
            "weights_dtype": str(self.params["embed.word"].dtype),
            "cache_dtype": str(self.caches[0][0].dtype),
            "matmul_precision": MATMUL_PRECISION[cell.precision],
            **backend(self.device),
        }

    def _sync(self, out) -> np.ndarray:
        (tokens, self._logits), self.caches = out
        return np.asarray(tokens).astype(np.int64)  # a host copy: it waits for the device

    def run(self, prompt: np.ndarray, new_tokens: int, keep: list[int] | None = None):
        """The loop mode: the prefill, then every decode step in one compiled loop on the
        device; the host reads the tokens (and kept logits) once. One program times its
        steps together: TTFT is the prefill's call, each decode step the loop's mean."""
        if self.mode != "loop":
            return None
        rows = tuple(keep or ())
        if rows not in self._loops:
            self._loops[rows] = make_loop(
                self.spec, self.length, precision=self.precision, new_tokens=new_tokens, rows=rows
            )
        x = jax.device_put(prompt.astype(np.int32), self.device)
        position = jax.device_put(np.int32(prompt.shape[1]), self.device)
        loop = self._loops[rows]
        self._args.setdefault("prefill", (self._prefill, shapes_of((x, self.caches))))
        t0 = time.perf_counter()
        (token, logits), self.caches = self._prefill(self.params, x, self.caches)
        token.block_until_ready()  # the device done; nothing read back
        t1 = time.perf_counter()
        start = (token, logits, position)
        if "loop" not in self._args:
            self._args["loop"] = (loop, shapes_of((start, self.caches)))
        out, kept, self.caches = loop(self.params, start, self.caches)
        out.block_until_ready()
        t2 = time.perf_counter()
        tokens, kept = jax.device_get((out, kept))  # the one read, tokens and kept logits
        self.position = prompt.shape[1] + new_tokens - 1
        gaps = [(t2 - t1) / (new_tokens - 1)] * (new_tokens - 1)
        return tokens.astype(np.int64), t1 - t0, gaps, kept if rows else None

    def prefill(self, prompt: np.ndarray) -> np.ndarray:
        prompt = jax.device_put(prompt.astype(np.int32), self.device)
        if "prefill" not in self._args:
            self._args["prefill"] = (self._prefill, shapes_of((prompt, self.caches)))
        out = self._sync(self._prefill(self.params, prompt, self.caches))
        self.position = prompt.shape[1]
        return out

    def decode(self, tokens: np.ndarray) -> np.ndarray:
        tokens = jax.device_put(tokens.astype(np.int32), self.device)
        position = jax.device_put(np.int32(self.position), self.device)
        if "decode" not in self._args:
            self._args["decode"] = (self._decode, shapes_of((tokens, position, self.caches)))
        out = self._sync(self._decode(self.params, tokens, position, self.caches))
        self.position += 1
        return out

    def logits(self) -> np.ndarray:
        return np.asarray(self._logits, np.float32)

    def reference_logits(self, sequence: np.ndarray) -> np.ndarray:
        """The float32 logits (B, T, vocab) of the same network with no cache, teacher-
        forced over sequence (B, T), its weights made again on the device in the cell's
        type and widened to float32 (the network suite's forward, transformer.apply)."""
        from xfbench.adapters.jax.transformer import apply

        if self.made is None:
            raise ValueError("reference_logits: the weights were not made on the device")
        dtype = COMPUTE_DTYPES[self.precision]
        if dtype == jnp.float32:  # the cell's own weights; kernels() undone in the program
            params = self.params
        else:  # made again, widened to float32 (in kernels' layout, as self.params)
            params = {d.name: seeded.jax_value(d, self.device, dtype, self.made.seed,
                                               transposed=_kernel(d.name, d.shape))
                      .astype(jnp.float32) for d in seeded.plan(self.spec)}  # fmt: skip
        tokens = jax.device_put(sequence.astype(np.int32), self.device)
        forward = jax.jit(lambda p, t: apply(self.spec, kernels(p), t, jnp.float32))
        with jax.default_matmul_precision("highest"):
            return np.asarray(forward(params, tokens), np.float32)

    def decode_profile(self, tokens: np.ndarray) -> dict:
        """On a GPU, one decode step's kernels counted from its compiled program (the loop
        mode's body is the same step); their device times are not read."""
        if self.device.platform == "cpu":
            return super().decode_profile(tokens)
        shapes = shapes_of((tokens.astype(np.int32), np.int32(self.position), self.caches))
        text = self._decode.lower(shapes_of(self.params), *shapes).compile().as_text()
        return {
            **dict.fromkeys(DECODE_PROFILE),
            "kernels_per_decode_step": entry_kernels(text),
            "decode_profile_reason": "JAX: the step's kernels counted from its compiled "
            "program; their device times not profiled",
        }

    def peak_device_memory(self) -> int | None:
        """The largest of its steps' peaks as XLA's buffer assignment gives them (the
        weights and the cache, their arguments, included): the device's own peak counter
        is the process's since it started and cannot be reset (workload.py)."""
        if self.device.platform == "cpu":
            return None
        peaks = [
            step_peak_bytes(step.lower(shapes_of(self.params), *args).compile().memory_analysis())
            for step, args in self._args.values()
        ]
        return max((p for p in peaks if p), default=None)

    def compile_facts(self) -> dict:
        stepped = "loop" if self.mode == "loop" else "decode"
        sizes = {"prefill": self._prefill._cache_size()}
        sizes[stepped] = (
            self._loops[()]._cache_size() if self.mode == "loop" else self._decode._cache_size()
        )
        if sizes[stepped] != 1:
            raise RuntimeError(f"the {stepped} compiled {sizes[stepped]} times, not once")
        return {"compilations": sizes, "lowered_precisions": self.lowered_precisions()}

    def lowered_precisions(self) -> dict[str, dict[str, int]]:
        """Each compiled step's products by the precision its lowered program gives XLA,
        checked against the cell's (shapes only: the donated arrays are not read)."""
        found = {}
        for name, (step, args) in self._args.items():
            text = step.lower(shapes_of(self.params), *args).as_text()
            found[name] = lowered_precisions(text)
            check_precision(self.precision, found[name], f"JAX's {name}")
        return found

    def close(self) -> None:
        del self.params, self.caches
