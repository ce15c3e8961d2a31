"""What a sweep runs: the suite's cells (its declared `sweep`, from the run's options),
grouped into one job per child process: (suite, framework, device, thread count), and with
--copies each CPU cell as that many copies at once."""

from __future__ import annotations

from dataclasses import dataclass

from xfbench import command_line, options, topology
from xfbench.errors import UsageError
from xfbench.harness.presets import PRESETS
from xfbench.plugin import Suite, declared
from xfbench.runner import arguments
from xfbench.runner.copies import CopiesCell
from xfbench.runner.group import Group, Job


def copy_plan(copies: str | None, threads: int) -> list[list[int]]:
    """The CPU set of each copy of a cell of `threads` threads (--copies N or auto); []
    for one process (no --copies, or auto finding room for one copy only)."""
    if copies is None:
        return []
    if copies != "auto" and not (copies.isdigit() and int(copies) >= 1):
        raise UsageError(f"--copies takes a count of 1 or more, or auto, not {copies!r}")
    try:
        sets = topology.copy_cpus(None if copies == "auto" else int(copies), threads)
    except ValueError as e:
        raise UsageError(f"--copies {copies} --threads {threads}: {e}") from None
    return sets if len(sets) > 1 else []


def _fits(copies: str, threads: int) -> bool:
    try:
        copy_plan(copies, threads)
    except UsageError:
        return False
    return True


@dataclass(kw_only=True)
class Plan:
    suite: Suite
    selection: dict  # normalised, stored with the results to recognise a resume
    jobs: list[Job]
    preset_name: str

    @property
    def cells(self):
        return [c for job in self.jobs for c in job.cells]


def settings(suite: Suite, opts: dict) -> dict:
    """What every child of the sweep measures its cells with (options.Option.child): the
    options that are not the cells themselves, as given; and --threads, which a group with
    a thread count of its own replaces (a multi-worker suite's is per worker)."""
    chosen = [o for o in arguments.run_options() if o.child and o.applies(suite.name)]
    return {**{o.dest: opts.get(o.dest) for o in chosen}, "threads": opts.get("threads")}


def make_plan(suite: Suite, opts: dict) -> Plan:
    """Validate every option of `xfbench run --suite NAME` (UsageError: one line) and list
    the jobs: one child process per (framework, device, thread count) of the suite's cells."""
    sweep = suite.sweep.plan(opts)
    cells, selection = list(sweep.cells), dict(sweep.selection)
    copies = opts.get("copies")
    copy_sets: dict[int, list[list[int]]] = {}
    if copies is not None:
        counts = sorted({c.threads for c in cells if c.device == "cpu"})
        if opts.get("threads") is None:
            # not asked for a thread count: the counts where that many copies fit
            fits = [n for n in counts if _fits(copies, n)] or counts  # none: copy_plan says why
            cells = [c for c in cells if c.device != "cpu" or c.threads in fits]
            counts = fits
            selection["threads"] = fits
        copy_sets = {n: copy_plan(copies, n) for n in counts}
        selection["copies"] = copies
    given = settings(suite, opts)
    jobs: dict[Group, Job] = {}
    for cell in cells:
        threads = getattr(cell, "threads", 0)
        sets = copy_sets.get(threads, []) if cell.device == "cpu" else []
        group = Group(
            framework=cell.framework,
            device=cell.device,
            threads=threads,
            suite=suite.name,
            part=f"x{len(sets)}" if sets else "",
        )
        if group not in jobs:
            jobs[group] = Job(group, [], given, sets)
        jobs[group].cells.append(CopiesCell(cell=cell, copies=len(sets)) if sets else cell)
    return Plan(
        suite=suite, selection=selection, jobs=list(jobs.values()), preset_name=sweep.preset
    )


def default_timeout(preset_name: str) -> float:
    return PRESETS[preset_name].cell_timeout_s


def make_suite_plan(args) -> Plan:
    """The plan of the suite named by --suite, every option checked (UsageError: one line)."""
    runnable = {name: s for name, s in declared().items() if s.sweep}
    if args.suite is None:
        args.suite = options.default_sweep()
    if args.suite not in runnable:
        raise UsageError(f"unknown suite {args.suite!r}; valid: {', '.join(runnable)}")
    # Options that belong to one suite only: giving them to another is a mistake, not a no-op.
    own = arguments.applies(args.suite)
    for o in arguments.run_options():
        if getattr(args, o.dest) not in (None, False) and o.dest not in own:
            raise UsageError(f"--{o.name} does not apply to --suite {args.suite}")
    return make_plan(runnable[args.suite], {dest: getattr(args, dest) for dest in own})


def plan_of(argv: list[str]) -> Plan:
    """The plan `xfbench run ARGV` would run, measuring nothing (UsageError: one line); its
    paths are not checked against this machine's disk (PLANNING_KINDS: ARGV may have run on
    another, a GPU window's)."""
    declared()  # every suite's options
    p = command_line.ArgumentParser(prog="xfbench run")
    arguments.add_run_arguments(p, command_line.PLANNING_KINDS)
    return make_suite_plan(p.parse_args(argv))
