"""What the report reads from the all-reduce suite's sweeps and derives from them: each
sweep normalised, and the sweeps of one engine and world size merged by message size and
pattern. Plain data, no report import: allreduce/report.py lays it out.

Schema read (a pytest-benchmark entry's extra_info of kind "allreduce", written
"allreduce_sweep" before records were typed): framework, backend, device, world_size, and
"rows": one dict per (pattern, message size) with pattern ("allreduce"|"reduce_broadcast"|
"parameter_server"), bytes, count, status, reason, seconds, algbw_gbps, busbw_gbps,
correct, max_abs_err, device_name; and failure records whose cell is an all-reduce case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xfbench.records import count, failed_cell, number, one_line

# In the order tables and plots show them; a sweep shows those it has (JAX has no
# reduce_broadcast), and patterns not named here after these.
PATTERNS = ("allreduce", "reduce_broadcast", "parameter_server")
PATTERN_TITLES = {
    "allreduce": "all-reduce",
    "reduce_broadcast": "reduce + broadcast",
    "parameter_server": "parameter server",
}


def owns(cell: dict) -> bool:
    """A failed case written before cases carried their kind: a world size, no network."""
    return "world_size" in cell and "network" not in cell


def _row(row: dict, source: str) -> dict:
    seconds = number(row.get("seconds"))
    status = str(row.get("status") or "ok")
    if status == "ok" and (seconds is None or seconds <= 0):
        status = "failed"
    reason = row.get("reason") or f"seconds is {row.get('seconds')!r}, not a positive number"
    return {
        "pattern": str(row.get("pattern") or "allreduce"),
        "bytes": count(row.get("bytes")),
        "count": count(row.get("count")),
        "dtype": str(row.get("dtype") or "fp32"),
        "status": status,
        "reason": "" if status == "ok" else one_line(reason),
        "seconds": seconds if status == "ok" else None,
        "algbw_gbps": number(row.get("algbw_gbps")),
        "busbw_gbps": number(row.get("busbw_gbps")),
        "correct": row.get("correct") if isinstance(row.get("correct"), bool) else None,
        "max_abs_err": number(row.get("max_abs_err")),
        "rounds": count(row.get("rounds")),
        "source": source,
    }


def allreduce_sweep(extra: dict, source: str, status: str = "ok", reason: str = "") -> dict:
    """An all-reduce sweep (or the failure of one) normalised, its rows sorted by size."""
    device = str(extra.get("device") or "cpu")
    rows = [_row(row, source) for row in extra.get("rows") or [] if isinstance(row, dict)]
    rows.sort(key=lambda r: (r["bytes"] is None, r["bytes"] or 0, r["pattern"]))
    first = next((r for r in extra.get("rows") or [] if isinstance(r, dict)), {})
    return {
        "framework": str(extra.get("framework", "?")),
        "backend": str(extra.get("backend") or first.get("backend") or "?"),
        "device": device,
        "device_name": str(extra.get("device_name") or first.get("device_name") or device),
        "world_size": count(extra.get("world_size")) or 0,
        "status": status,
        "reason": one_line(reason) if status != "ok" else "",
        "rows": rows,
        "source": source,
    }


def read_entry(extra: dict, source: str) -> tuple[dict | None, str | None]:
    """One entry's sweep (None: not taken) and the problem with it in one line (None)."""
    status = str(extra.get("status") or "ok")
    if status != "ok":
        return allreduce_sweep(extra, source, status, extra.get("reason")), None
    if not isinstance(extra.get("rows"), list):
        return None, "all-reduce sweep without a 'rows' list"
    return allreduce_sweep(extra, source), None


def read_failure(record: dict, source: str) -> dict:
    cell, status, reason = failed_cell(record)
    return allreduce_sweep({k: v for k, v in cell.items() if k != "rows"}, source, status, reason)


# ------------------------------------------------------------------ the model


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


@dataclass
class Failure:
    number: int  # its footnote, numbered after Table 7's and the scaling suite's
    machine: Any
    text: str


@dataclass
class Allreduce:
    sweeps: list[Sweep]
    failures: list[Failure]


def pattern_title(pattern: str) -> str:
    return PATTERN_TITLES.get(pattern, pattern)


def patterns_of(sweeps) -> list[str]:
    """The patterns these sweeps measured, in PATTERNS order, unknown ones after."""
    have = {p for s in sweeps for rows in s.rows.values() for p in rows}
    return [p for p in PATTERNS if p in have] + sorted(have - set(PATTERNS))


def _merged(machines: list, records: Callable[[Any], list[dict]]):
    """The sweeps by (machine index, framework, backend, device, world size), and the
    failures of those that left no rows to say what went wrong: (sweep key, text)."""
    sweeps: dict[tuple, Sweep] = {}
    crashed: list[tuple[tuple, str]] = []
    for mi, m in enumerate(machines):
        for s in records(m):
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
    return sweeps, crashed


def build(
    machines: list, records: Callable[[Any], list[dict]], note: Callable[[], int]
) -> Allreduce:
    """Every machine's sweeps (records(machine)) merged, their failed or wrong rows and
    then the sweeps that crashed numbered by note()."""
    sweeps, crashed = _merged(machines, records)
    failures: list[Failure] = []

    def fail(machine, text: str) -> int:
        failures.append(Failure(note(), machine, text))
        return failures[-1].number

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
    return Allreduce(ordered, failures)
