"""Same tokens, proven: a cell's decoded tokens and logits against the canonical function
in float64.

The framework's own sequence (prompt, then its new tokens) is run through the canonical
graph (exchange/graph.py) widened to float64 by ONNX's reference interpreter, which
shares no kernel with any framework, with no cache at all: teacher-forced, each new
token's logits given every token before it. Two rules, both must hold:
- tokens: each new token is the reference's greedy choice there, or within MARGIN of it
  (of that position's largest |logit|): fp32 moves logits by about 1e-6 of their scale,
  so a choice between two logits closer than that is a tie either framework may break its
  own way; such near-ties are counted;
- logits: the logits the framework computed through its cache at every step are the
  reference's within TOL (exchange/reference.py's measure, the suite's fp32 bound).
A cache written one position off, a wrong mask or a stale entry moves the logits by
percents, where it may leave a trained network's argmax alone for many tokens
(tests/test_generation.py plants such faults in every framework).

A cell checks a fixed set of its sequences, the first and the last of its batch
(checked_sequences): a fault in how the batch is indexed shows in the last, and the
float64 reference then costs what batch 2 costs at any batch (every sequence checked, it
took 8.1 s at batch 1 and 22.7 s at batch 8 on an H100's 16-core host, and batch 64 ran
past a 120 s cell time-out).

A cell runs the check in a process of its own (check_apart): the float64 reference holds
several times the network, and the allocator (harness/memory.py) keeps what it frees, so
in the cell's process it would stay in every later cell's peak memory.
"""

from __future__ import annotations

import numpy as np

from xfbench.adapters.base import round_bf16
from xfbench.exchange.reference import TOL, rel_err
from xfbench.models import Spec, get_spec

MARGIN = TOL  # of a position's largest |logit|: the suite's fp32 agreement bound
# bf16 (its weights and cache, and every product's inputs, in bfloat16; sums and
# normalisations in float32): against the float64 function of the same bf16-rounded
# weights, each logit carries the rounding of the values that made it, bf16's unit
# roundoff u = 2^-8 at each layer's output, over 12 layers and the head; the bound is 16u
# (6.25e-2) of a position's largest |logit|, logits and chosen tokens alike. Measured
# (tests/test_generation.py) well inside it; a cache written one position off moves the
# logits by far more (the same planted faults as at fp32).
BF16_TOL = 16 * 2.0**-8
TOLERANCES = {"fp32": TOL, "bf16": BF16_TOL}
REFERENCE = "the canonical graph in float64 (onnx.reference), teacher-forced, no cache"


class TokensDiverged(AssertionError):
    """A decode that chose tokens the function does not: a failed cell, in one line."""


def reference_logits(spec: Spec, weights: dict, sequence: np.ndarray) -> np.ndarray:
    """(B, T, vocab) float64 logits of the canonical network over sequence (B, T)."""
    from onnx.reference import ReferenceEvaluator

    from xfbench.exchange.graph import build_graph
    from xfbench.exchange.names import INPUT
    from xfbench.exchange.reference import widened

    at_length = get_spec(spec.id, spec.scale, tokens=sequence.shape[1])
    model = widened(build_graph(at_length, weights, "infer")[0])
    return ReferenceEvaluator(model).run(None, {INPUT: sequence.astype(np.int64)})[0]


def judge(logits: np.ndarray, tokens: np.ndarray, margin: float = MARGIN) -> dict:
    """logits (B, OSL, vocab) the reference's at each new token; tokens (B, OSL) chosen;
    a choice within margin of the best (of the largest |logit|) is the function's."""
    scale = np.abs(logits).max(axis=-1)
    best = logits.max(axis=-1)
    chosen = np.take_along_axis(logits, tokens[..., None], axis=-1)[..., 0]
    gap = (best - chosen) / scale  # 0 where the reference's choice was made
    top2 = np.sort(logits, axis=-1)[..., -2:]
    near = (top2[..., 1] - top2[..., 0]) / scale < margin
    bad = np.argwhere(gap > margin)
    out = {
        "verified": not len(bad),
        "tokens_checked": int(tokens.size),
        "worst_gap": float(gap.max()),
        "near_ties": int(near.sum()),
        "margin": margin,
        "reference": REFERENCE,
        "first_divergence": None,
    }
    if len(bad):
        b, j = (int(i) for i in bad[0])
        out["first_divergence"] = {
            "sequence": b,
            "new_token": j,
            "chosen": int(tokens[b, j]),
            "reference": int(logits[b, j].argmax()),
            "gap": float(gap[b, j]),
        }
    return out


