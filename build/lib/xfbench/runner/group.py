"""Run one (framework, device, threads) group of cells in fresh pytest processes.
(The scaling and all-reduce suites' cells run the same way: runner.suites.)

The child is an ordinary `pytest xfbench/suites/...` process given exactly the group's
remaining cells as node ids; conftest pins its threads and affinity before any
framework is imported. With XFBENCH_CELL_DIR set, the child writes each cell's
result (or failure, or skip) into the results folder as the cell finishes, and a
marker naming the cell it is starting. That is how this side knows which cell a
crash, a kill, an out-of-memory or a time-out belongs to: the cell is recorded as
failed with the tail of the output, and a new process takes the remaining cells.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from xfbench.adapters import Cell
from xfbench.runner.store import RunFolder, cell_key, read_json

# The suites' folder, inside the installed package (or the checkout). Children get absolute
# node ids, so they find the suites wherever xfbench lives and whatever the directory.
SUITES_DIR = Path(__file__).resolve().parents[1] / "suites"
SUITE_FILES = {"train": "test_train.py", "infer": "test_infer.py"}
POLL_S = 0.25
TAIL_LINES = 40

# Environment of the child: where it writes its cells, and its in-flight marker.
CELL_DIR_ENV = "XFBENCH_CELL_DIR"
MARKER_ENV = "XFBENCH_MARKER"


@dataclass(frozen=True)
class Group:
    framework: str
    device: str
    threads: int            # --threads of the child; 0: not given (the suite's own default)
    suite: str = ""         # "" (train/infer), or "scaling" / "allreduce" (runner.suites)
    part: str = ""          # what else splits a suite's cells over children (network, kind)

    @property
    def name(self) -> str:
        name = f"{self.framework}-{self.device.replace(':', '')}" \
            + (f"-t{self.threads}" if self.threads else "")
        return "-".join(x for x in (self.suite, name, self.part) if x)


@dataclass
class Job:
    """The cells of one group still to run, and the selection options they share."""
    group: Group
    cells: list[Cell]                                       # each knows its task
    options: dict[str, str] = field(default_factory=dict)   # --model, --mode, --preset, ...


def key(cell: Cell) -> str:
    return cell_key(cell.task, cell.id)


def node_id(cell: Cell) -> str:
    if cell.task not in SUITE_FILES:
        return cell.node_id          # a scaling or all-reduce cell (runner.suites.SuiteCell)
    return f"{SUITES_DIR / SUITE_FILES[cell.task]}::test_{cell.task}[{cell.id}]"


def child_command(job: Job, cells: list[Cell]) -> list[str]:
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "--framework", job.group.framework, "--device", job.group.device] \
        + (["--threads", str(job.group.threads)] if job.group.threads else [])
    for name, value in job.options.items():
        if name == "mode" and value:
            # Only this framework's modes: the child validates --mode against it alone.
            from xfbench.adapters import get_adapter
            own = get_adapter(job.group.framework).modes
            value = ",".join(m for m in str(value).split(",") if m.strip() in own)
        if value not in (None, ""):
            args += [f"--{name}", str(value)]
    return args + [node_id(cell) for cell in cells]


def _oom_kills() -> int | None:
    """The kernel's count of out-of-memory kills in this cgroup (cgroup v2), if readable."""
    try:
        rel = Path("/proc/self/cgroup").read_text().strip().split("::", 1)[1]
        for line in (Path("/sys/fs/cgroup") / rel.lstrip("/") / "memory.events").read_text().splitlines():
            name, value = line.split()
            if name == "oom_kill":
                return int(value)
    except (OSError, IndexError, ValueError):
        pass
    return None


def _tail(log: Path, start: int) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-TAIL_LINES:])


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


@dataclass
class ChildEnd:
    returncode: int
    marker: dict | None     # the last "starting <cell>" marker the child wrote
    timed_out: bool
    oom: bool
    log_start: int          # where this child's output begins in the log


