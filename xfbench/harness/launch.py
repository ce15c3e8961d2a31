"""Every child process xfbench starts (the runner's pytest groups, data-parallel workers,
all-reduce ranks) starts here, under one policy:

- environment: the parent's, with PYTHONPATH led by the folder that holds this `xfbench`
  and the working directory kept off the path, so the child imports the same code as its
  parent wherever it runs (a checkout without an install, an editable install, a wheel,
  from inside another checkout), plus what the caller adds;
- lifetime: the child leads a process group of its own and dies with its parent
  (PR_SET_PDEATHSIG), so a killed sweep leaves no orphan writing into its folder; a
  time-out or an interrupt kills the whole group and every descendant (torchrun starts
  each rank in a session of its own, out of the group's reach);
- one time-out rule (wall time since start, or since the caller's own clock restarts it)
  and one out-of-memory check (the kernel's OOM-kill counter of this cgroup, v1 or v2);
- one failure format: a status (timeout, oom, killed, failed) and one line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xfbench.harness.processes import end_with_descendants

# The folder that holds the xfbench package: a checkout's root, or site-packages.
PACKAGE_PARENT = Path(__file__).resolve().parents[2]
POLL_S = 0.25
TAIL_LINES = 40  # of a failed child's output, kept with its failure record


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last lines of a child's output: what a failure record keeps of it."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


class LaunchError(RuntimeError):
    """Workers ended without a result: status "failed" or "timeout", and their output's
    tail (the scaling and all-reduce launchers)."""

    def __init__(self, message: str, status: str = "failed", tail: str = ""):
        super().__init__(message)
        self.status, self.tail = status, tail


def child_env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None) -> dict:
    """The environment of a child: base (default: this process's), PYTHONPATH led by the
    folder holding this xfbench, then extra."""
    env = dict(os.environ if base is None else base)
    rest = [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(PACKAGE_PARENT)
    ]
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_PARENT)] + rest)
    # `python -m` would put the working directory ahead of PYTHONPATH: run from inside
    # another xfbench checkout, the child would import that one's xfbench (pytest: "import
    # file mismatch"). Python 3.11's safe path leaves the working directory out.
    env["PYTHONSAFEPATH"] = "1"
    env.update(extra or {})
    return env


def oom_kills(
    proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")
) -> int | None:
    """The kernel's count of out-of-memory kills in this process's memory cgroup, if
    readable: memory.events (cgroup v2, mounted at root, or at root/unified beside v1
    controllers) or memory.oom_control (cgroup v1). The arguments are for tests."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if controllers == "":  # v2: one unified hierarchy
            files = [root / rel / "memory.events", root / "unified" / rel / "memory.events"]
        elif "memory" in controllers.split(","):
            files = [
                root / "memory" / rel / "memory.oom_control",
                root / "memory/memory.oom_control",
            ]
        else:
            continue
        for f in files:
            try:
                for entry in f.read_text().splitlines():
                    name, _, value = entry.partition(" ")
                    if name == "oom_kill":
                        return int(value)
            except (OSError, ValueError):
                continue
    return None


def _child_setup(cpus: Sequence[int] | None) -> Callable[[], None]:
    def setup() -> None:
        # If the parent is killed (SIGKILL, which it cannot catch), the child goes too.
        try:
            import ctypes

            pr_set_pdeathsig = 1
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
        if cpus:
            os.sched_setaffinity(0, cpus)

    return setup


def start(
    argv: Sequence[str],
    *,
    env: dict | None = None,
    stdout=subprocess.PIPE,
    cpus: Sequence[int] | None = None,
    cwd: str | os.PathLike | None = None,
    text: bool = True,
) -> subprocess.Popen:
    """Start a child under the policy above (env defaults to child_env())."""
    return subprocess.Popen(
        list(argv),
        env=env if env is not None else child_env(),
        cwd=cwd,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=text if stdout == subprocess.PIPE else False,
        start_new_session=True,
        preexec_fn=_child_setup(cpus),
    )


def stop(proc: subprocess.Popen) -> None:
    """Kill the child, its process group and every descendant, and reap it."""
    end_with_descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


@dataclass
class Ended:
    """How a child ended."""

    returncode: int
    timed_out: bool
    oom: bool
    output: str = ""  # its output, when it was captured

    @property
    def tail(self) -> str:
        return tail(self.output)


def failure(end: Ended, timeout_s: float, timeout_hint: str = "") -> tuple[str, str]:
    """(status, one-line reason) of a child that gave no result."""
    if end.timed_out:
        hint = f" ({timeout_hint})" if timeout_hint else ""
        return "timeout", f"no result within {timeout_s:g} s{hint}; process killed"
    if end.oom:
        return "oom", "out of memory: the kernel killed the process"
    if end.returncode < 0:
        try:
            name = signal.Signals(-end.returncode).name
        except ValueError:
            name = f"signal {-end.returncode}"
        hint = " (out of memory, or killed from outside)" if name == "SIGKILL" else ""
        return "killed", f"process died from {name}{hint}"
    return "failed", f"process exited with code {end.returncode}"


def wait(
    proc: subprocess.Popen,
    timeout_s: float,
    on_poll: Callable[[], float | None] | None = None,
    oom_before: int | None = None,
) -> Ended:
    """Wait for a started child, killing it past timeout_s. on_poll, called every
    POLL_S, may return the time (time.monotonic) from which the time-out counts (a child
    that reports progress restarts the clock). Output is captured only when it is a pipe."""
    started, timed_out = time.monotonic(), False
    output = ""
    try:
        if on_poll is None and proc.stdout is not None:
            try:
                output, _ = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                stop(proc)
                output, _ = proc.communicate()
        else:
            while proc.poll() is None:
                time.sleep(POLL_S)
                since = (on_poll() if on_poll else None) or started
                if time.monotonic() - since > timeout_s:
                    timed_out = True
                    stop(proc)
    except BaseException:
        stop(proc)  # interrupted: the child goes with us
        raise
    after = oom_kills()
    oom = oom_before is not None and after is not None and after > oom_before
    return Ended(proc.returncode, timed_out, oom, output or "")


def run(
    argv: Sequence[str],
    timeout_s: float,
    *,
    env: dict | None = None,
    cpus: Sequence[int] | None = None,
    cwd: str | os.PathLike | None = None,
) -> Ended:
    """Start a child, capture its output, and wait for it under the time-out."""
    before = oom_kills()
    return wait(start(argv, env=env, cpus=cpus, cwd=cwd), timeout_s, oom_before=before)
