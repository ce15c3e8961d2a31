"""One JAX cell: the state and batch resident on the device, and a step compiled ahead of time.

Mode "jit": the whole training step (forward, loss, backward, clipping, SGD momentum
update, BatchNorm running statistics) is one pure function, jitted once with the
training state donated, so XLA updates parameters, momentum buffers and running
statistics in place. prepare() lowers and compiles it; step() calls the compiled
executable, so no step ever traces or compiles again.

Precisions: fp32 lowers with the default matmul precision "highest" (true fp32
products; without it XLA may use TF32 or bf16 passes on GPUs and TPUs); tf32 with
"tensorfloat32"; bf16 and fp16 keep float32 parameters, momentum and loss and
compute in the half type, fp16 with dynamic loss scaling (PyTorch GradScaler's
rules: start at 2**16, halve and skip the update on inf/nan, double after 2000
good steps). fp64 (CPU only) is float64 throughout, for the equivalence proof: JAX
has 64-bit types only under jax_enable_x64, which this workload switches on only
around its own calls (jax.enable_x64 as a context), so no other cell in the process
sees it.
"""

from __future__ import annotations

import contextlib
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np

from xfbench.adapters.base import Cell, Workload, check_layer_dtypes
from xfbench.adapters.jax import networks
from xfbench.adapters.jax import weights as W
from xfbench.adapters.jax.layers import cross_entropy
from xfbench.errors import CannotRun
from xfbench.models import Spec, synthetic_batch

COMPUTE_DTYPES = {
    "fp32": jnp.float32,
    "tf32": jnp.float32,
    "bf16": jnp.bfloat16,
    "fp16": jnp.float16,
    "fp64": jnp.float64,
}
# jax_default_matmul_precision while tracing; half inputs run at the half type anyway.
MATMUL_PRECISION = {
    "fp32": "highest",
    "tf32": "tensorfloat32",
    "bf16": "default",
    "fp16": "default",
    "fp64": "highest",
}
# Dynamic loss scaling for fp16, with torch.amp.GradScaler's defaults.
SCALE_INIT, SCALE_GROWTH, SCALE_BACKOFF, SCALE_INTERVAL = 2.0**16, 2.0, 0.5, 2000


# LLVM's names of the features that decide XLA:CPU's vector code, in this order.
XLA_ISA_FEATURES = (
    "sse4.2",
    "avx",
    "avx2",
    "fma",
    "avxvnni",
    "avx512f",
    "avx512vnni",
    "avx512bf16",
    "avx512fp16",
    "amx-tile",
    "amx-bf16",
    "neon",
    "sve",
)


@functools.cache
def xla_cpu_target() -> dict:
    """The CPU XLA compiles for in this process (after XLA_FLAGS' --xla_cpu_max_isa and
    any other limit): its LLVM CPU name and the features it turned on. XLA writes them into
    every CPU executable it serialises (its target machine options), so a tiny one is
    compiled and read; none of it is taken from flags or variables."""
    try:
        probe = jax.jit(lambda a: a + 1).lower(jnp.ones(2, jnp.float32)).compile()
        blob = probe.runtime_executable().serialize()
    except Exception as e:  # a jaxlib that cannot serialise: say so rather than guess
        return {"cpu": "unknown", "isa": [], "error": f"{type(e).__name__}: {e}"[:200]}
    # triple, then (length-prefixed) the CPU name, then "+feat,-feat,...".
    found = re.search(
        rb"(?:x86_64|aarch64|arm64)[\w.-]*\x12.([\w.-]+)\x1a..?([+-][\x20-\x7e]+)", blob, re.S
    )
    if not found:
        return {"cpu": "unknown", "isa": [], "error": "no target options in XLA's executable"}
    on = {f[1:] for f in found.group(2).decode().split(",") if f.startswith("+")}
    return {"cpu": found.group(1).decode(), "isa": [f for f in XLA_ISA_FEATURES if f in on]}


