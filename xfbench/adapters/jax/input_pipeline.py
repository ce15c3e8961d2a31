"""JAX's input pipeline for --data real. JAX has no loader of its own; Grain is the usual
choice, but it is not among the pinned packages here, so this is the documented
alternative: a prefetching iterator whose worker threads decode and augment samples
(Pillow and numpy release the GIL) a few batches ahead, in the shared seeded order
(data/sources.py). The adapter puts each batch on the device (feed)."""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from xfbench.data.sources import Source, batches_of_indices, sample

PREFETCH = 2  # batches in flight ahead of the one being trained on


def batches(src: Source, batch: int, seed: int, workers: int):
    """An endless iterator of numpy (x, y) batches in the synthetic batch's layout."""
    rng = np.random.default_rng([seed, 11])

    def make(idx, key):
        local = np.random.default_rng(key)  # one per batch: threads never share one
        pairs = [sample(src, int(i), local) for i in idx]
        return np.stack([x for x, _ in pairs]), np.stack([np.asarray(y) for _, y in pairs])

    order = batches_of_indices(len(src), batch, seed)
    if workers == 0:
        for idx in order:
            yield make(idx, rng.integers(2**63))
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="xfbench-input")
    try:
        # the keys are drawn here, in order, so the augmentations do not depend on timing
        ahead: deque = deque(
            pool.submit(make, next(order), rng.integers(2**63)) for _ in range(PREFETCH + 1)
        )
        while True:
            done = ahead.popleft()
            ahead.append(pool.submit(make, next(order), rng.integers(2**63)))
            yield done.result()
    finally:  # close(): the batches not started are dropped, the threads end
        pool.shutdown(wait=True, cancel_futures=True)
