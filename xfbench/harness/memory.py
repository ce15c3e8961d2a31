"""Peak host memory of this process, resettable per cell.

Linux keeps the peak resident set (VmHWM) per process; writing 5 to
/proc/self/clear_refs resets it to the current RSS, so each cell's peak is its
own even when several cells share a process. Where that is not allowed the
reset fails and the figure is the process's lifetime peak, which is labelled.
"""

from __future__ import annotations

import ctypes
import resource
from pathlib import Path

from xfbench import environment


def reset_peak_rss() -> bool:
    """Start a new peak; False when the kernel refused (then peaks are lifetime peaks)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_device_bytes(parts) -> int | None:
    """The largest device peak of a cell's parts (its buckets' workloads or generators,
    each reset when the cell began): None on the host."""
    peaks = [p for p in (part.peak_device_memory() for part in parts) if p is not None]
    return max(peaks) if peaks else None


# glibc mallopt parameters (malloc.h), and the setting this process runs with
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX = -1, -2, -4
SETTING = "glibc default"


def keep_freed_memory() -> str:
    """Make glibc keep freed memory for reuse instead of returning it to the kernel.

    By default glibc serves every allocation over 32 MB with a fresh mmap and unmaps it
    on free, so a framework that frees and reallocates its large tensors each step (PyTorch's
    gradients of FCN-5, 470 MB) page-faults them in again every step: measured here, 110,000
    faults and 0.15 to 1.5 s of system time a step, against 0.52 s of work. Every framework in
    the process gets the same allocator settings. XFBENCH_MALLOC=default leaves glibc's own.
    Returns the setting in force, for the records.
    """
    global SETTING
    if environment.MALLOC.read() == "default":
        SETTING = "glibc default (XFBENCH_MALLOC=default)"
        return SETTING
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = (
            libc.mallopt(_M_MMAP_MAX, 0)
            and libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
            and libc.mallopt(_M_TOP_PAD, 2**28)
        )
        SETTING = "glibc: no mmap, no trim" if ok else "glibc default (mallopt refused)"
    except (OSError, AttributeError):
        SETTING = "system default (not glibc)"
    return SETTING


# -- will a cell fit? ---------------------------------------------------------------------
class TooLarge(Exception):
    """A cell that cannot fit in the memory available; the message gives both numbers."""


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def host_available_bytes() -> int:
    """Memory this process can still take: what the OS calls available, or what the
    cgroup's limit leaves (v2 memory.max, v1 memory.limit_in_bytes), whichever is less."""
    import psutil

    available = psutil.virtual_memory().available
    for limit, usage in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        cap, used = _read_int(limit), _read_int(usage)
        if cap is not None and used is not None and cap < 2**60:  # "max" / unlimited
            available = min(available, max(0, cap - used))
    return available


def needed_bytes(
    spec, task: str, batch: int, precision: str, *, scores_kept: int = 0
) -> tuple[int, str]:
    """A lower bound on the memory a cell needs, and how it is made up. Training keeps
    weights, gradients and the optimizer's state (fp32: SGD's momentum, or AdamW's two
    moments) and, per sample, every layer's activations for the backward pass; inference
    the weights and the two largest activations in flight. An attention that is not one
    fused kernel keeps scores_kept (T, T) matrices per head (Adapter.attention_scores_kept):
    in every layer for training, in one layer at a time for inference.
    Frameworks need more (gradients of activations, workspace, allocator slack)."""
    act_bytes = {"bf16": 2, "fp16": 2, "fp64": 8}.get(precision, 4)
    weight_bytes = 8 if precision == "fp64" else 4  # mixed precision keeps fp32 masters
    if task == "train":
        adamw = spec.optimizer == "adamw"
        weights = (4 if adamw else 3) * weight_bytes * spec.param_count
        acts = act_bytes * batch * spec.activations
        what = "weights, gradients and " + ("AdamW's moments" if adamw else "momentum")
    else:
        weights = weight_bytes * spec.param_count
        largest = max(layer.activations(x) for layer, x in spec.shapes)
        acts = 2 * act_bytes * batch * largest
        what = "weights"
    gib = 2**30
    parts = f"{what} {weights / gib:.2f} GiB, activations at batch {batch:,} {acts / gib:.2f} GiB"
    scores = _attention_scores(spec, task, batch, precision=precision, kept=scores_kept)
    if scores:
        parts += f", attention scores {scores / gib:.2f} GiB"
    return weights + acts + scores, parts


def _attention_scores(spec, task: str, batch: int, *, precision: str, kept: int) -> int:
    """Bytes of the attention scores a framework keeps: kept (T, T) matrices per head, in
    the master dtype (float32; float64 in fp64), in every layer (training) or one."""
    from xfbench.models import layers as L

    blocks = spec.layer(L.TransformerBlock)
    if not blocks or not kept:
        return 0
    t = spec.input_shape[0]
    layers = len(blocks) if task == "train" else 1
    master = 8 if precision == "fp64" else 4
    return kept * layers * blocks[0].heads * t * t * master * batch


def check_fits(
    spec, task: str, batch: int, precision: str, device: str, scores_kept: int = 0
) -> None:
    """TooLarge, before anything is allocated, when the cell's lower bound exceeds the
    memory available on its device (the host's for the CPU, NVML's free memory for a GPU)."""
    need, parts = needed_bytes(spec, task, batch, precision, scores_kept=scores_kept)
    if device == "cpu":
        have, where = host_available_bytes(), "host memory available"
    else:
        from xfbench import machine

        have = machine.gpu_free_bytes(device)
        if have is None:
            return  # no NVML reading: the framework's own error will say
        where = f"free on {device}"
    if need > have:
        raise TooLarge(
            f"out of memory before it started: needs at least {need / 2**30:.2f} GiB "
            f"({parts}), {have / 2**30:.2f} GiB {where}; use a smaller --batch-size"
        )