def step_peak_bytes(stats) -> int | None:
    """Peak device bytes of one compiled step, from its CompiledMemoryStats."""
    if stats is None:
        return None
    peak = getattr(stats, "peak_memory_in_bytes", 0) or 0
    if peak > 0:
        return int(peak)
    return int(
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        - stats.alias_size_in_bytes
    )


def backend(device) -> dict:
    """What XLA compiles for: on the CPU its target (xla_cpu_target), elsewhere the device."""
    if device.platform != "cpu":
        return {"backend": f"XLA:{device.platform.upper()} {device.device_kind}"}
    target = xla_cpu_target()
    return {
        "xla_cpu_target": target,
        "backend": f"XLA:CPU {target['cpu']} ({', '.join(target['isa']) or 'no vector ISA'})",
    }


def resolve_device(name: str):
    """The jax.Device for a harness device name ("cpu", "cuda:N", "tpu:N")."""
    kind, _, index = name.partition(":")
    backend = {"cpu": "cpu", "cuda": "cuda", "tpu": "tpu"}.get(kind)
    if backend is None:
        raise CannotRun(f"JAX has no device {name!r}")
    try:
        found = jax.devices(backend)
    except RuntimeError as e:
        raise CannotRun(f"JAX sees no {kind} device: {str(e).splitlines()[0]}") from e
    i = int(index or 0)
    if i >= len(found):
        raise CannotRun(f"{name} is not present to JAX (it sees {len(found)} {kind} devices)")
    return found[i]


def clip_by_global_norm(grads: dict, max_norm: float) -> dict:
    """PyTorch's clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1."""
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(grads)))
    factor = jnp.minimum(1.0, max_norm / (norm + 1e-6))
    return jax.tree.map(lambda g: g * factor, grads)


# The primitives that do a network's matrix arithmetic: dense layers and the LSTM's
# products (dot_general), convolutions.
MATH_PRIMITIVES = ("dot_general", "conv_general_dilated")


# Dot algorithms that round their operands to a half type whatever the operands' dtype:
# jax.nn.dot_product_attention asks for them (bf16 or fp16 inputs, fp32 accumulation), and
# its backward then takes a float32 cotangent that the product still computes in the half type.
HALF_ALGORITHMS = {"BF16_BF16": "bfloat16", "F16_F16": "float16"}


def _operand_dtypes(eqn) -> set[str]:
    algorithm = getattr(eqn.params.get("precision"), "name", "") or ""
    for prefix, dtype in HALF_ALGORITHMS.items():
        if algorithm.startswith(prefix):
            return {dtype}
    return {str(v.aval.dtype) for v in eqn.invars}


def math_dtypes(jaxpr) -> dict[str, str]:
    """primitive -> the operand dtypes it takes anywhere in jaxpr (the scan of the LSTM,
    custom derivatives and other nested programs included), comma separated."""
    seen: dict[str, set[str]] = {}

    def walk(program) -> None:
        for eqn in program.eqns:
            if eqn.primitive.name in MATH_PRIMITIVES:
                seen.setdefault(eqn.primitive.name, set()).update(_operand_dtypes(eqn))
            for value in eqn.params.values():
                for sub in value if isinstance(value, (tuple, list)) else (value,):
                    inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr holds its Jaxpr
                    if hasattr(inner, "eqns"):
                        walk(inner)

    walk(jaxpr)
    return {k: ",".join(sorted(v)) for k, v in sorted(seen.items())}


def adamw(spec: Spec):
    """optax's AdamW with the spec's settings, decaying the tensors spec.decays() names.
    Its arithmetic is PyTorch's: m and v debiased, p -= lr (m^ / (sqrt(v^) + eps) + wd p)."""
    import optax

    return optax.adamw(
        learning_rate=spec.lr,
        b1=spec.betas[0],
        b2=spec.betas[1],
        eps=spec.eps,
        weight_decay=spec.weight_decay,
        mask=lambda params: {k: spec.decays(k) for k in params},
    )


