"""`xfbench run --copies N|auto`: each cell run as N copies at once, for the throughput of a
machine that one process cannot fill (many cores, several sockets or NUMA nodes), as
MLPerf's CPU submissions and SPECrate measure such machines.

Each copy is an ordinary child (runner.group) pinned to its own CPUs (topology.copy_cpus)
with its own framework threads, writing into its own folder under copies/; the copies
meet before and after each cell's timed rounds (harness.copies). When they have all
ended, each cell's copies become one record in cells/: every copy's rounds and median,
their aggregate samples per second, the spread between copies and how far their timed
rounds ran with every copy running. A cell any copy failed is a failure naming that copy.
"""

from __future__ import annotations

import shutil
import statistics
import threading
from dataclasses import dataclass
from typing import Any

from pytest_benchmark.stats import Stats

from xfbench import environment
from xfbench.adapters import Cell
from xfbench.harness import stats as ci
from xfbench.harness.copies import WAIT_S
from xfbench.runner.group import Group, Job, key, run_group
from xfbench.runner.store import RunFolder, read_json

# Package energy counters (RAPL) see the whole socket: each copy would count the others'.
ENERGY_FIELDS = ("energy_j", "energy_per_step_j", "joules_per_sample", "samples_per_kj")


@dataclass(frozen=True)
class CopiesCell:
    """A cell run as several copies at once: its own key in the results folder (the cell's
    id with -xN), so it never stands in for the one-process cell."""

    cell: Cell
    copies: int

    @property
    def task(self) -> str:
        return self.cell.task

    @property
    def id(self) -> str:
        return f"{self.cell.id}-x{self.copies}"

    def as_dict(self) -> dict[str, Any]:
        return {**self.cell.as_dict(), "copies": self.copies}

    def __getattr__(self, name):  # framework, device, network, ...: the cell's
        return getattr(self.cell, name)


def _copy_folder(folder: RunFolder, job: Job, i: int) -> RunFolder:
    return RunFolder(folder.root / "copies" / job.group.name / f"copy{i}")


def run_copies(job: Job, folder: RunFolder, timeout_s: float, on_poll=None) -> None:
    """Run the job's cells as len(job.copies) copies at once, then write each cell's
    record (or failure) into folder."""
    n = len(job.copies)
    # a copy waiting in vain for the others goes on alone well inside the cell's time-out
    wait_s = min(WAIT_S, timeout_s / 3)
    meeting = folder.root / "copies" / job.group.name / "meeting"
    shutil.rmtree(meeting, ignore_errors=True)  # marks of an earlier, interrupted sweep
    meeting.mkdir(parents=True)
    stop = threading.Event()
    errors: list[BaseException] = []
    subs = [_copy_folder(folder, job, i) for i in range(n)]
    before = {key(c.cell): [s.stamps(key(c.cell)) for s in subs] for c in job.cells}

    def one(i: int, cpus: list[int]) -> None:
        def poll(current):
            if stop.is_set():  # interrupted: launch.wait stops this copy's child
                raise KeyboardInterrupt
            if i == 0 and on_poll:
                on_poll(current)

        inner = Job(
            Group(
                job.group.framework,
                job.group.device,
                job.group.threads,
                job.group.suite,
                part=f"copy{i}",
            ),
            [c.cell for c in job.cells],
            job.settings,
            cpus=cpus,
            env={
                environment.COPY.name: f"{i}/{n}/{wait_s:g}",
                environment.COPY_DIR.name: str(meeting),
            },
        )
        try:
            run_group(inner, subs[i], timeout_s, poll)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors.append(e)

    threads = [
        threading.Thread(target=one, args=(i, cpus), daemon=True)
        for i, cpus in enumerate(job.copies)
    ]
    combined: set[str] = set()

    def finished() -> None:
        # each cell as soon as every copy has it: on disk (and in the progress) at once
        for c in job.cells:
            if c.id not in combined and combine(
                c, job, folder, before[key(c.cell)], failures=False
            ):
                combined.add(c.id)

    for t in threads:
        t.start()
    interrupted = False
    try:
        _join(threads, each=finished)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        _join(threads, swallow=True)  # each copy's child is stopped by its own thread
    finally:
        # Every cell all copies finished is kept, whatever ended the group; a cell left
        # unfinished by an interrupt is not a failure: the same command runs it again.
        for c in job.cells:
            if c.id not in combined:
                combine(c, job, folder, before[key(c.cell)], failures=not (interrupted or errors))
    if interrupted:
        raise KeyboardInterrupt
    if errors:
        raise errors[0]


def _join(threads: list[threading.Thread], each=None, swallow: bool = False) -> None:
    """Wait for every thread, calling each() between waits; swallow: a further Ctrl-C
    while the copies are being stopped does not leave them behind."""
    while any(t.is_alive() for t in threads):
        try:
            for t in threads:
                t.join(0.25)
            if each:
                each()
        except KeyboardInterrupt:
            if not swallow:
                raise


