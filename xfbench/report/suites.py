"""The suites that bring their own part of the report: each declares (plugin.Suite) the
record kind its cells write and its report module, `xfbench/<suite>/report.py`, which sits
in the report's layer and may give:

- `sections(report, plots) -> list[Part]`: its section(s), after Table 7's (report.sections),
  given the plots it drew;
- `plots(report, folder) -> list[(caption, path)]`: its plots;
- `csv_files(report) -> list[(file name, columns, rows)]`: its CSV files beside report.csv;
- `SCORED_TASK`, `scored_records(run)` and `scored(run)`: the records the machine score
  counts (a failed one among them counts as failed) and those measured as Results of task
  SCORED_TASK (report.score; `xfbench compare`); `SCORED_WORKLOAD`, its kind of workload in
  the noise model `xfbench compare` judges by (report/noise.py; without a fitted model of
  its own, the widest fitted one).

The report reads a suite's records, and its failed cells (a failure record whose cell's
task is one of the suite's `tasks`), into `records[kind]` of each run and machine, and
names no suite itself (a test adds one from a package of its own).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class SuiteReport:
    name: str  # the suite's
    kind: str  # the record kind its cells write
    tasks: tuple[str, ...]  # the `task` of its cells, which its failure records carry
    module: ModuleType
    title: str  # its summary's title, and its table of records (plugin.Suite)
    table: Callable[[list[dict]], str] | None

    def part(self, what: str, default: Any = None) -> Any:
        return getattr(self.module, what, default)


def declared() -> list[SuiteReport]:
    """Every declared suite with a report module, in the order they are declared."""
    from xfbench.plugin import declared as suites

    return [
        SuiteReport(
            name=s.name,
            kind=s.kind,
            tasks=s.tasks,
            module=importlib.import_module(s.report),
            title=s.title,
            table=s.table,
        )
        for s in suites().values()
        if s.report and s.kind
    ]


def kinds() -> dict[str, tuple[str, ...]]:
    """The record kinds read into `records`, each with its cells' tasks."""
    return {s.kind: s.tasks for s in declared()}
