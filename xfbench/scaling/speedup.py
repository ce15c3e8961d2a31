"""Speedup and efficiency over one worker, filled once every cell of a session is in.

Strong scaling (global batch fixed): speedup = t(1 worker, same global batch) / t(N).
Weak scaling (per-worker batch fixed): speedup = samples/s(N) / samples/s(1 worker, same
per-worker batch). Efficiency = speedup / N: 1.0 is perfect scaling. The baseline is the
one-worker cell of the same network, framework, device, precision, size and threads per
worker, so each of the N workers has what the one worker had.
"""

from __future__ import annotations

from collections.abc import Iterable

from tabulate import tabulate


def _key(r: dict) -> tuple:
    batch = r.get("global_batch") if r.get("scaling") == "strong" else r.get("per_worker_batch")
    return (
        r.get("network"),
        r.get("framework"),
        r.get("device"),
        r.get("precision"),
        r.get("scale"),
        r.get("scaling"),
        r.get("threads_per_worker"),
        batch,
    )


def fill_speedup(records: Iterable[dict]) -> None:
    """Set speedup, efficiency and speedup_baseline on every scaling record, in place
    (None where no successful one-worker cell was measured alongside)."""
    records = [r for r in records if r.get("kind") == "scaling"]
    base = {_key(r): r for r in records if r.get("status") == "ok" and r.get("workers") == 1}
    for r in records:
        one = base.get(_key(r))
        speedup = None
        if one is not None and r.get("status") == "ok":
            if r["scaling"] == "strong":
                speedup = one["seconds_per_batch"] / r["seconds_per_batch"]
            else:
                speedup = r["samples_per_s"] / one["samples_per_s"]
        r["speedup"] = speedup
        r["efficiency"] = speedup / r["workers"] if speedup is not None else None
        r["speedup_baseline"] = (
            one.get("cell_id") if one is not None and speedup is not None else None
        )


COLUMNS = (
    "network",
    "framework",
    "device",
    "scaling",
    "workers",
    "threads/worker",
    "global batch",
    "s/step",
    "samples/s",
    "speedup",
    "efficiency",
    "comm share",
    "backend",
    "replicas",
)


def _num(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def scaling_table(records: list[dict]) -> str:
    rows = []
    for r in sorted(
        records,
        key=lambda r: (r["network"], r["framework"], r["device"], r["scaling"], r["workers"]),
    ):
        base = [
            r["network"],
            r["framework"],
            r["device"],
            r["scaling"],
            r["workers"],
            r["threads_per_worker"],
            r.get("global_batch", ""),
        ]
        if r.get("status") != "ok":
            rows.append(
                base + [f"{r.get('status', 'failed')}: {r.get('reason', '')}"[:70]] + [""] * 6
            )
            continue
        rows.append(
            base
            + [
                f"{r['seconds_per_batch']:.4g}",
                f"{r['samples_per_s']:.4g}",
                _num(r.get("speedup"), ".2f"),
                _num(r.get("efficiency"), ".0%"),
                _num(r.get("comm_share"), ".0%"),
                r.get("backend", ""),
                "agree" if r.get("replicas_agree") else "DISAGREE",
            ]
        )
    return tabulate(rows, headers=COLUMNS, tablefmt="github", disable_numparse=True)
