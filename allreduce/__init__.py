"""All-reduce bandwidth: torch.distributed and jax.lax.psum over message sizes.

bandwidth.py holds nccl-tests' formulas, sizes.py the message sizes, timing.py how
long each size is timed, check.py the correctness check every size passes through;
torch_collectives.py and jax_psum.py are the workers (one process per rank under
torchrun; one process over W devices for JAX), launch.py starts them, plugin.py
and table.py are the pytest side. Nothing here imports a framework at import time
except the workers themselves.
"""
from __future__ import annotations

FRAMEWORKS = ("torch", "jax")
PATTERNS = ("allreduce", "reduce_broadcast")
DTYPE = "fp32"
ITEM_BYTES = 4
