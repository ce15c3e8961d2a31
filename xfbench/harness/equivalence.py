"""Proof that every framework runs the same function: outputs and one training step
compared with ONNX Runtime running the canonical graph, and with each other.

The measure of agreement, rel_err and TOL, is xfbench.exchange.reference's.

References:
- inference: ONNX Runtime (CPU provider, every graph optimisation off, so it runs
  the graph as written) on the canonical "infer" graph;
- the training step's loss: ONNX Runtime on the "train" graph (BatchNorm on batch
  statistics) followed by mean softmax cross-entropy in float64 numpy;
- the updated weights: the same step computed plainly in float64 (PyTorch, eager, on
  the CPU; ONNX Runtime here has no training), compared as weights_error says (per
  tensor, or all together for networks with BatchNorm).

Tolerance of the updated weights, derived from the float64 step, never tuned to a CPU:
- the fp32 floor: the same plain step run in float32 lands some distance from the
  float64 one (weights_error); a framework's fp32 step may be up to FLOOR_FACTOR
  times as far off (another summation order, another convolution algorithm). Where
  that is below TOL the tolerance stays TOL.
- decisions near a tie: a ReLU passes or blocks each input, a max-pool window passes
  one of its inputs, and a correct fp32 implementation may take a decision either way
  when its float64 margin from the tie (a ReLU's input against zero, a window's largest
  input against its second largest) is within fp32's error there; the unit then passes
  or blocks its whole gradient, which moves the updated weights by far more than
  round-off. fp32's error at each ReLU and max-pool call is measured, not assumed: the
  largest |z32 - z64| over each channel of that call's inputs in the plain float32
  step, times FLOOR_FACTOR (the values feeding the decision, so it scales with their
  magnitude). Decisions whose float64 margin is smaller are counted (`near_ties`); the
  float64 step is run again with all of them taken the other way, and its distance
  from the float64 step (`tie_allowance`) is added to the tolerance. This is the
  widest spread among correct fp32 steps that the function itself allows at that
  point, computed from float64 alone: it does not depend on which CPU or kernel the
  check runs on, and where there are no near ties nothing is added, so every such
  network is still held to its fp32 floor.
Measured at smoke size (batch 8) on an AMD EPYC (Zen 3): ResNet-50's fp32 floor is
4.2e-5 and 9 ReLU inputs lie within fp32's error of zero; one of them, -1.45e-5 in
float64, is positive in JAX's fp32 step, and flipping that one decision in the float64
step alone moves the weights 9.7e-4 from it: exactly JAX's distance. All 9 flipped move
them 1.8e-2, which is therefore ResNet-50's tolerance at that size (the check can only
resolve what the function's conditioning allows). ResNet-56: floor 2.2e-5, 13 near
ties, allowance 1.2e-4; AlexNet (whose max-pools have no near ties at that size) and
the networks without ReLU: none. It is such decisions, not BatchNorm's round-off, that
set the spread between correct fp32 steps of the ReLU networks. TensorFlow's XLA mode on
ResNet-50 (4.9e-3) is one such decision too: a ReLU input of +2.96e-6 in float64 that XLA's
fp32 step blocks; flipped in the float64 step, XLA is 7.0e-5 from it (docs/exchange.md).
A different function (another geometry, loss or update rule) is off by far
more than either.

The float64 check (check_float64) runs the framework itself in float64 (the fp64
precision) and holds its logits, loss and update to FP64_TOL = 1e-10 against float64
PyTorch: round-off nine digits below fp32's, where no ReLU or max-pool decision lies near
enough a tie to go the other way (the closest, relative to its channel, is 1.6e-8 over
ten seeds), so
nothing is allowed for, and a change as small as a learning rate 1e-6 off is seen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xfbench.adapters import Cell, get_adapter
from xfbench.errors import CannotRun
from xfbench.exchange.reference import (
    TOL,
    float64_logits,
    max_rel_err,
    reference_logits,
    reference_loss,
    rel_err,
    run_onnx,
)
from xfbench.models import Spec, synthetic_batch
from xfbench.models import layers as L
from xfbench.models.spec import TRAINED_GELU_STD, TRAINED_SCORE_STD

FLOOR_FACTOR = 4
# Trained-range weights (trained_range): models.spec's TRAINED_GELU_STD and
# TRAINED_SCORE_STD, which the decoders' weights are made at too (models/seeded.py).


def first_mode(framework: str, device: str = "cpu") -> str:
    adapter = get_adapter(framework)
    for mode in adapter.modes:
        if adapter.mode_reason(mode, device) is None:
            return mode
    raise CannotRun(f"{framework} has no mode that runs on {device}")


# Modes checked only when named (--mode): torch.compile's Inductor compiles each network's
# forward, backward and update for 1.5 minutes (AlexNet) to several (the ResNets) at smoke
# size on 2 cores, for each of the three checks: too slow for CI's run of the suite.
# CUDA graphs are compiled the same way.
SLOW_MODES = {"torch": ("compile", "cudagraph")}


def check_modes(framework: str, asked=None, device: str = "cpu") -> list[str]:
    """The framework's modes to check on device: those named by --mode that it has
    (none, when it has none of them, as in a benchmark run), else every mode of it that
    runs there except SLOW_MODES. Imports no framework."""
    adapter = get_adapter(framework)
    if asked:
        return [m for m in asked if m in adapter.modes]
    slow = SLOW_MODES.get(framework, ())
    return [m for m in adapter.modes if adapter.mode_reason(m, device) is None and m not in slow]


def parse_seeds(text: str) -> list[int]:
    """'0-9' -> 0..9, '0,3,5' -> [0, 3, 5], or a mix ('0-2,7')."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        first, dash, last = part.partition("-")
        try:
            lo, hi = int(first), int(last) if dash else int(first)
        except ValueError:
            raise ValueError(f"{part!r} is not a seed or a range like 0-9") from None
        if lo < 0 or hi < lo:
            raise ValueError(f"{part!r} is not a range of non-negative seeds")
        seeds += [s for s in range(lo, hi + 1) if s not in seeds]
    return seeds


