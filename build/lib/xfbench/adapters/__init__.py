"""How each framework runs a network: one subpackage per framework behind adapters.base.

Importing this package imports no framework: adapters are loaded by name on demand.
"""
from __future__ import annotations

import importlib

from xfbench.adapters.base import DATA_MODES, PRECISIONS, TASKS, Adapter, Cell, Unsupported, Workload

# --framework value -> module holding an `ADAPTER` instance.
REGISTRY: dict[str, str] = {
    "torch": "xfbench.adapters.torch",
    "jax": "xfbench.adapters.jax",
    "tensorflow": "xfbench.adapters.tensorflow",
    "null": "xfbench.adapters.null",
    "onnxruntime": "xfbench.adapters.onnxruntime",
}

# Frameworks a plain run selects when --framework is not given (the null
# adapter measures the harness itself and is only run when asked for).
DEFAULT_EXCLUDED = ("null",)


def get_adapter(name: str) -> Adapter:
    if name not in REGISTRY:
        raise KeyError(f"unknown framework {name!r}; known: {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[name]).ADAPTER


def all_modes() -> dict[str, tuple[str, ...]]:
    return {name: get_adapter(name).modes for name in REGISTRY}


__all__ = ["Adapter", "Cell", "DATA_MODES", "DEFAULT_EXCLUDED", "PRECISIONS", "REGISTRY", "TASKS",
           "Unsupported", "Workload", "all_modes", "get_adapter"]
