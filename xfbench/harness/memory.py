"""Peak host memory of this process, resettable per cell.

Linux keeps the peak resident set (VmHWM) per process; writing 5 to
/proc/self/clear_refs resets it to the current RSS, so each cell's peak is its
own even when several cells share a process. Where that is not allowed the
reset fails and the figure is the process's lifetime peak, which is labelled.
"""

from __future__ import annotations

import ctypes
import os
import resource
from pathlib import Path


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
    if os.environ.get("XFBENCH_MALLOC") == "default":
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
