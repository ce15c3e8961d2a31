"""The suites that bring their own part of the report: each declares (plugin.Suite) the
record kind its cells write and its report module, `xfbench/<suite>/report.py`, which sits
in the report's layer, takes what it needs of the report from `xfbench.report.api` alone,
and declares its part as `REPORT = Hooks(...)`: every hook a field of `Hooks` (below), so a
misspelt one fails where it is declared, and one a suite does not give is None.

The report reads a suite's records, and its failed cells (a failure record whose cell's
task is one of the suite's `tasks`, or whose cell's kind is the suite's), into
`records[kind]` of each run and machine, and names no suite itself (a test adds one from
a package of its own).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from xfbench import records


@dataclass(frozen=True, kw_only=True)
class Hooks:
    """A suite's part of the report: what its report module declares (REPORT = Hooks(...))."""

    # its section(s), after Table 7's (report.sections), given the plots it drew:
    # (report, plots) -> [Part]
    sections: Callable | None = None
    # its plots: (report, folder) -> [(caption, path)]
    plots: Callable | None = None
    # its CSV files beside report.csv: report -> [(file name, columns, rows)]
    csv_files: Callable | None = None
    # one pytest-benchmark entry of its kind (report.load.Entry) as the record its other
    # hooks read, and what was wrong with it in one line: entry -> (record | None, problem |
    # None); None: the entry's extra_info, its file as `source`, its rounds as `timed_rounds_s`
    read: Callable | None = None
    # one of its failed cells: (cell, status, reason, source) -> record; None: the cell's
    # fields, status, reason and source
    read_failure: Callable | None = None
    # cell -> whether a failed cell that carries neither its task nor its kind (files
    # written before they did) is its
    owns: Callable | None = None
    # what it derives from every machine's records, once: report -> model, kept in
    # report.suite_models[kind]; footnotes it numbers come from report.next_note() (after
    # Table 7's, in the suites' declared order)
    build: Callable | None = None
    # the compute peaks its records measured: machine -> {(device, dtype, CPU threads or
    # None): TFLOP/s}, which Table 7's cells are set against (% of peak) and the roofline
    # takes where higher than its probe's (report.model.measured_peaks)
    peaks: Callable | None = None
    # its measurements beside the published anchors of `anchor_kind` (report/anchors.py),
    # under `anchor_title`: (machine, anchor) -> [{device_name, what, ours, ours_setting}]
    anchor_kind: str | None = None
    anchor_title: str | None = None
    anchor_matches: Callable | None = None
    # its GPU measurements as workloads bound by memory or by arithmetic, which two GPU
    # models are compared by: machine -> [report.gpu_models.Workload]
    gpu_workloads: Callable | None = None
    # its section of the acceptance summary from the file `acceptance_output` its
    # acceptance step wrote under `out`: (out, read) -> str (acceptance/summary.py)
    acceptance: Callable | None = None
    acceptance_output: str | None = None
    # the records the machine score counts (run -> [record]; a failed one counts as failed)
    # and those measured as Results of task `scored_task` (run -> [Result]; report.score,
    # `xfbench compare`); `scored_workload`: its kind of workload in the noise model
    # `xfbench compare` judges by (report/noise.py; without a fitted model of its own, the
    # widest fitted one)
    scored_task: str | None = None
    scored_records: Callable | None = None
    scored: Callable | None = None
    scored_workload: str | None = None


@dataclass(frozen=True)
class SuiteReport:
    name: str  # the suite's
    kind: str  # the record kind its cells write
    tasks: tuple[str, ...]  # the `task` of its cells, which its failure records carry
    hooks: Hooks
    title: str  # its summary's title, and its table of records (plugin.Suite)
    table: Callable[[list[dict]], str] | None

    def read(self, entry) -> tuple[dict | None, str | None]:
        """One entry of its kind as its record, and the problem with it (None: none)."""
        if self.hooks.read:
            return self.hooks.read(entry)
        return {**entry.extra, "source": entry.source, "timed_rounds_s": entry.rounds()}, None

    def owns(self, cell: dict) -> bool:
        """Whether a failed cell is one of this suite's."""
        kind = records.ALIASES.get(cell.get("kind"), cell.get("kind"))
        older = self.hooks.owns
        return cell.get("task") in self.tasks or kind == self.kind or bool(older and older(cell))

    def summary_table(self, records: list[dict]) -> str | None:
        """Its terminal summary's table of records the report read, where they are as its
        cells wrote them (a suite with a reader of its own keeps them otherwise: none)."""
        if not self.table or self.hooks.read:
            return None
        return self.table(records)

    def read_failure(self, cell: dict, status: str, reason, source: str) -> dict:
        if self.hooks.read_failure:
            return self.hooks.read_failure(cell, status, reason, source)
        return {**cell, "status": status, "reason": reason, "source": source}


def declared() -> list[SuiteReport]:
    """Every declared suite with a report module, in the order they are declared."""
    from xfbench.plugin import declared as suites

    return [
        SuiteReport(
            name=s.name,
            kind=s.kind,
            tasks=s.tasks,
            hooks=hooks_of(s.report),
            title=s.title,
            table=s.table,
        )
        for s in suites().values()
        if s.report and s.kind
    ]


def hooks_of(module_name: str) -> Hooks:
    """The REPORT a suite's report module declares; one line where it declares none."""
    found = getattr(importlib.import_module(module_name), "REPORT", None)
    if not isinstance(found, Hooks):
        raise TypeError(f"{module_name} declares no REPORT = Hooks(...) (xfbench/report/suites.py)")
    return found


def by_kind() -> dict[str, SuiteReport]:
    """The suites whose records are read into `records`, by their kind."""
    return {s.kind: s for s in declared()}
