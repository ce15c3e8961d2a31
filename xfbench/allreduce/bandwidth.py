"""nccl-tests' bandwidth formulas (doc/PERFORMANCE.md in NVIDIA/nccl-tests).

algbw is the message size over the time of one operation. busbw rescales it so
that it can be compared with the hardware's link bandwidth whatever the number of
ranks: an all-reduce of S bytes over n ranks must move 2(n-1)/n * S bytes through
each rank's link (n-1 steps of reduce-scatter and n-1 of all-gather, S/n each),
however the algorithm is built, so busbw = algbw * 2(n-1)/n. For n = 1 nothing
moves and busbw is 0, as nccl-tests prints.

The reduce-then-broadcast and parameter-server baselines are reported with the
same all-reduce factor: both compute an all-reduce (every rank ends with the sum),
so their busbw says how far they fall short of what an optimal all-reduce would
get through the same links. (A parameter server's rank 0 carries 2(n-1)S, n times
the optimum's 2(n-1)/n S, so its busbw can reach at most 1/n of the link's.)
"""

from __future__ import annotations


def algbw(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in bytes per second."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, not {seconds!r}")
    return nbytes / seconds


def allreduce_bus_factor(n: int) -> float:
    if n < 1:
        raise ValueError(f"world size must be positive, not {n!r}")
    return 2 * (n - 1) / n


def busbw(nbytes: int, seconds: float, n: int) -> float:
    """Bus bandwidth of an all-reduce over n ranks, in bytes per second."""
    return algbw(nbytes, seconds) * allreduce_bus_factor(n)
