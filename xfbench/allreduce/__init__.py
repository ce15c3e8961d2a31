"""All-reduce bandwidth: torch.distributed and jax.lax.psum over message sizes.

bandwidth.py holds nccl-tests' formulas, sizes.py the message sizes, timing.py how
long each size is timed, check.py the correctness check every size passes through;
torch_collectives.py and jax_psum.py are the workers (one process per rank under
torchrun; one process over W devices for JAX), launch.py starts them, plugin.py
and table.py are the pytest side. Nothing here imports a framework at import time
except the workers themselves.
"""

from __future__ import annotations

from xfbench import environment

# Tests only: workers that reduce with max, a wrong sum their check must catch.
ALLREDUCE_FAULT = environment.declare(
    environment.Variable(
        name="XFBENCH_ALLREDUCE_FAULT",
        values=("max",),
        meaning="tests only: `max` makes the all-reduce workers reduce with max, a wrong "
        "sum their check must catch",
    )
)
# Each framework's all-reduce worker module, where it has one.
WORKERS = {"torch": "xfbench.allreduce.torch_collectives", "jax": "xfbench.allreduce.jax_psum"}
FRAMEWORKS = tuple(WORKERS)  # those with an all-reduce worker
# Every pattern, in the order tables show them:
#   allreduce         the library's all-reduce (ring or tree; Gloo, NCCL, XLA)
#   reduce_broadcast  the library's reduce to rank 0, then its broadcast from rank 0
#   parameter_server  literally: rank 0 receives every other rank's buffer, sums, and
#                     sends the sum back to each one (2(n-1) buffers through its link)
PATTERNS = ("allreduce", "reduce_broadcast", "parameter_server")
# What each worker measures. JAX has no reduce-to-one collective: its baseline moves
# every shard to device 0 and the sum back, which is the parameter-server pattern.
FRAMEWORK_PATTERNS = {"torch": PATTERNS, "jax": ("allreduce", "parameter_server")}
DTYPE = "fp32"
ITEM_BYTES = 4