def _run_child(job: Job, cells, folder: RunFolder, timeout_s: float, on_poll) -> ChildEnd:
    folder.logs.mkdir(parents=True, exist_ok=True)
    log = folder.logs / f"{job.group.name}.log"
    marker_path = folder.root / f".running-{job.group.name}.json"
    marker_path.unlink(missing_ok=True)
    env = dict(os.environ, **{CELL_DIR_ENV: str(folder.root), MARKER_ENV: str(marker_path)})
    oom_before = _oom_kills()
    with open(log, "ab") as out:
        log_start = out.tell()
        out.write(f"$ {' '.join(child_command(job, cells))}\n".encode())
        out.flush()
        # A session of its own: a time-out kills the whole process group (compiler
        # workers included), and Ctrl-C in the terminal reaches only this process.
        proc = subprocess.Popen(child_command(job, cells), env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)
        started, timed_out, marker = time.monotonic(), False, None
        try:
            while proc.poll() is None:
                time.sleep(POLL_S)
                marker = read_json(marker_path) or marker
                since = marker["started"] if marker else started
                if on_poll:
                    on_poll(marker["key"] if marker else None)
                if time.monotonic() - since > timeout_s:
                    timed_out = True
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        except BaseException:
            # Interrupted: stop the child too; its cell in flight stays unfinished.
            _kill(proc)
            raise
    marker = read_json(marker_path) or marker
    marker_path.unlink(missing_ok=True)
    oom_after = _oom_kills()
    oom = oom_before is not None and oom_after is not None and oom_after > oom_before
    return ChildEnd(proc.returncode, marker, timed_out, oom, log_start)


def _die_with_parent() -> None:
    """In the child, before exec: if the runner itself is killed (SIGKILL, which it cannot
    catch), take the child down too, so that a resumed sweep never finds an orphan still
    writing into the same folder."""
    try:
        import ctypes
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _why(end: ChildEnd, timeout_s: float) -> tuple[str, str]:
    """(status, one-line reason) of a child that ended without finishing its cell."""
    if end.timed_out:
        return "timeout", f"no result within {timeout_s:g} s (--cell-timeout); process killed"
    if end.oom:
        return "oom", "out of memory: the kernel killed the process"
    if end.returncode < 0:
        name = _signal_name(end.returncode)
        hint = " (out of memory, or killed from outside)" if name == "SIGKILL" else ""
        return "killed", f"process died from {name}{hint}"
    return "failed", f"pytest process exited with code {end.returncode} during this cell"


def run_group(job: Job, folder: RunFolder, timeout_s: float, on_poll=None) -> None:
    """Run every cell of the job, restarting the child after a crash, until each cell
    has a result or a failure record in folder."""
    before = {key(c): folder.failure_stamp(key(c)) for c in job.cells}

    def done(k: str) -> bool:
        # A failure recorded before this call is one being retried (--retry-failed);
        # a new record is a new file (written by os.replace), whatever the clock says.
        stamp = folder.failure_stamp(k)
        return folder.has_result(k) or (stamp is not None and stamp != before[k])

    remaining = [c for c in job.cells if not done(key(c))]
    cells_by_key = {key(c): c for c in job.cells}
    while remaining:
        end = _run_child(job, remaining, folder, timeout_s, on_poll)
        tail = _tail(folder.logs / f"{job.group.name}.log", end.log_start)
        in_flight = end.marker["key"] if end.marker else None
        abnormal = end.timed_out or end.returncode not in (0, 1)
        if abnormal and in_flight in cells_by_key and not done(in_flight):
            status, reason = _why(end, timeout_s)
            folder.write_failure(in_flight, cells_by_key[in_flight].as_dict(), status, reason, tail)
        left = [c for c in remaining if not done(key(c))]
        if len(left) == len(remaining):
            # No cell got a record: starting again would loop. Record why, and move on.
            if end.timed_out and not end.marker:
                reason = f"pytest did not start a cell within {timeout_s:g} s"
            elif abnormal:
                reason = f"pytest ended ({_why(end, timeout_s)[1]}) before running this cell"
            else:
                reason = f"pytest (exit code {end.returncode}) did not run this cell"
            for cell in left:
                folder.write_failure(key(cell), cell.as_dict(), "failed", reason, tail)
            return
        remaining = left
