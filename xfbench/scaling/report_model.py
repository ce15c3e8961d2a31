"""What the report reads from the scaling suite's results and derives from them: each cell
normalised, rows of points by worker count, and speedup and efficiency over one worker.
Plain data, no report import: scaling/report.py lays it out.

Schema read (a pytest-benchmark entry's extra_info of kind "scaling"): network, framework,
device, workers, scaling ("strong"|"weak"), batch (strong: global, weak: per worker),
global_batch, per_worker_batch, threads_per_worker, precision, scale, status,
seconds_per_batch (the median step; stats.median is what is used), samples_per_s, speedup,
efficiency, speedup_baseline, backend, comm_share, comm_share_how, compile_s, rounds,
replicas_agree, replicas_max_diff, threads_used, device_name; and failure records whose
cell is a scaling cell. None of them is a Table 7 cell.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xfbench.records import count, failed_cell, number, one_line

SCALING_KINDS = ("strong", "weak")


def owns(cell: dict) -> bool:
    """A failed cell written before cells carried their kind: the fields only a scaling
    cell has."""
    return "workers" in cell and "scaling" in cell


def scaling_record(extra: dict, median: float | None, source: str) -> dict:
    """A scaling entry (or failure) normalised; median is stats.median (None for a failure)."""
    workers = count(extra.get("workers")) or 0
    batch = count(extra.get("batch"))
    kind = str(extra.get("scaling") or "strong")
    global_batch = count(extra.get("global_batch"))
    per_worker = count(extra.get("per_worker_batch"))
    if global_batch is None and batch is not None and workers:
        global_batch = batch if kind == "strong" else batch * workers
    if per_worker is None and batch is not None and workers:
        per_worker = batch // workers if kind == "strong" else batch
    if batch is None:
        batch = global_batch if kind == "strong" else per_worker
    status = str(extra.get("status") or "ok")
    ok = status == "ok" and median is not None
    device = str(extra.get("device") or "cpu")
    return {
        "network": str(extra.get("network", "?")),
        "framework": str(extra.get("framework", "?")),
        "device": device,
        "device_name": str(extra.get("device_name") or device),
        "workers": workers,
        "scaling": kind,
        "batch": batch,
        "global_batch": global_batch,
        "per_worker_batch": per_worker,
        "threads_per_worker": count(extra.get("threads_per_worker")) if device == "cpu" else None,
        "precision": str(extra.get("precision") or "fp32"),
        "scale": str(extra.get("scale") or "full"),
        "status": status if ok or status != "ok" else "failed",
        "reason": "" if ok else one_line(extra.get("reason")),
        "seconds": median if ok else None,
        "samples_per_s": global_batch / median if ok and global_batch else None,
        "speedup": number(extra.get("speedup")),
        "efficiency": number(extra.get("efficiency")),
        "speedup_baseline": extra.get("speedup_baseline"),
        "backend": str(extra.get("backend") or ""),
        "comm_share": number(extra.get("comm_share")),
        "comm_share_how": str(extra.get("comm_share_how") or ""),
        "compile_s": number(extra.get("compile_s")),
        "rounds": count(extra.get("rounds")),
        "replicas_agree": extra.get("replicas_agree"),
        "replicas_max_diff": number(extra.get("replicas_max_diff")),
        "threads_used": number(extra.get("threads_used")),
        "quoted_seconds": number(extra.get("seconds_per_batch")),
        "source": source,
    }


def read_entry(
    extra: dict, median: float | None, error: str | None, source: str
) -> tuple[dict | None, str | None]:
    """One entry's record (None: not taken) and the problem with it in one line (None)."""
    if str(extra.get("status") or "ok") != "ok":
        return scaling_record(extra, None, source), None
    if median is None:
        return None, error or "no stats.median"
    if not count(extra.get("workers")):
        return None, "scaling entry without a positive 'workers'"
    record = scaling_record(extra, median, source)
    quoted = record["quoted_seconds"]
    if quoted is not None and not math.isclose(quoted, median, rel_tol=1e-9):
        return record, (
            f"extra_info.seconds_per_batch {quoted!r} differs from stats.median "
            f"{median!r}; the median is used"
        )
    return record, None


def read_failure(record: dict, source: str) -> dict:
    cell, status, reason = failed_cell(record)
    return scaling_record({**cell, "status": status, "reason": reason}, None, source)


# ------------------------------------------------------------------ the model


@dataclass
class Point:
    """One scaling cell in its row, with the speedup used (the record's, or computed here)."""

    record: dict
    speedup: float | None = None
    efficiency: float | None = None
    computed: bool = False  # speedup computed by the report from the 1-worker cell
    footnote: int | None = None  # failed cells


@dataclass
class ScalingRow:
    machine: Any  # report.model.Machine
    network: str
    framework: str
    device: str
    device_name: str
    precision: str
    scale: str
    batch: int | None
    threads_per_worker: int | None
    points: dict[int, Point] = field(default_factory=dict)  # workers -> point

    @property
    def backend(self) -> str:
        """The most workers' backend: the one whose communication the row measures (the
        one-worker cell's names one device, e.g. "XLA all-reduce over 1 host device")."""
        names = [p.record["backend"] for _, p in sorted(self.points.items()) if p.record["backend"]]
        return names[-1] if names else ""


