"""The toy suite's part of the report: one table, one plot, one CSV file, and its sums as
a scored workload (`xfbench compare`)."""

from __future__ import annotations

from pathlib import Path

from toy_suite.plugin import KIND
from xfbench.report.api import Hooks, Part, Report, Table, Text, scored_failure, scored_result

SCORED_TASK = "toy-sum"
COLUMNS = ["machine", "size", "status", "seconds"]


def _rows(report: Report) -> list[tuple]:
    return [(m, r) for m in report.machines for r in m.of(KIND)]


def sections(report: Report, plots: list[tuple[str, Path]]) -> list[Part]:
    found = _rows(report)
    if not found:
        return []
    rows = [
        [Text(m.label), Text(str(r["size"])), Text(f"{r.get('seconds', '')}")] for m, r in found
    ]
    table = Table(title="Toy sums", headers=["machine", "size", "seconds"], rows=rows, anchor="toy")
    return [Part(title="Toy suite", tables=[table], plots=plots)]


def plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    from xfbench.report.api import SIZE, plt, save_figure

    found = [r for _, r in _rows(report) if r.get("status", "ok") == "ok"]
    if not found:
        return []
    fig, ax = plt.subplots(figsize=SIZE)
    ax.bar([str(r["size"]) for r in found], [r["seconds"] for r in found])
    return [("Toy sums: seconds by size", save_figure(fig, folder / "toy.png"))]


def csv_files(report: Report) -> list[tuple[str, list[str], list[dict]]]:
    rows = [{**{k: r.get(k) for k in COLUMNS}, "machine": m.label} for m, r in _rows(report)]
    return [("report-toy.csv", COLUMNS, rows)]


def scored(run) -> list:
    return [
        scored_result(r, task=SCORED_TASK, batch=r["size"], median=r["seconds"],
                      rounds=r.get("timed_rounds_s") or [])
        if r.get("status", "ok") == "ok"
        else scored_failure(r, task=SCORED_TASK)
        for r in run.of(KIND)
    ]  # fmt: skip


# Its part of the report (xfbench/report/suites.py says what each hook is).
REPORT = Hooks(
    sections={"suites": sections},
    plots=plots,
    csv_files=csv_files,
    scored=scored,
)
