"""The suites that bring their own part of the report: each declares (plugin.Suite) the
record kinds its cells write and its report module, `xfbench/<suite>/report.py` (or its
package `report/`), which sits in the report's layer, takes what it needs of the report
from `xfbench.report.api` alone, and declares its part as `REPORT = Hooks(...)`: every hook
a field of `Hooks` (below), so a misspelt one fails where it is declared, and one a suite
does not give is None (or empty).

The report reads a suite's records, and its failed cells (owner(): a failure record whose
cell's kind is one of the suite's, else whose task is, else that its `owns` recognises;
one no suite claims is the default suite's, plugin.Suite's `default`), into
`records[kind]` of each run and machine. The suite whose records are the cells of Table 7
(report.load.Result) says so by its `table7`, and builds Table 7 of them itself. The
report names no suite itself (a test adds one from a package of its own).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xfbench import records
from xfbench.published import Anchor

# Where in the report a suite's sections go (Hooks.sections), in the report's order: after
# the scores, after the machines table, among the suites' own (after the GPU models), after
# the roofline, after the anchors.
PLACES = ("after_scores", "after_machines", "suites", "after_roofline", "after_anchors")

# The shape of each callable hook, which mypy holds every declaration to (pyproject.toml).
# The report's own objects are Any here: report.model.Report and Machine, report.load.Run,
# Entry and Result, report.sections.Part and report.gpu_models.Workload, whose modules
# import this one.
Report = Any
Machine = Any
Plots = list[tuple[str, Path]]  # (caption, file) of each plot drawn
SectionsHook = Callable[[Report, Plots], list[Any]]  # (report, its plots) -> [Part]
PlotsHook = Callable[[Report, Path], Plots]  # (report, folder) -> its plots
CsvFilesHook = Callable[[Report], Sequence[tuple[str, Sequence[str], list[dict]]]]
ReadHook = Callable[[Any], tuple[Any, str | None]]  # Entry -> (record | None, problem)
ReadFailureHook = Callable[[dict, str], Any]  # (failure record, source) -> record
OwnsHook = Callable[[dict], bool]  # a failed cell -> whether it is this suite's
BuildHook = Callable[[Report], Any]  # report -> what it derives (report.suite_models)
PeaksHook = Callable[[Machine], dict[tuple[str, str, int | None], float]]
MatchesHook = Callable[[Machine, Anchor], list[dict]]
GpuWorkloadsHook = Callable[[Machine], list[Any]]  # machine -> [Workload]
ScoredHook = Callable[[Any], list[Any]]  # Run -> [Result]
CellsCsvHook = Callable[[Report], tuple[Sequence[str], list[dict]]]
TimedCellsHook = Callable[[Machine], list[Any]]  # machine -> [Result]


@dataclass(frozen=True)
class Anchors:
    """The kinds of published anchor (xfbench/published.toml) a suite's measurements stand
    beside, each with what a table calls its measurement (kind -> title), and its
    measurements beside one anchor (report/anchors.py): (machine, anchor) -> [{device_name,
    what, ours, ours_setting}]."""

    titles: dict[str, str]
    matches: MatchesHook


@dataclass(frozen=True)
class FromOutput:
    """A section of the acceptance summary made from the file its acceptance step wrote
    under the run's folder: (out, read) -> text ("": none; acceptance/summary.py)."""

    file: str
    section: Callable[[Path, Callable[[Path], dict]], str]


@dataclass(frozen=True)
class FromSweeps:
    """A section of the acceptance summary read from the sweeps' results, before the sweeps'
    own: (run, report) -> text ("": none)."""

    section: Callable[[Any, Report], str]  # (Run, report)


@dataclass(frozen=True)
class Table7:
    """Where a suite's records are the cells of Table 7 (report.load.Result): report.csv's
    columns and rows (report -> (columns, [row])), and a machine's timed cells, one per
    place in Table 7 (machine -> [Result]), which the roofline places and the machines
    table counts (energy, rounds)."""

    csv: CellsCsvHook
    cells: TimedCellsHook


@dataclass(frozen=True, kw_only=True)
class Hooks:
    """A suite's part of the report: what its report module declares (REPORT = Hooks(...)).
    Each hook is used by two suites or more, or says why beside it."""

    # its sections, by the place of the report they go (PLACES), in the order the suites
    # are declared, given the plots it drew: place -> (report, plots) -> [Part]
    sections: dict[str, SectionsHook] = field(default_factory=dict)
    # its plots: (report, folder) -> [(caption, path)]
    plots: PlotsHook | None = None
    # its CSV files beside report.csv: report -> [(file name, columns, rows)]
    csv_files: CsvFilesHook | None = None
    # one pytest-benchmark entry of its kind (report.load.Entry) as the record its other
    # hooks read, and what was wrong with it in one line: entry -> (record | None, problem |
    # None); None: the entry's extra_info, its file as `source`, its rounds as `timed_rounds_s`
    read: ReadHook | None = None
    # one of its failed cells: (failure record as written, source) -> record; its cell,
    # status and reason: records.failed_cell(record); None: the cell's fields, status, reason
    # and source
    read_failure: ReadFailureHook | None = None
    # cell -> whether a failed cell that carries neither its task nor its kind (files
    # written before they did) is its
    owns: OwnsHook | None = None
    # what it derives from every machine's records, once: report -> model, kept in
    # report.suite_models[kind]; footnotes it numbers come from report.next_note() (after
    # Table 7's, in the suites' declared order)
    build: BuildHook | None = None
    # the compute peaks its records measured: machine -> {(device, dtype, CPU threads or
    # None): TFLOP/s}, which Table 7's cells are set against (% of peak) and the roofline
    # takes where higher than its probe's (report.model.measured_peaks). One user, GEMM:
    # the suite that measures peaks
    peaks: PeaksHook | None = None
    # the published anchors its measurements stand beside (Anchors)
    anchors: Anchors | None = None
    # its GPU measurements as workloads bound by memory or by arithmetic, which two GPU
    # models are compared by: machine -> [report.gpu_models.Workload]
    gpu_workloads: GpuWorkloadsHook | None = None
    # its sections of the acceptance summary, by title: each made from its step's output
    # (FromOutput) or from the sweeps' results (FromSweeps)
    acceptance: dict[str, FromOutput | FromSweeps] = field(default_factory=dict)
    # every record the scores count (report.score, `xfbench compare`), each a Result of its
    # workload's task, timed or failed (report.load.scored_result, scored_failure):
    # run -> [Result]
    scored: ScoredHook | None = None
    # the kind of workload of each task it scores in the noise model `xfbench compare`
    # judges by (report/noise.py; a task without a fitted model of its own: the widest
    # fitted one): task -> kind
    workloads: dict[str, str] = field(default_factory=dict)
    # where its records are Table 7's cells (Table7). One user: Table 7's cells are one
    # suite's, which the roofline and the machines table read
    table7: Table7 | None = None

    def __post_init__(self):
        unknown = sorted(set(self.sections) - set(PLACES))
        if unknown:
            raise TypeError(f"Hooks: no place {', '.join(unknown)}; places: {', '.join(PLACES)}")


