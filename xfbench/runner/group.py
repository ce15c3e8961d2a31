"""Run one group of cells (a suite's, on one framework, device and thread count) in fresh
pytest processes.

The child is an ordinary `pytest` of the suite's files, handed a job file
(XFBENCH_JOB): the suite, exactly the group's remaining cells as records, and the settings
they are measured with; xfbench's plugin (xfbench.plugin) takes its options from the
settings, pins its threads and affinity before any framework is imported, and generates
exactly those cells. With XFBENCH_CELL_DIR set, the child writes each cell's result (or
failure, or skip) into the results folder as the cell finishes, named by the cell's key,
and a marker naming the cell it is starting. That is how this side knows which cell a
crash, a kill, an out-of-memory or a time-out belongs to: the cell is recorded as failed
with the tail of the output, and a new process takes the remaining cells.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xfbench import environment, options
from xfbench.harness import launch
from xfbench.runner.store import RunFolder, cell_key, read_json, write_json


@dataclass(frozen=True)
class Group:
    framework: str
    device: str
    threads: int  # --threads of the child; 0: the cells have none (the suite's own)
    # the declared suite (xfbench.plugin.Suite) its cells are of; "": the default one
    suite: str = ""
    part: str = ""  # what else splits a suite's cells over children (--copies: x<N>)

    def __post_init__(self):
        if not self.suite:
            object.__setattr__(self, "suite", _default_suite())

    @property
    def name(self) -> str:
        name = f"{self.framework}-{self.device.replace(':', '')}" + (
            f"-t{self.threads}" if self.threads else ""
        )
        # the default suite's groups keep the names of earlier runs' logs (a group exists
        # once the suites are declared: its suite is one of them)
        suite = "" if self.suite == options.default_sweep() else self.suite
        return "-".join(x for x in (suite, name, self.part) if x)


def _default_suite() -> str:
    """The suite `xfbench run` sweeps when --suite is not given, once the suites are
    declared."""
    from xfbench.plugin import declared

    declared()
    return options.default_sweep()


@dataclass
class Job:
    """The cells of one group still to run, and the settings they are measured with."""

    group: Group
    cells: list[Any]  # each knows its task and id, and as_dict() describes it
    settings: dict[str, Any] = field(default_factory=dict)  # --preset, --weights, ... (dests)
    # --copies: the CPU set of each copy (runner.copies); empty: one process
    copies: list[list[int]] = field(default_factory=list)
    cpus: list[int] | None = None  # the CPUs the child is pinned to (None: all allowed)
    env: dict[str, str] = field(default_factory=dict)  # added to the child's environment


def key(cell) -> str:
    return cell_key(cell.task, cell.id)


def job_document(job: Job, cells: list) -> dict:
    """What a child is handed (XFBENCH_JOB): its suite, its cells, and its options, which
    are the job's settings with the group's framework, device and thread count."""
    from xfbench.plugin import declared

    suite = declared()[job.group.suite]
    settings = {
        **job.settings,
        "framework": job.group.framework,
        "device": job.group.device,
        **({"threads": str(job.group.threads)} if job.group.threads else {}),
    }
    return {
        "suite": suite.name,
        "files": [str(p) for p in suite.paths()],
        "settings": settings,
        "cells": [c.as_dict() for c in cells],
    }


def child_command(document: dict) -> list[str]:
    """The child: pytest of the suite's files (absolute, so it finds them wherever xfbench
    lives and whatever the directory); the job file says which cells."""
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *document["files"]]


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
    document = job_document(job, cells)
    job_path = folder.root / "jobs" / f"{job.group.name}.json"
    write_json(job_path, document)
    env = launch.child_env(
        {
            environment.CELL_DIR.name: str(folder.root),
            environment.MARKER.name: str(marker_path),
            environment.JOB.name: str(job_path),
            **job.env,
        }
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
        command = child_command(document)
        out.write(f"$ {environment.JOB.name}={job_path} {' '.join(command)}\n".encode())
        out.write(f"# its cells: {', '.join(c.id for c in cells)}\n".encode())
        out.flush()
        # Ctrl-C in the terminal reaches only this process; the child is stopped by us.
        proc = launch.start(command, env=env, stdout=out, cpus=job.cpus)
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