def optimizer_state(spec: Spec, params: dict) -> dict:
    """The optimizer's part of the training state: SGD's momentum or AdamW's moments."""
    if spec.optimizer == "adamw":
        return {"opt": adamw(spec).init(params)}
    return {"momentum": {k: np.zeros_like(v) for k, v in params.items()}}


def loss_of(spec: Spec, logits, y):
    """Mean cross-entropy, at the spec's loss positions (masked LM) or every one."""
    if spec.loss_positions is not None:
        at = jnp.asarray(spec.loss_positions)
        logits, y = jnp.take(logits, at, axis=1), jnp.take(y, at, axis=1)
    return cross_entropy(logits, y)


def make_train_step(
    spec: Spec,
    dtype,
    loss_scaling: bool,
    data_axis: str | None = None,
    average_gradients: bool = True,
    attention: str | None = "xla",
):
    """state, x, y -> (new state, loss). state = {params, momentum (SGD) or opt (AdamW),
    stats[, scaler]}.

    data_axis: None for one device. Under jax.shard_map (the data-parallel worker,
    scaling/jax_sharding.py) the name of the mesh axis the batch is split over: each
    device then differentiates the loss of its own rows (the parameters cast to
    device-varying, so that autodiff adds no reduction of its own) and the gradients
    are averaged over the axis (jax.lax.pmean) straight after backward, before
    unscaling, clipping and the update, as DDP's all-reduce in backward. The loss and
    running statistics returned are then the device's own.

    average_gradients=False (only with data_axis): the same step without that average,
    each device updating with its own gradient, as DDP under no_sync(); the worker times
    it against the normal step for the all-reduce's share of the step. Its devices'
    states diverge, so it runs under shard_map(check_vma=False)."""

    def train_step(state, x, y):
        params, stats = state["params"], state["stats"]
        scale = state["scaler"]["scale"] if loss_scaling else None

        def objective(p):
            logits, new_stats = networks.apply(
                spec=spec, params=p, stats=stats, x=x, train=True, dtype=dtype, attention=attention
            )
            loss = loss_of(spec, logits, y)
            return (loss * scale if loss_scaling else loss), (loss, new_stats)

        if data_axis is None:
            grads, (loss, new_stats) = jax.grad(objective, has_aux=True)(params)
        else:
            local = jax.lax.pcast(params, data_axis, to="varying")
            grads, (loss, new_stats) = jax.grad(objective, has_aux=True)(local)
            if average_gradients:
                grads = jax.lax.pmean(grads, data_axis)
        new = _apply_gradients(spec, state, grads, new_stats=new_stats, scale=scale)
        return new, loss

    return train_step


def _apply_gradients(spec: Spec, state: dict, grads: dict, *, new_stats: dict, scale) -> dict:
    """The new state from the gradients: unscaled (scale: the loss scale, None without
    loss scaling), clipped, and the optimizer's update applied."""
    params, loss_scaling = state["params"], scale is not None
    lr, mu, clip = spec.lr, spec.momentum, spec.clip_norm
    if loss_scaling:
        grads = jax.tree.map(lambda g: g / scale, grads)
        finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))
    if clip:
        grads = clip_by_global_norm(grads, clip)
    if spec.optimizer == "adamw":
        import optax

        updates, opt = adamw(spec).update(grads, state["opt"], params)
        new_params = optax.apply_updates(params, updates)
        slots = {"opt": opt}
    else:
        # PyTorch's SGD momentum: v = mu * v + g; w -= lr * v.
        momentum = jax.tree.map(lambda v, g: mu * v + g, state["momentum"], grads)
        new_params = jax.tree.map(lambda w, v: w - lr * v, params, momentum)
        slots = {"momentum": momentum}
    new = {"params": new_params, "stats": new_stats, **slots}
    if loss_scaling:
        # An overflowing step changes neither weights nor the optimizer's state (the
        # running statistics still move, as in PyTorch); the scale backs off or grows.
        keep = lambda a, b: jnp.where(finite, a, b)  # noqa: E731
        new["params"] = jax.tree.map(keep, new_params, params)
        for k in slots:
            new[k] = jax.tree.map(keep, slots[k], state[k])
        good = jnp.where(finite, state["scaler"]["good_steps"] + 1, 0)
        grow = good >= SCALE_INTERVAL
        new["scaler"] = {
            "scale": jnp.where(
                finite, jnp.where(grow, scale * SCALE_GROWTH, scale), scale * SCALE_BACKOFF
            ),
            "good_steps": jnp.where(grow, 0, good),
        }
    return new


