"""The terminal table of a GEMM run: TFLOP/s per implementation, dtype, device and threads."""

from __future__ import annotations

from tabulate import tabulate

from xfbench.harness.threads import legend, marks

COLUMNS = (
    "impl",
    "shape (m x n x k)",
    "dtype",
    "device",
    "threads",
    "TFLOP/s",
    "% peak",
    "% best",
    "threads used",
    "rel. error",
    "timer",
)


def _pct(x) -> str:
    return "" if x is None else f"{100 * x:.1f}"


def _row(r: dict) -> list:
    base = [r["impl"], f"{r['m']}x{r['n']}x{r['k']}", r["dtype"], r["device"], r["threads"]]
    if r.get("status") != "ok":
        return base + [f"failed: {r.get('reason', '')}"[:60]] + [""] * 5
    return base + [
        f"{r['tflops']:.4g}{marks(r)}",
        _pct(r.get("peak_share")),
        _pct(r.get("share_of_best")),
        f"{r['threads_used']:.2f}",
        f"{r['check_error']:.1e}",
        r["timer"],
    ]


def gemm_table(records: list[dict]) -> str:
    rows = [_row(r) for r in records]
    table = tabulate(rows, headers=COLUMNS, tablefmt="github", disable_numparse=True)
    return "\n".join([table] + legend(records))
