"""The suites that bring their own part of the report: each declares (plugin.Suite) the
record kind its cells write and its report module, `xfbench/<suite>/report.py`, which sits
in the report's layer and may give:

- `sections(report, plots) -> list[Part]`: its section(s), after Table 7's (report.sections),
  given the plots it drew;
- `plots(report, folder) -> list[(caption, path)]`: its plots;
- `csv_files(report) -> list[(file name, columns, rows)]`: its CSV files beside report.csv;
- `read(entry) -> (record or None, problem or None)`: one pytest-benchmark entry of its kind
  (report.load.Entry) as the record its other parts read, and what was wrong with it in one
  line (default: the entry's extra_info, its file as `source` and its timed rounds as
  `timed_rounds_s`);
- `read_failure(cell, status, reason, source) -> record`: one of its failed cells
  (default: the cell's fields, status, reason and source); `owns(cell)`: a failed cell of
  its that carries neither its task nor its kind (files written before they did);
- `build(report) -> model`: what it derives from every machine's records, once, kept in
  `report.suite_models[kind]` for its other parts; footnotes it numbers come from
  `report.next_note()` (after Table 7's, in the suites' declared order);
- `peaks(machine) -> {(device, dtype, CPU threads or None): TFLOP/s}`: the compute peaks
  its records measured, which Table 7's cells are set against (% of peak) and the roofline
  takes where higher than its probe's (report.model.measured_peaks);
- `ANCHOR_KIND`, `ANCHOR_TITLE` and `anchor_matches(machine, anchor) -> [{device_name,
  what, ours, ours_setting}]`: its measurements beside the published anchors of that kind
  (report/anchors.py);
- `gpu_workloads(machine) -> [report.gpu_models.Workload]`: its GPU measurements as
  workloads bound by memory or by arithmetic, which two GPU models are compared by;
- `acceptance(out, read) -> str` and `ACCEPTANCE_OUTPUT`: its section of the acceptance
  summary from the file its acceptance step wrote under `out` (acceptance/summary.py);
- `SCORED_TASK`, `scored_records(run)` and `scored(run)`: the records the machine score
  counts (a failed one among them counts as failed) and those measured as Results of task
  SCORED_TASK (report.score; `xfbench compare`); `SCORED_WORKLOAD`, its kind of workload in
  the noise model `xfbench compare` judges by (report/noise.py; without a fitted model of
  its own, the widest fitted one).

The report reads a suite's records, and its failed cells (a failure record whose cell's
task is one of the suite's `tasks`, or whose cell's kind is the suite's), into
`records[kind]` of each run and machine, and names no suite itself (a test adds one from
a package of its own).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from xfbench import records


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

    def read(self, entry) -> tuple[dict | None, str | None]:
        """One entry of its kind as its record, and the problem with it (None: none)."""
        if self.part("read"):
            return self.part("read")(entry)
        return {**entry.extra, "source": entry.source, "timed_rounds_s": entry.rounds()}, None

    def owns(self, cell: dict) -> bool:
        """Whether a failed cell is one of this suite's."""
        kind = records.ALIASES.get(cell.get("kind"), cell.get("kind"))
        older = self.part("owns")
        return cell.get("task") in self.tasks or kind == self.kind or bool(older and older(cell))

    def summary_table(self, records: list[dict]) -> str | None:
        """Its terminal summary's table of records the report read, where they are as its
        cells wrote them (a suite with a reader of its own keeps them otherwise: none)."""
        if not self.table or self.part("read"):
            return None
        return self.table(records)

    def read_failure(self, cell: dict, status: str, reason, source: str) -> dict:
        if self.part("read_failure"):
            return self.part("read_failure")(cell, status, reason, source)
        return {**cell, "status": status, "reason": reason, "source": source}


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


def by_kind() -> dict[str, SuiteReport]:
    """The suites whose records are read into `records`, by their kind."""
    return {s.kind: s for s in declared()}
