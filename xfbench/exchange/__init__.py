"""Networks exchanged through ONNX: the canonical file of each network, and reading it back.

Framework-neutral: imports onnx and numpy only (onnxruntime where a function runs a model).
"""

from xfbench.exchange.files import (
    ExchangeError,
    cache_dir,
    canonical_file,
    canonical_path,
    canonical_weights,
    read_weights,
    write_canonical,
)
from xfbench.exchange.graph import INPUT, IR_VERSION, OPSET, OUTPUT, build_graph

__all__ = [
    "ExchangeError",
    "INPUT",
    "IR_VERSION",
    "OPSET",
    "OUTPUT",
    "build_graph",
    "cache_dir",
    "canonical_file",
    "canonical_path",
    "canonical_weights",
    "read_weights",
    "write_canonical",
]
