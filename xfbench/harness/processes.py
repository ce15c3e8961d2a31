"""Processes that start others: a free port for their rendezvous, and ending a
process together with every process it started.

torchrun starts each rank in a session of its own, so killing torchrun, or its
process group, leaves the ranks running: they keep the output pipe open (the
caller waits forever) and the rendezvous port taken.
"""

from __future__ import annotations

import socket
import time

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


# pytest's end to the process's: a process that has not exited by then is held (a GPU
# window's test step passed its cap once with its JUnit XML written, 38 s into 40).
EXIT_GRACE_S = 5.0


def holders() -> list[str]:
    """What can keep this process from exiting: threads that are not daemons (the
    interpreter joins them) with where each stands, and child processes."""
    import sys
    import threading
    import traceback

    frames = sys._current_frames()
    found = []
    for t in threading.enumerate():
        if t is threading.main_thread() or t.daemon or not t.is_alive():
            continue
        stack = traceback.extract_stack(frames[t.ident])[-1:] if t.ident in frames else []
        where = f" at {stack[0].filename}:{stack[0].lineno}" if stack else ""
        found.append(f"thread {t.name!r}{where}")
    try:
        for child in psutil.Process().children(recursive=True):
            found.append(f"child process {child.pid} ({' '.join(child.cmdline()[:3])})")
    except psutil.Error:
        pass
    return found


def exit_within(seconds: float, status: int, say) -> None:
    """End the process with status if it is still exiting `seconds` from now: a daemon
    thread that first says (say(line)) what held it. Outputs must be written before. A
    process whose main thread still runs (pytest run in-process, say) is left alone."""
    import os
    import sys
    import threading

    def watch() -> None:
        time.sleep(seconds)
        if threading.main_thread().is_alive():  # not exiting: the interpreter's shutdown
            return  # marks the main thread stopped before it joins threads and runs atexit
        held = "; ".join(holders()) or "the interpreter's shutdown (atexit handlers, modules)"
        say(f"xfbench: the process had not exited {seconds:.0f} s after its end, held by "
            f"{held}: ended with status {status}")  # fmt: skip
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(status)

    threading.Thread(target=watch, name="xfbench-exit-watch", daemon=True).start()
