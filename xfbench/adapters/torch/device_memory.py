"""A PyTorch cell's own peak of device memory: the caching allocator's, reset when the
cell begins (a workload's and a generator's alike)."""

from __future__ import annotations

import torch


class CudaPeak:
    """reset_peak_memory and peak_device_memory of an object with a torch.device `device`:
    None on the host."""

    device: torch.device

    def reset_peak_memory(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def peak_device_memory(self) -> int | None:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device)
        return None