def attention_implementation(device, dtype) -> str:
    """jax.nn.dot_product_attention's implementation: cuDNN's fused kernel on an NVIDIA
    GPU in the half types (its only ones), where it takes the shapes, else XLA's; in
    float64, and in fp16 on the CPU, "written": the same attention written out."""
    if jnp.dtype(dtype) == jnp.float64:
        return "written"  # out (transformer.py): the library's softmax is float32
    if jnp.dtype(dtype) == jnp.float16 and device.platform == "cpu":
        return "written"  # out: its fp16 dot algorithm is not in XLA:CPU
    if device.platform != "gpu" or jnp.dtype(dtype) not in (jnp.bfloat16, jnp.float16):
        return "xla"
    q = jnp.zeros((1, 128, 1, 64), dtype, device=device)

    def attention(a):
        out = jax.nn.dot_product_attention(a, a, a, is_causal=True, implementation="cudnn")
        return out.astype(jnp.float32).sum()

    try:  # forward and backward, as the training step needs both
        jax.jit(jax.grad(attention)).lower(q).compile()
    except Exception:  # noqa: BLE001 - no cuDNN attention here: XLA's is what runs
        return "xla"
    return "cudnn"


def optimizer_name(spec: Spec) -> str:
    if spec.optimizer == "adamw":
        return (
            f"optax.adamw lr {spec.lr:g}, betas {spec.betas}, eps {spec.eps:g}, weight decay "
            f"{spec.weight_decay:g} on matrices and embeddings"
        )
    return f"SGD momentum {spec.momentum} (v = mu v + g; w -= lr v)"


def make_infer_step(spec: Spec, dtype, attention: str | None = "xla"):
    def infer_step(state, x):
        logits, _ = networks.apply(
            spec=spec,
            params=state["params"],
            stats=state["stats"],
            x=x,
            train=False,
            dtype=dtype,
            attention=attention,
        )
        return logits

    return infer_step


