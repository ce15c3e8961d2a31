"""PyTorch's own input pipeline for --data real: a Dataset of decoded, augmented samples
and a DataLoader with worker processes, pinned memory on CUDA and prefetching, taking
its batches in the shared seeded order (data/sources.py)."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from xfbench.data.sources import Source, batches_of_indices, sample


class Samples(Dataset):
    def __init__(self, src: Source, seed: int):
        self.src, self.seed = src, seed
        self.rng = None  # made in each worker, so workers draw different augmentations

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i):
        if self.rng is None:
            info = torch.utils.data.get_worker_info()
            self.rng = np.random.default_rng([self.seed, 11, info.id if info else 0])
        return sample(self.src, int(i), self.rng)


class IndexBatches:
    """The shared order, epoch after epoch, as a batch sampler (never ends)."""

    def __init__(self, n: int, batch: int, seed: int):
        self.n, self.batch, self.seed = n, batch, seed

    def __iter__(self):
        return (list(b) for b in batches_of_indices(self.n, self.batch, self.seed))


def batches(src: Source, batch: int, seed: int, workers: int, cuda: bool):
    """An endless iterator of (x, y) CPU tensors, pinned when the device is a GPU. Its
    close() stops the worker processes at once (the DataLoader's iterator shuts them
    down when it is released)."""
    loader = DataLoader(
        Samples(src, seed),
        batch_sampler=IndexBatches(len(src), batch, seed),
        num_workers=workers,
        pin_memory=cuda,
        persistent_workers=workers > 0,
        prefetch_factor=2 if workers > 0 else None,
    )
    it = iter(loader)
    try:
        yield from it
    finally:
        shutdown = getattr(it, "_shutdown_workers", None)  # what its __del__ calls
        if shutdown:
            shutdown()