def check_generation(
    spec: Spec,
    weights: dict,
    prompt: np.ndarray,
    *,
    tokens: np.ndarray,
    logits: np.ndarray,
    precision: str = "fp32",
) -> dict:
    """The check of tokens (B, OSL) decoded after prompt (B, ISL) with logits (B, OSL, vocab)
    the framework computed for them, at precision's bound (TOLERANCES)."""
    tol = TOLERANCES[precision]
    sequence = np.concatenate([prompt, tokens[:, :-1]], axis=1)
    reference = reference_logits(spec, weights, sequence)[:, prompt.shape[1] - 1 :]
    result = judge(reference, tokens, tol)
    err = rel_err(logits, reference)
    result.update(
        logits_rel_err=err,
        logits_tolerance=tol,
        tokens_verified=result["verified"],
        verified=result["verified"] and err <= tol,
    )
    return result


def decoding_weights(spec: Spec, precision: str = "fp32") -> dict:
    """The weights every generation cell decodes with: the canonical initial weights at a
    trained network's activation ranges (harness/equivalence.trained_range), a decoder's
    of models.DECODERS as models/seeded.py makes them (the frameworks that make them on
    their device make the same); a bf16 cell's rounded to bfloat16, which its framework
    then holds exactly."""
    from xfbench.harness.equivalence import trained_range
    from xfbench.models import DECODERS, initial_weights, seeded

    if spec.id in DECODERS:
        weights = seeded.numpy_weights(spec)
    else:
        weights = trained_range(spec, initial_weights(spec))
    if precision == "bf16":
        return {name: round_bf16(w) for name, w in weights.items()}
    return weights


def _checked(network: str, scale: str, precision: str, prompt, tokens, logits) -> dict:
    spec = get_spec(network, scale)
    weights = decoding_weights(spec, precision)
    return check_generation(
        spec, weights, prompt, tokens=tokens, logits=logits, precision=precision
    )


def check_apart(
    spec: Spec, prompt: np.ndarray, tokens: np.ndarray, logits: np.ndarray, *, precision: str
) -> dict:
    """check_generation with decoding_weights, in a spawned process of its own."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # nothing of this process's state
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        job = pool.submit(_checked, spec.id, spec.scale, precision, prompt, tokens, logits)
        return job.result()


def checked_sequences(batch: int) -> list[int]:
    """The rows of a batch a cell's check decodes in float64: the first and the last."""
    return sorted({0, batch - 1})


def check_kept(
    spec: Spec, prompt: np.ndarray, run, rows: list[int], *, precision: str = "fp32"
) -> dict:
    """check_apart of a generation whose logits were kept for rows only (metrics.generate's
    keep_logits=rows): those sequences' tokens and logits, the rows recorded."""
    result = check_apart(spec, prompt[rows], run.tokens[rows], run.logits, precision=precision)
    return {**result, "sequences_checked": rows}


# The check of a decoder made on its device (models/seeded.py), too large for the host's
# float64 reference: against the same network with no cache in float32 on the same device
# (Generator.reference_logits), its weights those of the cell rounded to the cell's type.
DEVICE_REFERENCE = "the same network in float32 on the same device, teacher-forced, no cache"


def check_on_device(
    spec: Spec, generator, prompt: np.ndarray, run, *, rows, precision: str
) -> dict:
    """check_generation's rules for the kept rows of run, against the generator's own
    float32 reference: the tokens and logits a cache and its mask could get wrong."""
    tol = TOLERANCES[precision]
    sequence = np.concatenate([prompt[rows], run.tokens[rows, :-1]], axis=1)
    reference = generator.reference_logits(sequence)[:, prompt.shape[1] - 1 :].astype(np.float64)
    result = judge(reference, run.tokens[rows], tol)
    err = rel_err(run.logits, reference)
    result.update(
        reference=DEVICE_REFERENCE,
        logits_rel_err=err,
        logits_tolerance=tol,
        tokens_verified=result["verified"],
        verified=result["verified"] and err <= tol,
        sequences_checked=list(rows),
    )
    return result


def verdict(result: dict) -> None:
    """Raise TokensDiverged, one line, where the check failed."""
    if result["verified"]:
        return
    if result["tokens_verified"]:
        raise TokensDiverged(
            f"decoded logits are {result['logits_rel_err']:.2e} of their scale from the "
            f"float64 reference's (tolerance {result['logits_tolerance']:g}), though the tokens "
            "agree: the cache or "
            "the mask computes another function"
        )
    d = result["first_divergence"]
    raise TokensDiverged(
        f"decoded tokens are not the function's: sequence {d['sequence']}, new token "
        f"{d['new_token']} is {d['chosen']} where the float64 reference's choice is "
        f"{d['reference']}, {d['gap']:.2e} of the logits' scale below it (margin "
        f"{result['margin']:g})"
    )