def _cell(
    spec: Spec,
    framework: str,
    task: str,
    batch: int,
    mode: str | None,
    precision: str = "fp32",
    device: str = "cpu",
) -> Cell:
    return Cell(
        network=spec.id,
        framework=framework,
        mode=mode or first_mode(framework, device),
        precision=precision,
        device=device,
        threads=1,
        batch_size=batch,
        task=task,
        data="resident",
        scale=spec.scale,
    )


def _build(framework: str, spec: Spec, cell: Cell, weights):
    adapter = get_adapter(framework)
    # fp32 runs everywhere on the CPU; other precisions and devices may be refused
    if cell.precision != "fp32" or cell.device != "cpu":
        reason = adapter.check(cell)
        if reason:
            raise CannotRun(reason)
    return adapter.build(spec, cell, weights)


def framework_logits(
    framework: str,
    spec: Spec,
    weights,
    batch: int,
    mode: str | None = None,
    precision: str = "fp32",
    device: str = "cpu",
) -> np.ndarray:
    """The framework's logits (fp32 on the CPU unless asked) on the synthetic batch, in
    evaluation mode."""
    cell = _cell(
        spec=spec,
        framework=framework,
        task="infer",
        batch=batch,
        mode=mode,
        precision=precision,
        device=device,
    )
    work = _build(framework, spec, cell, weights)
    try:
        work.prepare()
        work.step()
        return work.output()
    finally:
        work.close()


