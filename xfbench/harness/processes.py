"""Processes that start others: a free port for their rendezvous, and ending a
process together with every process it started.

torchrun starts each rank in a session of its own, so killing torchrun, or its
process group, leaves the ranks running: they keep the output pipe open (the
caller waits forever) and the rendezvous port taken.
"""

from __future__ import annotations

import socket

import psutil


def free_port() -> int:
    """A TCP port free on loopback now (for torchrun's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def end_with_descendants(pid: int) -> None:
    """SIGKILL pid and all its descendants (children first listed, then killed together)."""
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
