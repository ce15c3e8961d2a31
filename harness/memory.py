"""Peak host memory of this process, resettable per cell.

Linux keeps the peak resident set (VmHWM) per process; writing 5 to
/proc/self/clear_refs resets it to the current RSS, so each cell's peak is its
own even when several cells share a process. Where that is not allowed the
reset fails and the figure is the process's lifetime peak, which is labelled.
"""
from __future__ import annotations

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