class JaxWorkload(Workload):
    def __init__(self, spec: Spec, cell: Cell, weights: dict[str, np.ndarray], seed: int = 0):
        if cell.mode != "jit":
            raise CannotRun(f"unknown JAX mode {cell.mode!r}")
        if cell.precision not in COMPUTE_DTYPES:
            raise CannotRun(f"JAX adapter does not run {cell.precision}")
        self.spec, self.cell = spec, cell
        self.fp64 = cell.precision == "fp64"
        with self._x64():
            self._build(spec, cell, weights, seed)

    def _x64(self):
        """64-bit types on for this workload's calls only (fp64); nothing otherwise."""
        return jax.enable_x64(True) if self.fp64 else contextlib.nullcontext()

    def _build(self, spec: Spec, cell: Cell, weights: dict[str, np.ndarray], seed: int) -> None:
        self.device = resolve_device(cell.device)
        self.dtype = COMPUTE_DTYPES[cell.precision]
        self.matmul_precision = MATMUL_PRECISION[cell.precision]
        self.train = cell.task == "train"
        self.loss_scaling = self.train and cell.precision == "fp16"

        # The state: canonical weights in JAX layouts, checked against the network's shapes.
        self.host_dtype = np.float64 if self.fp64 else np.float32
        params = W.to_jax(spec, weights, self.host_dtype)
        shapes, stat_shapes = jax.eval_shape(lambda: networks.init(spec, jax.random.key(seed)))
        if set(params) != set(shapes) or any(params[k].shape != shapes[k].shape for k in shapes):
            bad = sorted(
                k
                for k in set(params) | set(shapes)
                if k not in params or k not in shapes or params[k].shape != shapes[k].shape
            )
            raise ValueError(f"{spec.id}: canonical weights do not fit the JAX network: {bad[:5]}")
        stats = {
            k: (np.zeros if k.endswith("mean") else np.ones)(s.shape, self.host_dtype)
            for k, s in stat_shapes.items()
        }
        state = {"params": params, "stats": stats}
        if self.train:
            state.update(optimizer_state(spec, params))
        if self.loss_scaling:
            state["scaler"] = {"scale": np.float32(SCALE_INIT), "good_steps": np.int32(0)}
        self.state = jax.device_put(state, self.device)

        # The batch, in the layout the network computes in: NHWC images, time-major tokens.
        x, y = synthetic_batch(spec, cell.batch_size, seed)
        self.x_host = self._host_layout(x)
        self.y_host = np.ascontiguousarray((y.T if spec.time_major else y).astype(np.int32))
        self.x, self.y = self._to_device()
        self._check_placement(self.state, self.x, self.y)

        self.attention = (
            attention_implementation(self.device, self.dtype) if spec.transformer else None
        )
        if self.train:
            self._jit = jax.jit(
                make_train_step(spec, self.dtype, self.loss_scaling, attention=self.attention),
                donate_argnums=0,
            )
            self.step = self._train_step
        else:
            self._jit = jax.jit(make_infer_step(spec, self.dtype, self.attention))
            self.step = self._infer_step
        self._compiled = self.lowered = None
        self._loss = self._out = None
        self.info = {
            "device_name": self.device.device_kind,
            "jax_device": str(self.device),
            "layout": "NHWC" if networks.image_layout(spec) else "n/a",
            "compute_dtype": jnp.dtype(self.dtype).name,
            "matmul_precision": self.matmul_precision,
            "loss_scale": "dynamic, from 2**16" if self.loss_scaling else "none",
            "lstm_kernel": "lax.scan" if spec.time_major else "n/a",
            "attention_kernel": (
                (
                    f"softmax(q k^T / sqrt(dh)) v written out ({cell.precision}: "
                    "jax.nn.dot_product_attention cannot run it here)"
                    if self.attention == "written"
                    else f"jax.nn.dot_product_attention, implementation={self.attention}"
                )
                if spec.transformer
                else "n/a"
            ),
            **({"optimizer": optimizer_name(spec)} if self.train else {}),
            **backend(self.device),
        }

    # -- the batch ----------------------------------------------------------------
    def _host_layout(self, x: np.ndarray) -> np.ndarray:
        """Samples as synthetic_batch gives them, in the layout the network computes in:
        NHWC images, time-major tokens. Ids fit int32, JAX's default integer type (64-bit
        types are off by default); images in float64 for fp64 are the same values,
        widened exactly."""
        if networks.image_layout(self.spec):
            x = x.transpose(0, 2, 3, 1)
        if self.spec.time_major:
            x = x.T
        x = x.astype(self.host_dtype) if x.dtype == np.float32 else x.astype(np.int32)
        return np.ascontiguousarray(x)

    def infer_samples(self, x: np.ndarray) -> np.ndarray:
        self.x = jax.device_put(self._host_layout(x), self.device)
        self._infer_step()
        return self.output()

    def _to_device(self):
        return jax.device_put(self.x_host, self.device), jax.device_put(self.y_host, self.device)

    def _batch(self):
        return self._to_device() if self.cell.data == "copied" else (self.x, self.y)

    def input_batches(self, source, seed: int, workers: int):
        from xfbench.adapters.jax.input_pipeline import batches

        return batches(source, self.cell.batch_size, seed, workers)

    def feed(self, x, y) -> None:
        # the resident batch's layout: NHWC images, time-major tokens, int32 ids
        self.x = jax.device_put(self._host_layout(x), self.device)
        y = y.T if self.spec.time_major else y
        self.y = jax.device_put(np.ascontiguousarray(y.astype(np.int32)), self.device)

    def _check_placement(self, *trees) -> None:
        """No silent fallback: every array must live on the device asked for."""
        for leaf in jax.tree.leaves(trees):
            if leaf.devices() != {self.device}:
                raise RuntimeError(f"asked for {self.device}, but an array is on {leaf.devices()}")

    # -- compile ------------------------------------------------------------------
    def prepare(self) -> None:
        """Trace, lower and compile ahead of time; step() then only runs the executable."""
        with self._x64():
            self._prepare()

    def _prepare(self) -> None:
        args = (self.state, self.x, self.y) if self.train else (self.state, self.x)
        # The precision is read while tracing, so it holds for every product, backward included.
        with jax.default_matmul_precision(self.matmul_precision):
            traced = self._jit.trace(*args)
            self.lowered = traced.lower()
        # What the step computes in, read from its program: every product and convolution,
        # backward included, must take the operands the precision names.
        self.info["layer_dtypes"] = math_dtypes(traced.jaxpr.jaxpr)
        check_layer_dtypes(self.cell.precision, self.info["layer_dtypes"], MATH_PRIMITIVES)
        self._compiled = self.lowered.compile()
        devices = {d for s in jax.tree.leaves(self._compiled.input_shardings) for d in s.device_set}
        if devices != {self.device}:
            raise RuntimeError(f"compiled for {devices}, asked for {self.device}")

    # -- steps --------------------------------------------------------------------
    def _train_step(self) -> None:
        if self._compiled is None:
            self.prepare()
        with self._x64():
            x, y = self._batch()
            self.state, self._loss = self._compiled(self.state, x, y)
            jax.block_until_ready((self.state, self._loss))

    def _infer_step(self) -> None:
        if self._compiled is None:
            self.prepare()
        with self._x64():
            x, _ = self._batch()
            self._out = self._compiled(self.state, x)
            jax.block_until_ready(self._out)

    # -- results ------------------------------------------------------------------
    def loss(self) -> float:
        return float(self._loss)

    def output(self) -> np.ndarray:
        out = np.asarray(jax.device_get(self._out), self.host_dtype)
        return out.transpose(1, 0, 2) if self.spec.time_major else out  # back to (N, T, C)

    def export_onnx(self, path: str) -> None:
        """The network in evaluation mode, with its current weights, through jax2onnx (see export.py)."""
        from xfbench.adapters.jax.export import export_onnx

        export_onnx(self, path)

    def weights(self) -> dict[str, np.ndarray]:
        return W.to_canonical(self.spec, jax.device_get(self.state["params"]), self.host_dtype)

    def running_stats(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v) for k, v in jax.device_get(self.state["stats"]).items()}

    def peak_device_memory(self) -> int | None:
        """The cell's own peak: what XLA's buffer assignment says the compiled step needs
        (its peak_memory_in_bytes, else arguments + outputs + temporaries - aliased).
        The device's peak_bytes_in_use is the process's since it started, cannot be
        reset, and would give a later cell every earlier cell's peak."""
        if self.device.platform == "cpu" or self._compiled is None:
            return None
        return step_peak_bytes(self._compiled.memory_analysis())

    def close(self) -> None:
        for leaf in jax.tree.leaves((self.state, self.x, self.y, self._loss, self._out)):
            if isinstance(leaf, jax.Array) and not leaf.is_deleted():
                leaf.delete()
        self.state = self.x = self.y = self._loss = self._out = None
        self._compiled = self.lowered = None
