"""What an int8 cell adds to its record: how far its logits are from fp32, and which int8
instructions the CPU offers its kernels.

Calibration and the accuracy check use fixed synthetic samples of their own seeds,
independent of the cell's batch size, so that every cell of a network is quantized to the
same function and checked on the same samples. With the canonical (random) weights the
top-1 agreement is a weak check, since many logits lie close together; the logits'
relative distance is the stronger one, and both are recorded so that a faster int8
number never hides a wrong one.
"""

from __future__ import annotations

import numpy as np

from xfbench import machine
from xfbench.models import Spec, synthetic_batch

CALIBRATION_SEED = 1001
CHECK_SEED = 1002
SAMPLES = 32  # full size; smoke networks use 8
SMOKE_SAMPLES = 8


def _count(spec: Spec) -> int:
    return SMOKE_SAMPLES if spec.scale == "smoke" else SAMPLES


def calibration_samples(spec: Spec) -> np.ndarray:
    """The inputs that set the activations' ranges (as synthetic_batch gives them)."""
    return synthetic_batch(spec, _count(spec), CALIBRATION_SEED)[0]


def check_samples(spec: Spec) -> np.ndarray:
    """The inputs the int8 logits are compared on, apart from the calibration's."""
    return synthetic_batch(spec, _count(spec), CHECK_SEED)[0]


def drift(int8_logits: np.ndarray, fp32_logits: np.ndarray) -> dict:
    """The int8 logits against fp32's on the same samples: relative distance (Frobenius
    norms) and the share of samples (and positions, for sequences) whose top class agrees."""
    a = np.asarray(int8_logits, np.float64)
    b = np.asarray(fp32_logits, np.float64)
    norm = float(np.linalg.norm(b))
    return {
        "int8_logits_rel_err": float(np.linalg.norm(a - b) / norm) if norm else None,
        "int8_top1_agreement": float(np.mean(a.argmax(-1) == b.argmax(-1))),
        "int8_check_samples": int(a.shape[0]),
    }


# The int8 dot-product instructions, widest first, by the flag that says a CPU has them:
# x86's AMX, AVX-512 VNNI and AVX-VNNI; aarch64's 8-bit matrix multiply (FEAT_I8MM, SMMLA)
# and dot product (FEAT_DotProd, SDOT)
INT8_DOT = (
    ("amx_int8", "AMX-INT8"),
    ("avx512_vnni", "AVX-512 VNNI"),
    ("avx_vnni", "AVX-VNNI"),
    ("i8mm", "I8MM (SMMLA)"),
    ("asimddp", "dot product (SDOT)"),
)


def isa(flags=None) -> str:
    """The int8 dot-product instructions this CPU (or these ISA flags) offers, the widest
    (the libraries dispatch to it), or none (plain integer multiplies); "unknown" where the
    CPU's flags could not be read."""
    have = set(machine.cpu()["isa"] if flags is None else machine.isa(flags))
    if machine.UNKNOWN in have:
        return "unknown (the CPU's flags could not be read)"
    return next((name for flag, name in INT8_DOT if flag in have), "no VNNI, AMX or SDOT")


_LAST: dict = {}


def once(key: tuple, make):
    """make()'s value for key, kept for the last key only. A serving cell builds one workload
    per batch size, each quantizing the same network from the same weights to the same
    function: the quantization and its check are done once, and one network's worth of
    memory is kept."""
    if _LAST.get("key") != key:
        _LAST.clear()
        _LAST.update(key=key, value=make())
    return _LAST["value"]


def digest(blobs) -> str:
    """A short fingerprint of bytes or arrays (a model, or weights in a fixed order)."""
    import hashlib

    h = hashlib.sha1()
    for blob in blobs:
        h.update(blob if isinstance(blob, bytes) else np.ascontiguousarray(blob).tobytes())
    return h.hexdigest()
