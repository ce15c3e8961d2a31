"""Networks exchanged through ONNX: the canonical file of each network, and reading it back.

Framework-neutral: imports onnx and numpy only (onnxruntime where a function runs a model).
Names are resolved when first used, so `from xfbench.exchange import canonical_path` works
where onnx is not installed (names.py needs no onnx; files.py and graph.py do).
"""

from importlib import import_module

_WHERE = {
    "ExchangeError": "files",
    "canonical_file": "files",
    "canonical_weights": "files",
    "read_weights": "files",
    "write_canonical": "files",
    "build_graph": "graph",
    "INPUT": "names",
    "IR_VERSION": "names",
    "OPSET": "names",
    "OUTPUT": "names",
    "cache_dir": "names",
    "canonical_path": "names",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'xfbench.exchange' has no attribute {name!r}")
    return getattr(import_module(f"xfbench.exchange.{_WHERE[name]}"), name)