def framework_train_step(
    framework: str,
    spec: Spec,
    weights,
    batch: int,
    mode: str | None = None,
    precision: str = "fp32",
    device: str = "cpu",
) -> tuple[float, dict[str, np.ndarray]]:
    """The loss of one training step (fp32 on the CPU unless asked) and the weights after
    its update."""
    cell = _cell(
        spec=spec,
        framework=framework,
        task="train",
        batch=batch,
        mode=mode,
        precision=precision,
        device=device,
    )
    work = _build(framework, spec, cell, weights)
    try:
        work.prepare()
        work.step()
        return work.loss(), work.weights()
    finally:
        work.close()


def framework_export(
    framework: str, spec: Spec, weights, batch: int, path, mode: str | None = None
) -> float:
    """Export the framework's network to path and return the relative error of the
    exported file's logits in ONNX Runtime against the framework's own."""
    work = get_adapter(framework).build(
        spec, _cell(spec=spec, framework=framework, task="infer", batch=batch, mode=mode), weights
    )
    try:
        work.prepare()
        work.step()
        own = work.output()
        work.export_onnx(str(path))
    finally:
        work.close()
    x, _ = synthetic_batch(spec, batch)
    return rel_err(run_onnx(path, x), own)


def check_inference(
    framework: str,
    spec: Spec,
    weights,
    batch: int,
    mode: str | None = None,
    device: str = "cpu",
    precision: str = "fp32",
) -> dict:
    """The framework's logits on device against ONNX Runtime's on the canonical graph
    (which runs on the CPU)."""
    mode = mode or first_mode(framework, device)
    err = rel_err(
        framework_logits(
            framework=framework,
            spec=spec,
            weights=weights,
            batch=batch,
            mode=mode,
            precision=precision,
            device=device,
        ),
        reference_logits(spec, weights, batch),
    )
    return {
        "network": spec.id,
        "framework": framework,
        "mode": mode,
        "device": device,
        "precision": precision,
        "check": "infer",
        "scale": spec.scale,
        "batch_size": batch,
        "verified": bool(err <= TOL),
        "max_rel_err": err,
        "worst_tensor": "logits",
        "tolerance": TOL,
        "reference": "onnxruntime",
    }


def has_batchnorm(spec: Spec) -> bool:
    return any(
        isinstance(layer, (L.BatchNorm, L.BasicBlock, L.Bottleneck)) for layer, _ in spec.shapes
    )