@dataclass(frozen=True)
class SuiteReport:
    name: str  # the suite's
    kinds: tuple[str, ...]  # the record kinds its cells write (its `kind`, or `kinds`)
    tasks: tuple[str, ...]  # the `task` of its cells, which its failure records carry
    hooks: Hooks
    title: str  # its summary's title, and its table of records (plugin.Suite)
    table: Callable[[list[dict]], str] | None
    default: bool = False  # the suite a failed cell no suite claims is read by

    @property
    def kind(self) -> str:
        """The kind its records and its model are kept under (its first)."""
        return self.kinds[0]

    def read(self, entry) -> tuple[dict | None, str | None]:
        """One entry of its kind as its record, and the problem with it (None: none)."""
        if self.hooks.read:
            return self.hooks.read(entry)
        return {**entry.extra, "source": entry.source, "timed_rounds_s": entry.rounds()}, None

    def keep(self, run, kind: str, record) -> None:
        """One record it read (or a failed cell's) in the run, under its kind."""
        run.records.setdefault(kind, []).append(record)

    def summary_table(self, records: list[dict]) -> str | None:
        """Its terminal summary's table of records the report read, where they are as its
        cells wrote them (a suite with a reader of its own keeps them otherwise: none)."""
        if not self.table or self.hooks.read:
            return None
        return self.table(records)

    def read_failure(self, record: dict, source: str):
        """One of its failure records as the record its other hooks read."""
        if self.hooks.read_failure:
            return self.hooks.read_failure(record, source)
        cell, status, reason = records.failed_cell(record)
        return {**cell, "status": status, "reason": reason, "source": source}

    def failure_kind(self, record: dict) -> str:
        """The kind a failed cell of it is kept under: its cell's kind or task where that
        is one of its kinds, else its first."""
        cell = records.failed_cell(record)[0]
        kind = records.ALIASES.get(str(cell.get("kind")), cell.get("kind"))
        found = [k for k in (kind, cell.get("task")) if k in self.kinds]
        return found[0] if found else self.kind


def owner(cell: dict, reports: list[SuiteReport]) -> SuiteReport | None:
    """The suite a failed cell is one of: the one of its kind, else of its task, else the
    first whose `owns` recognises it (files written before cells carried either), else the
    default suite (plugin.Suite's `default`: there is one)."""
    kind = records.ALIASES.get(str(cell.get("kind")), cell.get("kind"))
    task = cell.get("task")
    return (
        next((s for s in reports if kind in s.kinds), None)
        or next((s for s in reports if task in s.tasks), None)
        or next((s for s in reports if s.hooks.owns and s.hooks.owns(cell)), None)
        or next((s for s in reports if s.default), None)
    )


def declared() -> list[SuiteReport]:
    """Every declared suite with a report module, in the order they are declared."""
    from xfbench.plugin import declared as suites

    return [
        SuiteReport(
            name=s.name,
            kinds=s.kinds,
            tasks=s.tasks,
            hooks=hooks_of(s.report),
            title=s.summary.title if s.summary else s.name,
            table=s.summary.table if s.summary else None,
            default=s.default,
        )
        for s in suites().values()
        if s.report and s.kinds
    ]


def hooks_of(module_name: str) -> Hooks:
    """The REPORT a suite's report module declares; one line where it declares none."""
    found = getattr(importlib.import_module(module_name), "REPORT", None)
    if not isinstance(found, Hooks):
        raise TypeError(f"{module_name} declares no REPORT = Hooks(...) (xfbench/report/suites.py)")
    return found


def cells_suite() -> SuiteReport | None:
    """The suite whose records are Table 7's cells (`table7`), if one is declared."""
    return next((s for s in declared() if s.hooks.table7), None)


def cells(run) -> list:
    """Table 7's cells among a run's records (report.load.Result), in the order read: the
    records of the suite whose records are its cells."""
    found = cells_suite()
    return run.of(*found.kinds) if found else []


def timed_cells(machine) -> list:
    """A machine's timed cells of Table 7, one per place (report.load.Result), as the suite
    whose records are its cells gives them (Table7.cells)."""
    found = cells_suite()
    return found.hooks.table7.cells(machine) if found and found.hooks.table7 else []


def by_kind() -> dict[str, SuiteReport]:
    """The suites with a report of their own, by each record kind they read."""
    return {kind: s for s in declared() for kind in s.kinds}
