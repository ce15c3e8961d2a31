"""Run one (framework, device, threads) group of cells in fresh pytest processes.
(The scaling and all-reduce suites' cells run the same way: runner.suites.)

The child is an ordinary `pytest xfbench/suites/...` process given exactly the group's
remaining cells as node ids; xfbench's plugin (xfbench.plugin) pins its threads and affinity before any
framework is imported. With XFBENCH_CELL_DIR set, the child writes each cell's
result (or failure, or skip) into the results folder as the cell finishes, and a
marker naming the cell it is starting. That is how this side knows which cell a
crash, a kill, an out-of-memory or a time-out belongs to: the cell is recorded as
failed with the tail of the output, and a new process takes the remaining cells.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from xfbench import options
from xfbench.adapters import Cell
from xfbench.harness import launch
from xfbench.harness.selection import comma_list
from xfbench.runner.store import RunFolder, cell_key, read_json

# The suites' folder, inside the installed package (or the checkout). Children get absolute
# node ids, so they find the suites wherever xfbench lives and whatever the directory.
SUITES_DIR = Path(__file__).resolve().parents[1] / "suites"
SUITE_FILES = {"train": "test_train.py", "infer": "test_infer.py", "serve": "test_serving.py"}


@dataclass(frozen=True)
class Group:
    framework: str
    device: str
    threads: int  # --threads of the child; 0: not given (the suite's own default)
    suite: str = ""  # "" (train/infer), or "scaling" / "allreduce" (runner.suites)
    part: str = ""  # what else splits a suite's cells over children (network, kind)

    @property
    def name(self) -> str:
        name = f"{self.framework}-{self.device.replace(':', '')}" + (
            f"-t{self.threads}" if self.threads else ""
        )
        return "-".join(x for x in (self.suite, name, self.part) if x)


@dataclass
class Job:
    """The cells of one group still to run, and the selection options they share."""

    group: Group
    cells: list[Cell]  # each knows its task
    options: dict[str, str] = field(default_factory=dict)  # --model, --mode, --preset, ...
    # --copies: the CPU set of each copy (runner.copies); empty: one process
    copies: list[list[int]] = field(default_factory=list)
    cpus: list[int] | None = None  # the CPUs the child is pinned to (None: all allowed)
    env: dict[str, str] = field(default_factory=dict)  # added to the child's environment


def key(cell: Cell) -> str:
    return cell_key(cell.task, cell.id)


def node_id(cell: Cell) -> str:
    if cell.task not in SUITE_FILES:
        return cell.node_id  # a scaling or all-reduce cell (runner.suites.SuiteCell)
    return f"{SUITES_DIR / SUITE_FILES[cell.task]}::test_{cell.task}[{cell.id}]"


def child_command(job: Job, cells: list[Cell]) -> list[str]:
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--framework",
        job.group.framework,
        "--device",
        job.group.device,
    ] + (["--threads", str(job.group.threads)] if job.group.threads else [])
    for name, value in job.options.items():
        if name == "mode" and value:
            # Only this framework's modes: the child validates --mode against it alone.
            from xfbench.adapters import get_adapter

            own = get_adapter(job.group.framework).modes
            value = ",".join(m for m in comma_list(str(value)) if m in own)
        if value is True:  # a flag
            args.append(f"--{name}")
        elif value not in (None, "", False):
            args += [f"--{name}", str(value)]
    return args + [node_id(cell) for cell in cells]


def _tail(log: Path, start: int) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return launch.tail(text)


@dataclass
class ChildEnd:
    end: launch.Ended
    marker: dict | None  # the last "starting <cell>" marker the child wrote
    log_start: int  # where this child's output begins in the log


def _run_child(job: Job, cells, folder: RunFolder, timeout_s: float, on_poll) -> ChildEnd:
    folder.logs.mkdir(parents=True, exist_ok=True)
    log = folder.logs / f"{job.group.name}.log"
    marker_path = folder.root / f".running-{job.group.name}.json"
    marker_path.unlink(missing_ok=True)
    env = launch.child_env(
        {options.CELL_DIR.name: str(folder.root), options.MARKER.name: str(marker_path), **job.env}
    )
    oom_before = launch.oom_kills()
    marker = None

    def poll() -> float | None:
        # The time-out counts from the start of the cell in flight (its marker).
        nonlocal marker
        marker = read_json(marker_path) or marker
        if on_poll:
            on_poll(marker["key"] if marker else None)
        return marker["started"] if marker else None

    with open(log, "ab") as out:
        log_start = out.tell()
        out.write(f"$ {' '.join(child_command(job, cells))}\n".encode())
        out.flush()
        # Ctrl-C in the terminal reaches only this process; the child is stopped by us.
        proc = launch.start(child_command(job, cells), env=env, stdout=out, cpus=job.cpus)
        end = launch.wait(proc, timeout_s, on_poll=poll, oom_before=oom_before)
    marker = read_json(marker_path) or marker
    marker_path.unlink(missing_ok=True)
    return ChildEnd(end, marker, log_start)


def _why(end: ChildEnd, timeout_s: float) -> tuple[str, str]:
    """(status, one-line reason) of a child that ended without finishing its cell."""
    status, reason = launch.failure(end.end, timeout_s, "--cell-timeout")
    if status == "failed":
        reason = f"pytest {reason} during this cell"
    return status, reason


def run_group(job: Job, folder: RunFolder, timeout_s: float, on_poll=None) -> None:
    """Run every cell of the job, restarting the child after a crash, until each cell
    has a result or a failure record in folder."""
    before = {key(c): folder.stamps(key(c)) for c in job.cells}

    def done(k: str) -> bool:
        # A record there before this call is one being retried (--retry-failed,
        # --retry-contended); a new record is a new file (written by os.replace),
        # whatever the clock says.
        return any(now is not None and now != old for now, old in zip(folder.stamps(k), before[k]))

    remaining = [c for c in job.cells if not done(key(c))]
    cells_by_key = {key(c): c for c in job.cells}
    while remaining:
        end = _run_child(
            job=job, cells=remaining, folder=folder, timeout_s=timeout_s, on_poll=on_poll
        )
        tail = _tail(folder.logs / f"{job.group.name}.log", end.log_start)
        in_flight = end.marker["key"] if end.marker else None
        abnormal = end.end.timed_out or end.end.returncode not in (0, 1)
        if abnormal and in_flight in cells_by_key and not done(in_flight):
            status, reason = _why(end, timeout_s)
            folder.write_failure(
                key=in_flight,
                cell=cells_by_key[in_flight].as_dict(),
                status=status,
                reason=reason,
                output_tail=tail,
            )
        left = [c for c in remaining if not done(key(c))]
        if len(left) == len(remaining):
            # No cell got a record: starting again would loop. Record why, and move on.
            if end.end.timed_out and not end.marker:
                reason = f"pytest did not start a cell within {timeout_s:g} s"
            elif abnormal:
                reason = f"pytest ended ({_why(end, timeout_s)[1]}) before running this cell"
            else:
                reason = f"pytest (exit code {end.end.returncode}) did not run this cell"
            for cell in left:
                folder.write_failure(
                    key=key(cell),
                    cell=cell.as_dict(),
                    status="failed",
                    reason=reason,
                    output_tail=tail,
                )
            return
        remaining = left
