"""Data-parallel scaling and all-reduce results: what the report reads from them and
what it derives (speedup and efficiency over one worker, bus bandwidth per size).

Schemas read (pytest-benchmark entries, by extra_info["kind"]):
  - "scaling": one data-parallel cell: network, framework, device, workers,
    scaling ("strong"|"weak"), batch (strong: global, weak: per worker), global_batch,
    per_worker_batch, threads_per_worker, precision, scale, status, seconds_per_batch
    (the median step; stats.median is what is used), samples_per_s, speedup, efficiency,
    speedup_baseline, backend, comm_share, comm_share_how, compile_s, rounds,
    replicas_agree, replicas_max_diff, threads_used, device_name.
  - "allreduce" (written as "allreduce_sweep" before records were typed): framework, backend, device, world_size, and "rows": one dict per
    (pattern, message size) with pattern ("allreduce"|"reduce_broadcast"|
    "parameter_server"), bytes, count,
    status, reason, seconds, algbw_gbps, busbw_gbps, correct, max_abs_err, device_name.
  - failure records ({"cell": {...}, "status", "reason"}) whose cell is one of these
    (cell "kind", or the fields that only these cells have).
None of them is a Table 7 cell: they never reach report.load.Run.results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from xfbench import records

KINDS = ("scaling", "allreduce")
# In the order tables and plots show them; a sweep shows those it has (JAX has no
# reduce_broadcast), and patterns not named here after these.
PATTERNS = ("allreduce", "reduce_broadcast", "parameter_server")
PATTERN_TITLES = {
    "allreduce": "all-reduce",
    "reduce_broadcast": "reduce + broadcast",
    "parameter_server": "parameter server",
}
SCALING_KINDS = ("strong", "weak")


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _count(value) -> int | None:
    number = _number(value)
    return (
        int(number)
        if number is not None and number >= 0 and number == int(number) and number < 2**62
        else None
    )


def _one_line(text) -> str:
    return " ".join(str(text or "no reason recorded").split())


# ------------------------------------------------------------------ reading


def suite_kind(cell: dict) -> str | None:
    """ "scaling" or "allreduce" when a failure record's cell is one of those suites'
    cells, else None (a Table 7 cell)."""
    kind = records.ALIASES.get(cell.get("kind"), cell.get("kind"))
    if kind in KINDS:
        return kind
    if "world_size" in cell and "network" not in cell:
        return "allreduce"
    if "workers" in cell and "scaling" in cell:
        return "scaling"
    return None


def scaling_record(extra: dict, median: float | None, source: str) -> dict:
    """A scaling entry (or failure) normalised; median is stats.median (None for a failure)."""
    workers = _count(extra.get("workers")) or 0
    batch = _count(extra.get("batch"))
    kind = str(extra.get("scaling") or "strong")
    global_batch = _count(extra.get("global_batch"))
    per_worker = _count(extra.get("per_worker_batch"))
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
        "threads_per_worker": _count(extra.get("threads_per_worker")) if device == "cpu" else None,
        "precision": str(extra.get("precision") or "fp32"),
        "scale": str(extra.get("scale") or "full"),
        "status": status if ok or status != "ok" else "failed",
        "reason": "" if ok else _one_line(extra.get("reason")),
        "seconds": median if ok else None,
        "samples_per_s": global_batch / median if ok and global_batch else None,
        "speedup": _number(extra.get("speedup")),
        "efficiency": _number(extra.get("efficiency")),
        "speedup_baseline": extra.get("speedup_baseline"),
        "backend": str(extra.get("backend") or ""),
        "comm_share": _number(extra.get("comm_share")),
        "comm_share_how": str(extra.get("comm_share_how") or ""),
        "compile_s": _number(extra.get("compile_s")),
        "rounds": _count(extra.get("rounds")),
        "replicas_agree": extra.get("replicas_agree"),
        "replicas_max_diff": _number(extra.get("replicas_max_diff")),
        "threads_used": _number(extra.get("threads_used")),
        "quoted_seconds": _number(extra.get("seconds_per_batch")),
        "source": source,
    }


def allreduce_sweep(extra: dict, source: str, status: str = "ok", reason: str = "") -> dict:
    """An all-reduce sweep (or the failure of one) normalised, its rows sorted by size."""
    device = str(extra.get("device") or "cpu")
    rows = []
    for row in extra.get("rows") or []:
        if not isinstance(row, dict):
            continue
        seconds = _number(row.get("seconds"))
        row_status = str(row.get("status") or "ok")
        if row_status == "ok" and (seconds is None or seconds <= 0):
            row_status = "failed"
        rows.append(
            {
                "pattern": str(row.get("pattern") or "allreduce"),
                "bytes": _count(row.get("bytes")),
                "count": _count(row.get("count")),
                "dtype": str(row.get("dtype") or "fp32"),
                "status": row_status,
                "reason": ""
                if row_status == "ok"
                else _one_line(
                    row.get("reason")
                    or (f"seconds is {row.get('seconds')!r}, not a positive number")
                ),
                "seconds": seconds if row_status == "ok" else None,
                "algbw_gbps": _number(row.get("algbw_gbps")),
                "busbw_gbps": _number(row.get("busbw_gbps")),
                "correct": row.get("correct") if isinstance(row.get("correct"), bool) else None,
                "max_abs_err": _number(row.get("max_abs_err")),
                "rounds": _count(row.get("rounds")),
                "source": source,
            }
        )
    rows.sort(key=lambda r: (r["bytes"] is None, r["bytes"] or 0, r["pattern"]))
    first = next((r for r in extra.get("rows") or [] if isinstance(r, dict)), {})
    return {
        "framework": str(extra.get("framework", "?")),
        "backend": str(extra.get("backend") or first.get("backend") or "?"),
        "device": device,
        "device_name": str(extra.get("device_name") or first.get("device_name") or device),
        "world_size": _count(extra.get("world_size")) or 0,
        "status": status,
        "reason": _one_line(reason) if status != "ok" else "",
        "rows": rows,
        "source": source,
    }


def read_entry(
    run, extra: dict, median: float | None, error: str | None, source: str
) -> tuple[bool, str | None]:
    """Add one "scaling" or "allreduce" entry to run.scaling / run.allreduce:
    (whether it was taken, the problem with it in one line or None)."""
    status = str(extra.get("status") or "ok")
    if records.ALIASES.get(extra.get("kind"), extra.get("kind")) == "allreduce":
        if status != "ok":
            run.allreduce.append(allreduce_sweep(extra, source, status, extra.get("reason")))
            return True, None
        if not isinstance(extra.get("rows"), list):
            return False, "all-reduce sweep without a 'rows' list"
        run.allreduce.append(allreduce_sweep(extra, source))
        return True, None
    if status != "ok":
        run.scaling.append(scaling_record(extra, None, source))
        return True, None
    if median is None:
        return False, error or "no stats.median"
    if not _count(extra.get("workers")):
        return False, "scaling entry without a positive 'workers'"
    record = scaling_record(extra, median, source)
    run.scaling.append(record)
    quoted = record["quoted_seconds"]
    if quoted is not None and not math.isclose(quoted, median, rel_tol=1e-9):
        return True, (
            f"extra_info.seconds_per_batch {quoted!r} differs from stats.median "
            f"{median!r}; the median is used"
        )
    return True, None


def read_failure(run, record: dict, source: str) -> bool:
    """A failure record of a scaling or all-reduce cell goes to run.scaling /
    run.allreduce (True); any other is left to the caller (False)."""
    cell = record.get("cell") if isinstance(record.get("cell"), dict) else record
    kind = suite_kind(cell)
    if kind is None:
        return False
    status = str(record.get("status") or "failed")
    status = "failed" if status == "ok" else status
    if kind == "scaling":
        run.scaling.append(
            scaling_record({**cell, "status": status, "reason": record.get("reason")}, None, source)
        )
    else:
        run.allreduce.append(
            allreduce_sweep(
                {k: v for k, v in cell.items() if k != "rows"}, source, status, record.get("reason")
            )
        )
    return True


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
class Sweep:
    """All-reduce results of one (machine, framework, backend, device, world size)."""

    machine: Any
    framework: str
    backend: str
    device: str
    device_name: str
    world_size: int
    rows: dict[int, dict[str, dict]] = field(default_factory=dict)  # bytes -> pattern -> row
    footnotes: dict[tuple[int, str], int] = field(default_factory=dict)


def pattern_title(pattern: str) -> str:
    return PATTERN_TITLES.get(pattern, pattern)


def patterns_of(sweeps) -> list[str]:
    """The patterns these sweeps measured, in PATTERNS order, unknown ones after."""
    have = {p for s in sweeps for rows in s.rows.values() for p in rows}
    return [p for p in PATTERNS if p in have] + sorted(have - set(PATTERNS))


@dataclass
class Failure:
    number: int
    machine: Any
    text: str


@dataclass
class ScalingReport:
    tables: list[ScalingTable]
    sweeps: list[Sweep]
    failures: list[Failure]  # numbered after Table 7's footnotes

    def __bool__(self) -> bool:
        return bool(self.tables or self.sweeps or self.failures)


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


def build(machines: list, first_footnote: int, problems: list[str]) -> ScalingReport:
    """Scaling tables (one per strong/weak), all-reduce sweeps and the failures of both,
    from the runs of each machine; repeated cells are noted in problems. Failures are
    numbered from first_footnote in reading order."""
    rows: dict[tuple, ScalingRow] = {}
    sweeps: dict[tuple, Sweep] = {}
    crashed: list[tuple[tuple, str]] = []  # sweeps that left no rows: (sweep key, text)
    scaling = [(mi, m, r) for mi, m in enumerate(machines) for run in m.runs for r in run.scaling]
    # timed cells first: a failure record that does not know its threads per worker (the
    # runner's, for a crash) then joins the row of the cells it belongs with
    for mi, m, r in sorted(scaling, key=lambda x: x[2]["seconds"] is None):
        _add_point(rows=rows, mi=mi, machine=m, r=r, problems=problems)
    for mi, m in enumerate(machines):
        for run in m.runs:
            for s in run.allreduce:
                key = (mi, s["framework"], s["backend"], s["device"], s["world_size"])
                sweep = sweeps.get(key)
                if sweep is None:
                    sweep = sweeps[key] = Sweep(
                        machine=m,
                        framework=s["framework"],
                        backend=s["backend"],
                        device=s["device"],
                        device_name=s["device_name"],
                        world_size=s["world_size"],
                    )
                explained = any(r["status"] != "ok" or r["correct"] is False for r in s["rows"])
                if s["status"] != "ok" and not explained:  # else its rows say what went wrong
                    crashed.append(
                        (
                            key,
                            f"all-reduce {s['framework']} on {s['device']}, world "
                            f"size {s['world_size']}: {s['status']}: {s['reason']}",
                        )
                    )
                for row in s["rows"]:
                    if row["bytes"] is not None:
                        sweep.rows.setdefault(row["bytes"], {})[row["pattern"]] = row

    failures: list[Failure] = []

    def fail(machine, text: str) -> int:
        failures.append(Failure(first_footnote + len(failures), machine, text))
        return failures[-1].number

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
                    p.footnote = fail(row.machine, _describe_failure(p.record))
                else:
                    _speedup(p, workers, one)
    ordered = [sweeps[k] for k in sorted(sweeps)]
    for sweep in ordered:
        for size in sorted(sweep.rows):
            for pattern, row in sorted(sweep.rows[size].items()):
                if row["status"] != "ok" or row["correct"] is False:
                    status = row["status"] if row["status"] != "ok" else "incorrect"
                    what = (
                        row["reason"]
                        if row["status"] != "ok"
                        else f"wrong result (max abs err {row['max_abs_err']})"
                    )
                    sweep.footnotes[(size, pattern)] = fail(
                        sweep.machine,
                        f"all-reduce {sweep.framework} {sweep.backend} world size "
                        f"{sweep.world_size}, {pattern_title(pattern)} "
                        f"of {size} bytes: {status}: {what}",
                    )
    for key, text in crashed:
        fail(sweeps[key].machine, text)
    return ScalingReport(tables, ordered, failures)


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
