"""report.csv and the suites' CSV files beside it, for spreadsheets. report.csv holds the
cells of Table 7, as the suite whose records they are lays them out (its Hooks.table7's `csv`:
one row per cell at full precision); the other suites with a report of their own
(report/suites.py) write theirs beside it, with columns of their own."""

from __future__ import annotations

import csv
from pathlib import Path

from xfbench.report.files import replacing
from xfbench.report.model import Report


def _write(path: Path, columns, rows: list[dict]) -> Path:
    with replacing(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_suites(report: Report, folder: Path) -> list[Path]:
    """Each suite's own CSV files (report/suites.py), each only when there are such results
    (an earlier render's file that no longer applies is removed)."""
    from xfbench.report import suites

    written = []
    files = []
    for suite in suites.declared():
        files += (suite.hooks.csv_files or (lambda report: []))(report)
    for name, columns, rows in files:
        path = folder / name
        if rows:
            written.append(_write(path, columns, rows))
        else:
            path.unlink(missing_ok=True)
    return written


def write(report: Report, path: Path) -> Path:
    """report.csv, written whatever it holds: its header alone where no cell was read (an
    empty file where no suite declares its layout)."""
    from xfbench.report import suites

    cells = suites.cells_suite()
    table7 = cells.hooks.table7 if cells else None
    columns, rows = table7.csv(report) if table7 else ((), [])
    return _write(path, columns, rows)
