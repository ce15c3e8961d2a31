"""The network suite's cells, timed or failed, read as the Results Table 7 is built from
(report/model.py derives its blocks, rows and columns).

A cell's seconds per mini-batch is its entry's stats.median, pytest-benchmark's; the
record's own `seconds_per_batch` is only checked against it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xfbench.networks.report.keys import (
    BlockKey,
    ColKey,
    RowKey,
    block_key,
    col_key,
    col_label,
    row_key,
    row_label,
)
from xfbench.report.api import Entry, Machine, Result, Run, cell_result, failure_result, round_times

# A cell written before cells carried their task: a training cell, Table 7's first task.
OLDEST_TASK = "train"
# Its record kinds, one per task (its plugin declares them).
KINDS = ("train", "infer")


def cells_of(run) -> list:
    """Its cells among a run's records, timed or failed, in the order read."""
    return run.of(*KINDS)


@dataclass
class MachineCells:
    """A machine's cells as Table 7 reads them, from its records (report.model.Machine)."""

    # each timed cell by its place: the fastest where it was measured more than once
    results: dict[tuple[BlockKey, RowKey, ColKey], Result] = field(default_factory=dict)
    failures: list[Result] = field(default_factory=list)
    # cells run as several copies at once (--copies), ok or failed: not Table 7's cells
    copies: list[Result] = field(default_factory=list)
    equivalence: list[dict] = field(default_factory=list)  # its runs' equivalence checks
    notes: list[str] = field(default_factory=list)  # on cells measured twice in one run


def machine_cells(m: Machine) -> MachineCells:
    """Its cells of every run, in the order read (cheap enough to build where read)."""
    out = MachineCells()
    for run in m.runs:
        cells = cells_of(run)
        _name_failed_devices(run, cells)
        out.equivalence += run.of("equivalence")
        for r in cells:
            if r.copies > 1:
                out.copies.append(r)
            elif not r.ok:
                out.failures.append(r)
            else:
                _keep_fastest(out, r, run.name)
    return out


def timed_cells(m: Machine) -> list[Result]:
    """Its timed cells, one per place (its Table7.cells: the roofline's points, the
    machines table's energy and rounds)."""
    return list(machine_cells(m).results.values())


def _keep_fastest(out: MachineCells, r: Result, run_name: str) -> None:
    key = (block_key(r), row_key(r), col_key(r))
    if key in out.results:
        # two devices of the same name, or a repeated cell: keep the faster
        out.notes.append(
            f"{r.source}: {r.network} {row_label(row_key(r))} {col_label(col_key(r))} "
            f"measured more than once in {run_name}; the fastest is shown"
        )
        if r.median >= out.results[key].median:
            return
    out.results[key] = r


def _name_failed_devices(run: Run, cells: list[Result]) -> None:
    """A failure record carries the cell's device ("cuda:0") but not the device's name,
    which only a cell that ran reports: take it from the run's timed cells on that
    device, else from the machine's GPU list, so the failure lands in its column."""
    names = {r.device: r.device_name for r in cells if r.ok and r.accelerator}
    for i, gpu in enumerate(run.machine.get("gpus") or []):
        for prefix in ("cuda", "gpu"):
            names.setdefault(f"{prefix}:{i}", gpu)
    for r in cells:
        if not r.ok and r.accelerator and r.device_name == r.device:
            r.device_name = names.get(r.device, r.device)


def read(entry: Entry):
    """One train or infer entry as its Result (a failed cell's, or the timed one's), and
    what was wrong with it in one line."""
    extra = entry.extra
    if "network" not in extra or "framework" not in extra:
        return None, "not an xfbench cell (no network/framework)"
    if str(extra.get("status", "ok")) != "ok":
        return failure_result(extra, entry.source, task=OLDEST_TASK), None
    median, problem = entry.median()
    if median is None:
        return None, problem
    result = cell_result(extra, "ok", entry.source, task=OLDEST_TASK)
    result.median, result.info, result.rounds = median, extra, entry.rounds()
    copies = extra.get("copy_rounds")
    if isinstance(copies, list) and len(copies) > 1:
        result.copy_rounds = [round_times(c) or [median] for c in copies]
        result.copies = len(result.copy_rounds)
    quoted = extra.get("seconds_per_batch")
    if isinstance(quoted, (int, float)) and not math.isclose(quoted, median, rel_tol=1e-9):
        return result, (
            f"extra_info.seconds_per_batch {quoted!r} differs from stats.median {median!r}; "
            "the median is used"
        )
    return result, None


def read_failure(record: dict, source: str):
    return failure_result(record, source, task=OLDEST_TASK)
