"""The terminal table of a run: one row per cell."""

from __future__ import annotations

from tabulate import tabulate

from xfbench.harness.threads import legend, marks

COLUMNS = (
    "task",
    "network",
    "framework",
    "mode",
    "precision",
    "device",
    "threads",
    "batch",
    "s/batch",
    "samples/s",
    "GFLOP/s",
    "compile s",
    "threads used",
    "peak RSS MB",
)


def _row(r: dict) -> list:
    base = [
        r["task"],
        r["network"],
        r["framework"],
        r["mode"],
        r["precision"],
        r["device"],
        r["threads"],
        r["batch_size"],
    ]
    if r.get("status") != "ok":
        return base + [f"{r.get('status') or 'failed'}: {r.get('reason', '')}"[:60]] + [""] * 5
    return base + [
        f"{r['seconds_per_batch']:.4g}{marks(r)}",
        f"{r['samples_per_s']:.4g}",
        f"{r['achieved_tflops'] * 1e3:.4g}",
        f"{r['compile_s']:.3g}",
        f"{r['threads_used']:.2f}",
        f"{r['peak_host_rss_bytes'] / 2**20:.0f}",
    ]


def cell_table(records: list[dict]) -> str:
    rows = [_row(r) for r in records]
    table = tabulate(rows, headers=COLUMNS, tablefmt="github", disable_numparse=True)
    return "\n".join([table] + legend(records))