@dataclass
class ScalingTable:
    kind: str  # "strong" | "weak"
    workers: list[int]
    rows: list[ScalingRow]

    @property
    def comm(self) -> bool:
        return any(p.record["comm_share"] is not None for r in self.rows for p in r.points.values())


@dataclass
class Failure:
    number: int  # its footnote, numbered after Table 7's
    machine: Any
    text: str


@dataclass
class Scaling:
    tables: list[ScalingTable]
    failures: list[Failure]


def speedup_over(record: dict, one: dict | None) -> float | None:
    """Strong scaling: t(1 worker) / t(N) at the same global batch; weak: samples/s(N) /
    samples/s(1 worker) at the same per-worker batch. None without a timed 1-worker cell."""
    if one is None or one["seconds"] is None or record["seconds"] is None:
        return None
    if record["scaling"] == "strong":
        return one["seconds"] / record["seconds"]
    if record["samples_per_s"] and one["samples_per_s"]:
        return record["samples_per_s"] / one["samples_per_s"]
    return None


def _row_key(machine_index: int, r: dict) -> tuple:
    return (
        machine_index,
        r["scaling"],
        r["network"],
        r["scale"],
        r["framework"],
        r["device"],
        r["precision"],
        r["batch"] or 0,
        r["threads_per_worker"] or 0,
    )


def _describe_failure(r: dict) -> str:
    batch = (
        f"global batch {r['batch']}"
        if r["scaling"] == "strong"
        else f"batch {r['batch']} per worker"
    )
    return (
        f"scaling {r['network']} {r['framework']} on {r['device']}, {r['workers']} "
        f"worker{'s' if r['workers'] != 1 else ''}, {r['scaling']}, {batch}: "
        f"{r['status']}: {r['reason']}"
    )


def build(
    machines: list, records: Callable[[Any], list[dict]], note: Callable[[], int], problems: list
) -> Scaling:
    """A table per scaling kind (strong, weak) of every machine's cells (records(machine)),
    their failures numbered by note() in the tables' order; repeated cells go to problems."""
    rows: dict[tuple, ScalingRow] = {}
    found = [(mi, m, r) for mi, m in enumerate(machines) for r in records(m)]
    # timed cells first: a failure record that does not know its threads per worker (the
    # runner's, for a crash) then joins the row of the cells it belongs with
    for mi, m, r in sorted(found, key=lambda x: x[2]["seconds"] is None):
        _add_point(rows=rows, mi=mi, machine=m, r=r, problems=problems)
    failures: list[Failure] = []
    tables = []
    kinds = SCALING_KINDS + tuple(sorted({k[1] for k in rows} - set(SCALING_KINDS)))
    for kind in kinds:
        mine = [row for key, row in sorted(rows.items(), key=lambda kv: kv[0]) if key[1] == kind]
        if not mine:
            continue
        tables.append(ScalingTable(kind, sorted({w for row in mine for w in row.points}), mine))
        for row in mine:
            one = row.points.get(1)
            for workers, p in sorted(row.points.items()):
                if p.record["seconds"] is None:
                    p.footnote = note()
                    failures.append(Failure(p.footnote, row.machine, _describe_failure(p.record)))
                else:
                    _speedup(p, workers, one)
    return Scaling(tables, failures)


def _add_point(rows: dict, mi: int, machine, r: dict, problems: list[str]) -> None:
    key = _row_key(mi, r)
    if r["threads_per_worker"] is None and key not in rows:
        key = next((k for k in rows if k[:-1] == key[:-1]), key)
    row = rows.get(key)
    if row is None:
        row = rows[key] = ScalingRow(
            machine=machine,
            network=r["network"],
            framework=r["framework"],
            device=r["device"],
            device_name=r["device_name"],
            precision=r["precision"],
            scale=r["scale"],
            batch=r["batch"],
            threads_per_worker=r["threads_per_worker"],
        )
    if r["seconds"] is not None and row.device_name == row.device:
        row.device_name = r["device_name"]
    old = row.points.get(r["workers"])
    if old is not None and old.record["seconds"] is not None:
        if r["seconds"] is None:
            return  # a failure of a cell also measured: the number stands
        problems.append(
            f"{r['source']}: scaling {r['network']} {r['framework']} {r['workers']} "
            f"workers {r['scaling']} measured more than once; the fastest is shown"
        )
        if r["seconds"] >= old.record["seconds"]:
            return
    row.points[r["workers"]] = Point(r)


def _speedup(p: Point, workers: int, one: Point | None) -> None:
    """The record's speedup when the suite filled it in, else computed here from the row's
    1-worker cell; efficiency = speedup / workers."""
    r = p.record
    if r["speedup"] is not None:
        p.speedup = r["speedup"]
    elif workers == 1:
        p.speedup, p.computed = 1.0, True
    else:
        p.speedup = speedup_over(r, one.record if one else None)
        p.computed = p.speedup is not None
    if r["efficiency"] is not None and r["speedup"] is not None:
        p.efficiency = r["efficiency"]
    elif p.speedup is not None and workers > 0:
        p.efficiency = p.speedup / workers
