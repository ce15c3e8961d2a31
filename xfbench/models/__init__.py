"""What is measured: one framework-neutral spec per network (see docs/models.md)."""

from xfbench.models.networks import (
    DECODERS,
    FAMILIES,
    NETWORKS,
    PAPER_NETWORKS,
    SCALES,
    SMOKE,
    SMOKE_BATCH,
    TRANSFORMERS,
    geometry,
    get_spec,
)
from xfbench.models.spec import Spec, describe, initial_weights, synthetic_batch

__all__ = [
    "DECODERS",
    "FAMILIES",
    "NETWORKS",
    "PAPER_NETWORKS",
    "TRANSFORMERS",
    "geometry",
    "SCALES",
    "SMOKE",
    "SMOKE_BATCH",
    "Spec",
    "describe",
    "get_spec",
    "initial_weights",
    "synthetic_batch",
]
