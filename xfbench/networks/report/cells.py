"""The network suite's cells, timed or failed, read as the Results Table 7 is built from
(report/model.py derives its blocks, rows and columns).

A cell's seconds per mini-batch is its entry's stats.median, pytest-benchmark's; the
record's own `seconds_per_batch` is only checked against it.
"""

from __future__ import annotations

import math

from xfbench.report.api import Entry, cell_result, failure_result, round_times

# A cell written before cells carried their task: a training cell, Table 7's first task.
OLDEST_TASK = "train"
# Its record kinds, one per task (its plugin declares them).
KINDS = ("train", "infer")


def cells_of(run) -> list:
    """Its cells among a run's records, timed or failed, in the order read."""
    return run.of(*KINDS)


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