def functional(spec: Spec, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The weights as the function sees them: an LSTM's two bias halves only ever act as
    their sum, so they are compared summed (a framework with one bias keeps only that)."""
    out = dict(weights)
    for layer, _ in spec.shapes:
        if isinstance(layer, L.LSTM):
            for i in range(layer.layers):
                name = f"{layer.name}.l{i}.B"
                half = out[name].shape[0] // 2
                out[name] = out[name][:half] + out[name][half:]
    return out


def weights_error(spec: Spec, after: dict, reference: dict) -> tuple[float, str]:
    """How far one framework's updated weights are from another's, and where.

    Networks without BatchNorm: the largest per-tensor rel_err. Networks with it: the
    relative L2 distance of all weights together, ||a - b|| / ||b||. At initialisation
    some channels are nearly constant over the batch, so their batch variance is itself
    float32 round-off and the gradients behind them differ between any two correct fp32
    implementations (PyTorch against itself in another memory layout, or against fp64,
    already differs by more than 1e-4 in single tensors); the loss check still holds
    these networks to 1e-4.
    """
    a, b = functional(spec, after), functional(spec, reference)
    if not has_batchnorm(spec):
        return max_rel_err(a, b)
    num = sum(float(np.sum((a[k].astype(np.float64) - b[k]) ** 2)) for k in b)
    den = sum(float(np.sum(b[k].astype(np.float64) ** 2)) for k in b)
    return (num / den) ** 0.5 if den else 0.0, "all weights (L2)"


def near_ties(calls64: list, calls32: list) -> list[np.ndarray]:
    """Per ReLU or max-pool call (reference.Decisions), the decisions that a correct fp32
    implementation may take either way: those whose float64 margin from the tie is
    nonzero and smaller than fp32's error there. fp32's error is measured, per channel
    (axis 1) of the call's inputs, as the largest |z32 - z64| of the plain float32 step,
    times FLOOR_FACTOR. A margin of exactly zero is an exact tie (two equal inputs, as a
    ReLU's zeros give a pool): either way it is decided, the value is the same."""
    out = []
    for d64, d32 in zip(calls64, calls32, strict=True):
        err = np.abs(d32.inputs.astype(np.float64) - d64.inputs)
        if err.ndim >= 2:
            axes = tuple(i for i in range(err.ndim) if i != 1)
            shape = [1] * d64.margin.ndim
            shape[1] = err.shape[1]
            delta = FLOOR_FACTOR * err.max(axis=axes).reshape(shape)
        else:
            delta = FLOOR_FACTOR * (err.max() if err.size else 0.0)
        margin = np.abs(d64.margin)
        out.append((margin > 0) & (margin < delta))
    return out


@dataclass
class ReferenceStep:
    """One training step computed in float64, and how close fp32 can get to it."""

    loss: float
    weights: dict[str, np.ndarray]
    fp32_floor: float  # weights_error of the plain float32 step against it
    tolerance: float  # for a framework's updated weights
    near_ties: int = 0  # ReLU and max-pool decisions within fp32's error of a tie
    tie_allowance: float = 0.0  # weights_error of the float64 step with them flipped

    @classmethod
    def compute(cls, spec: Spec, weights, batch: int) -> ReferenceStep:
        if get_adapter("torch").import_error():
            raise CannotRun(
                "the float64 reference step is computed with PyTorch, which is not installed"
            )
        from xfbench.adapters.torch.reference import train_step

        calls64, calls32 = [], []
        loss, ref = train_step(spec, weights, batch, "float64", decisions=calls64)
        _, fp32 = train_step(spec, weights, batch, "float32", decisions=calls32)
        floor, _ = weights_error(spec, fp32, ref)
        ties = near_ties(calls64, calls32)
        count = int(sum(int(t.sum()) for t in ties))
        allowance = 0.0
        if count:
            _, flipped = train_step(spec, weights, batch, "float64", flips=ties)
            allowance, _ = weights_error(spec, flipped, ref)
        return cls(
            loss=loss,
            weights=ref,
            fp32_floor=floor,
            tolerance=max(TOL, FLOOR_FACTOR * floor) + allowance,
            near_ties=count,
            tie_allowance=allowance,
        )

    def __repr__(self) -> str:  # without the weights: this is what a failed check prints
        return (
            f"ReferenceStep(tolerance={self.tolerance:.2e}, fp32_floor={self.fp32_floor:.2e}, "
            f"near_ties={self.near_ties}, tie_allowance={self.tie_allowance:.2e})"
        )


def check_training(
    framework: str,
    spec: Spec,
    weights,
    batch: int,
    mode: str | None = None,
    reference: ReferenceStep | None = None,
    device: str = "cpu",
    precision: str = "fp32",
) -> tuple[dict, dict]:
    """One training step on device: its loss against ONNX Runtime's forward on the "train"
    graph, and its updated weights against the float64 step (ReferenceStep, computed on
    the CPU). Returns the record and the updated weights."""
    mode = mode or first_mode(framework, device)
    reference = reference or ReferenceStep.compute(spec, weights, batch)
    loss, after = framework_train_step(
        framework=framework,
        spec=spec,
        weights=weights,
        batch=batch,
        mode=mode,
        precision=precision,
        device=device,
    )
    loss_err = rel_err(np.array(loss), np.array(reference_loss(spec, weights, batch)))
    w_err, w_worst = weights_error(spec, after, reference.weights)
    # For information: the worst single tensor, and how far the update itself
    # (after - before) is from the float64 update, in the worst tensor.
    a, ref, before = (functional(spec, w) for w in (after, reference.weights, weights))
    worst_single, worst_single_name = max_rel_err(a, ref)
    update_err, _ = max_rel_err(
        {k: a[k] - before[k] for k in a}, {k: ref[k] - before[k] for k in ref}
    )
    loss_ok, weights_ok = loss_err <= TOL, w_err <= reference.tolerance
    # The headline error: whichever of the two is nearer to (or further past) its tolerance.
    worst, err = (
        ("loss", loss_err) if loss_err / TOL >= w_err / reference.tolerance else (w_worst, w_err)
    )
    record = {
        "network": spec.id,
        "framework": framework,
        "mode": mode,
        "device": device,
        "precision": precision,
        "check": "train",
        "scale": spec.scale,
        "batch_size": batch,
        "loss": loss,
        "loss_rel_err": loss_err,
        "tolerance": TOL,
        "weights_rel_err": w_err,
        "weights_tolerance": reference.tolerance,
        "fp32_floor": reference.fp32_floor,
        "float64_loss": reference.loss,
        "near_ties": reference.near_ties,
        "tie_allowance": reference.tie_allowance,
        "worst_tensor_rel_err": worst_single,
        "worst_single_tensor": worst_single_name,
        "update_rel_err": update_err,
        "verified": bool(loss_ok and weights_ok),
        "max_rel_err": err,
        "worst_tensor": worst,
        "reference": "onnxruntime (loss), float64 PyTorch step (updated weights)",
    }
    return record, after


# -- the same function in float64 -------------------------------------------------------
# In float64 every framework's step should be the reference's up to float64 round-off,
# about 1e-16 times the network's conditioning: eight to nine digits below fp32's, so an
# agreement there leaves no room for a different function hiding under fp32's noise.
FP64_TOL = 1e-10


def closest_tie(calls: list) -> float:
    """The smallest nonzero margin of any ReLU or max-pool decision (reference.Decisions)
    from its tie, relative to the largest |input| of its channel (the scale of round-off
    there). Exact ties (margin 0) are left out: decided either way, the value is the same."""
    closest = float("inf")
    for d in calls:
        z = np.abs(d.inputs)
        if z.ndim >= 2:
            axes = tuple(i for i in range(z.ndim) if i != 1)
            shape = [1] * d.margin.ndim
            shape[1] = z.shape[1]
            scale = z.max(axis=axes).reshape(shape)
        else:
            scale = np.full(d.margin.shape, z.max() if z.size else 0.0)
        margin = np.abs(d.margin)
        scale = np.broadcast_to(scale, margin.shape)
        keep = (margin > 0) & (scale > 0)
        if keep.any():
            closest = min(closest, float((margin[keep] / scale[keep]).min()))
    return closest


@dataclass
class Float64Reference:
    """The float64 PyTorch reference (eager, channels-first, on the CPU): evaluation-mode
    logits, and one training step's loss and updated weights."""

    logits: np.ndarray
    loss: float
    weights: dict[str, np.ndarray]
    closest_tie: float  # of the step's ReLU and max-pool decisions (closest_tie)
    # AdamW: per tensor, what a gradient error of FP64_TOL allows each update element
    allowance: dict[str, np.ndarray] | None = None

    @classmethod
    def compute(cls, spec: Spec, weights, batch: int) -> Float64Reference:
        if get_adapter("torch").import_error():
            raise CannotRun(
                "the float64 reference is computed with PyTorch, which is not installed"
            )
        from xfbench.adapters.torch.reference import logits, train_step

        calls: list = []
        grads: dict | None = {} if spec.optimizer == "adamw" else None
        loss, after = train_step(spec, weights, batch, "float64", decisions=calls, gradients=grads)
        return cls(
            logits=logits(spec, weights, batch, "float64"),
            loss=loss,
            weights=after,
            closest_tie=closest_tie(calls),
            allowance=adamw_allowance(spec, grads) if grads is not None else None,
        )

    def __repr__(self) -> str:  # without the weights
        return f"Float64Reference(loss={self.loss!r}, closest_tie={self.closest_tie:.2e})"


def adamw_allowance(spec: Spec, grads: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per update element, the change a gradient error of FP64_TOL times its tensor's
    largest gradient makes in AdamW's first update, u = -lr g / (|g| + eps) (then decay).

    The float64 proof holds SGD's networks to FP64_TOL on the update, which is lr times the
    gradient: a gradient error of FP64_TOL of its scale. AdamW's first update divides each
    gradient element by its own magnitude: where |g| is near eps (a gradient that nearly
    cancels), it magnifies that element's round-off by up to lr / (4 eps) = 2500 times the
    gradient's own scale, and two correct float64 steps summing in other orders differ
    there by more than 1e-10 of the update (1.4e-10 measured: TensorFlow's and PyTorch's
    BERT smoke step). The same standard as SGD's is kept: the gradient to FP64_TOL, carried
    through AdamW's derivative lr eps / (|g| + eps)^2 into the update, no more."""
    out = {}
    for name, g in grads.items():
        g = np.asarray(g, np.float64)
        scale = float(np.abs(g).max()) if g.size else 0.0
        out[name] = spec.lr * spec.eps / (np.abs(g) + spec.eps) ** 2 * FP64_TOL * scale
    return out


def update_error(
    spec: Spec, before: dict, after: dict, reference: dict, allowance: dict | None = None
) -> tuple[float, str]:
    """The largest per-tensor relative error of the update (after - before) against the
    reference's, max |du - du_ref| / max |du_ref|, and in which tensor. The update, not the
    weights: without BatchNorm it is some 1e-4 of the weights (1e-7 in places), so an error
    in it would hide that many digits down in theirs. Each element's difference is counted
    beyond one unit in the last place of the reference's float64 weight: both steps end by
    rounding w0 - lr * v to float64, and two v a round-off apart may round to neighbours,
    which is float64's resolution of the weights, not a difference of function (relative to
    the update, one such unit is up to 2e-9 in FCN-8's first bias and the LSTMs' embeddings).
    allowance (AdamW, adamw_allowance): per element, a further difference not counted."""
    a, ref, w0 = (functional(spec, w) for w in (after, reference, before))
    worst, name = 0.0, ""
    for k, r in ref.items():
        w = w0[k].astype(np.float64)
        du, du_ref = np.asarray(a[k], np.float64) - w, r - w
        allowed = np.spacing(np.abs(r)) + (allowance[k] if allowance else 0.0)
        beyond = np.maximum(np.abs(du - du_ref) - allowed, 0.0)
        diff = float(beyond.max()) if beyond.size else 0.0
        scale = float(np.abs(du_ref).max()) if du_ref.size else 0.0
        err = diff / scale if scale else (0.0 if diff == 0.0 else float("inf"))
        if err > worst or not name:
            worst, name = err, k
    return worst, name


def check_float64(
    framework: str,
    spec: Spec,
    weights,
    batch: int,
    mode: str | None = None,
    reference: Float64Reference | None = None,
) -> dict:
    """The framework in float64 (the fp64 precision) against the float64 reference:
    its evaluation logits, and its training step's loss and update, each to FP64_TOL."""
    mode = mode or first_mode(framework)
    reference = reference or Float64Reference.compute(spec, weights, batch)
    logits = framework_logits(
        framework=framework, spec=spec, weights=weights, batch=batch, mode=mode, precision="fp64"
    )
    loss, after = framework_train_step(
        framework=framework, spec=spec, weights=weights, batch=batch, mode=mode, precision="fp64"
    )
    logits_err = rel_err(logits, reference.logits)
    loss_err = rel_err(np.array(loss), np.array(reference.loss))
    update_err, update_worst = update_error(
        spec, weights, after, reference.weights, allowance=reference.allowance
    )
    errors = {"logits": logits_err, "loss": loss_err, update_worst: update_err}
    worst = max(errors, key=errors.get)
    return {
        "network": spec.id,
        "framework": framework,
        "mode": mode,
        "check": "train-fp64",
        "scale": spec.scale,
        "batch_size": batch,
        "precision": "fp64",
        "logits_rel_err": logits_err,
        "loss_rel_err": loss_err,
        "update_rel_err": update_err,
        "worst_update_tensor": update_worst,
        "closest_tie": reference.closest_tie,
        "verified": bool(max(errors.values()) <= FP64_TOL),
        "max_rel_err": errors[worst],
        "worst_tensor": worst,
        "tolerance": FP64_TOL,
        "reference": "float64 PyTorch (eager, the CPU): logits, loss and update",
    }


def trained_range(spec: Spec, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The weights, with every transformer block's feed-forward input weights (and BERT's
    masked-LM transform) scaled so that GELU's inputs have a standard deviation of
    TRAINED_GELU_STD, and its query and key weights so that the attention scores (q k /
    sqrt(dh)) have one of TRAINED_SCORE_STD, as in a trained network. Each scaled matrix
    reads LayerNorm's output, whose features have unit variance: a matrix of standard
    deviation s over d inputs gives outputs of s sqrt(d). Other networks: unchanged."""
    out = dict(weights)
    blocks = spec.layer(L.TransformerBlock)
    if not blocks:
        return out
    d = spec.layer(L.TokenEmbedding)[0].dim

    def scaled(w: np.ndarray, target: float) -> np.ndarray:
        return (w * (target / (float(w.std()) * np.sqrt(w.shape[1])))).astype(w.dtype)

    for block in blocks:
        fc = f"{block.name}.mlp.fc.weight"
        out[fc] = scaled(out[fc], TRAINED_GELU_STD)
        qkv = out[f"{block.name}.attn.qkv.weight"].copy()  # rows: q, k, v
        # scores q.k / sqrt(dh) have std (sq sqrt(d)) (sk sqrt(d)): each side sqrt(target)
        qkv[: 2 * d] = scaled(qkv[: 2 * d], np.sqrt(TRAINED_SCORE_STD))
        out[f"{block.name}.attn.qkv.weight"] = qkv
    if "mlm.transform.weight" in out:
        out["mlm.transform.weight"] = scaled(out["mlm.transform.weight"], TRAINED_GELU_STD)
    return out


def check_function(
    framework: str,
    spec: Spec,
    weights,
    batch: int,
    mode: str | None = None,
    device: str = "cpu",
) -> dict:
    """The framework's fp32 logits, with the kernels its mode really runs (library GELU,
    fused attention, ONNX Runtime's fused graph), at trained-range weights, against the
    canonical function in float64 (float64_logits). Tolerance: FLOOR_FACTOR times the
    distance of the canonical graph run plainly in fp32 (ONNX Runtime, no graph
    optimisation) from it, at these weights: a change of function as small as GELU's
    erf form for its tanh form moves the logits 40 to 100 times further."""
    mode = mode or first_mode(framework, device)
    wide = trained_range(spec, weights)
    ref64 = float64_logits(spec, wide, batch)
    floor = rel_err(reference_logits(spec, wide, batch), ref64)
    tolerance = FLOOR_FACTOR * max(floor, 1e-8)
    logits = framework_logits(
        framework=framework, spec=spec, weights=wide, batch=batch, mode=mode, device=device
    )
    err = rel_err(logits, ref64)
    return {
        "network": spec.id,
        "framework": framework,
        "mode": mode,
        "device": device,
        "precision": "fp32",
        "check": "function",
        "scale": spec.scale,
        "batch_size": batch,
        "verified": bool(err <= tolerance),
        "max_rel_err": err,
        "worst_tensor": "logits",
        "tolerance": tolerance,
        "fp32_floor": floor,
        "weights": f"trained range: GELU inputs std {TRAINED_GELU_STD}, attention scores "
        f"std {TRAINED_SCORE_STD}",
        "reference": "the canonical graph in float64 (onnx.reference)",
    }
