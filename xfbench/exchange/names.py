"""What names a canonical ONNX file, without importing onnx: its format and versions, its
input and output, and where it is cached. A machine with onnxruntime but no onnx (a GPU
image, say) finds and runs files written elsewhere through these alone."""

from __future__ import annotations

import hashlib
from pathlib import Path

from xfbench import environment
from xfbench.models import Spec

# onnx 1.23.2 writes IR version 14 and opset 28 by default, which onnxruntime 1.31.1
# refuses (it loads IR <= 13, opset <= 26). IR 10 / opset 21 (onnx 1.16's) is read by
# every runtime and converter this suite uses, and has every operator it needs.
IR_VERSION = 10
OPSET = 21
INPUT, OUTPUT = "input", "logits"
FORMAT = 1  # bump when the graph builder changes what a file holds


def cache_dir() -> Path:
    return Path(environment.CACHE.read() or Path.home() / ".cache" / "xfbench" / "onnx")


def digest(spec: Spec) -> str:
    key = repr(
        (FORMAT, IR_VERSION, OPSET, spec.input_shape, spec.classes, spec.input_kind, spec.layers)
    )
    return hashlib.sha256(key.encode()).hexdigest()[:10]


def canonical_path(spec: Spec, seed: int = 0, directory: Path | None = None) -> Path:
    name = f"{spec.id}-{spec.scale}-seed{seed}-{digest(spec)}.onnx"
    return Path(directory or cache_dir()) / name