def combine(
    c: CopiesCell, job: Job, folder: RunFolder, before: list, failures: bool = True
) -> bool:
    """The cell's record from its copies' records written by this run (before: each copy's
    stamps from before it), or, when failures, a failure naming the first copy without;
    True when it wrote the record."""
    inner = key(c.cell)
    subs = [_copy_folder(folder, job, i) for i in range(len(job.copies))]
    new = [s.stamps(inner) != old for s, old in zip(subs, before, strict=True)]
    docs = [
        read_json(s.cells / f"{inner}.json") if fresh and s.has_result(inner) else None
        for s, fresh in zip(subs, new, strict=True)
    ]
    if all(docs):
        folder.write_result(key(c), merged_copies(docs, c, job.copies))
        return True
    if not failures:
        return False
    i = next(i for i, d in enumerate(docs) if d is None)
    failure = (subs[i].failure(inner) if new[i] else None) or {}
    status = failure.get("status", "failed")
    reason = failure.get("reason", "no record")
    folder.write_failure(
        key=key(c),
        cell=c.as_dict(),
        status=status if status != "skipped" or not any(docs) else "failed",
        reason=f"copy {i} of {len(docs)} (CPUs {_cpus(job.copies[i])}): {reason}",
        output_tail=failure.get("output_tail", ""),
    )
    return False


def _cpus(cpus: list[int]) -> str:
    return ",".join(map(str, cpus))


def _pooled_stats(pooled: list[float]) -> dict:
    """pytest-benchmark's stats of the copies' rounds pooled, one iteration each."""
    s = Stats()
    for x in pooled:
        s.update(x)
    return {**s.as_dict(), "iterations": 1, "data": pooled}


def _copies_overlap(windows: list) -> float | None:
    """The least share of a copy's window that every copy ran together (None without
    every copy's window)."""
    if not all(isinstance(w, list) and len(w) == 2 and w[1] > w[0] for w in windows):
        return None
    # Every copy runs from the start of its rounds until the last copy has finished
    # (it steps on after its own), so a copy's rounds ran on the whole machine from the
    # moment the last copy started: the least such share over the copies.
    last_start = max(w[0] for w in windows)
    return min(max(0.0, end - max(start, last_start)) / (end - start) for start, end in windows)


def merged_copies(docs: list[dict], c: CopiesCell, cpu_sets: list[list[int]]) -> dict:
    """One pytest-benchmark document for the cell: copy 0's, with the rounds of every copy
    pooled in its stats and the copies' own figures in extra_info."""
    entries = [d["benchmarks"][0] for d in docs]
    out = {**docs[0], "benchmarks": [dict(entries[0])]}
    entry = out["benchmarks"][0]
    rounds = [[float(x) for x in e["stats"]["data"]] for e in entries]
    medians = [statistics.median(r) for r in rounds]
    pooled = sorted(x for r in rounds for x in r)
    entry["stats"] = _pooled_stats(pooled)
    entry["param"] = c.id
    entry["name"] = f"test_{c.task}[{c.id}]"
    infos = [e["extra_info"] for e in entries]
    extra = dict(infos[0])
    for k in ("copy_index", "copy_window_s"):
        extra.pop(k, None)
    median = statistics.median(pooled)
    batch = extra["batch_size"]
    windows = [i.get("copy_window_s") for i in infos]
    overlap = _copies_overlap(windows)
    low, high, level = ci.median_ci(pooled)
    extra.update(
        seconds_per_batch=median,
        samples_per_s=batch / median,
        achieved_tflops=extra["flops_per_step"] / median / 1e12,
        rounds=len(pooled),
        ci_low_s=low,
        ci_high_s=high,
        ci_level=round(level, 4),
        ci_half_width=ci.half_width(pooled),
        ci_target_met=ci.half_width(pooled) <= extra.get("ci_target", ci.TARGET),
        contended=any(i.get("contended") for i in infos),
        thread_shortfall=any(i.get("thread_shortfall") for i in infos),
        threads_used=round(statistics.mean(i.get("threads_used") or 0 for i in infos), 2),
        copies=len(docs),
        copy_cpus=cpu_sets,
        copy_rounds=rounds,
        copy_medians_s=medians,
        copy_windows_s=windows,
        aggregate_samples_per_s=sum(batch / m for m in medians),
        copies_spread=(max(medians) - min(medians)) / statistics.median(medians),
        copies_overlap=overlap,
        copies_together=all(i.get("copies_together") for i in infos),
        energy_method="none",
        energy_reason="not split between copies: each copy's counters see the whole package",
        **dict.fromkeys(ENERGY_FIELDS),
    )
    entry["extra_info"] = extra
    return out
