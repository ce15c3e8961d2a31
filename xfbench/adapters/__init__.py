"""How each framework runs a network: one subpackage per framework behind adapters.base.

Importing this package imports no framework: adapters are loaded by name on demand.
"""

from __future__ import annotations

import importlib

from xfbench.adapters.base import (
    DATA_MODES,
    PRECISIONS,
    TASKS,
    Adapter,
    Cell,
    Generator,
    Workload,
)
from xfbench.frameworks import FRAMEWORKS


def get_adapter(name: str) -> Adapter:
    if name not in FRAMEWORKS:
        raise KeyError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}")
    return importlib.import_module(FRAMEWORKS[name].adapter).ADAPTER


__all__ = [
    "Adapter",
    "Cell",
    "DATA_MODES",
    "Generator",
    "PRECISIONS",
    "TASKS",
    "Workload",
    "get_adapter",
]
