"""What a sweep runs: the selection options, validated by harness.selection, expanded
into one job per (framework, device, thread count) group."""

from __future__ import annotations

from dataclasses import dataclass

from xfbench import options, topology
from xfbench.adapters import TASKS
from xfbench.errors import UsageError
from xfbench.harness.measure import WEIGHT_SOURCES
from xfbench.harness.presets import PRESETS
from xfbench.harness.selection import cells, option_list, parse
from xfbench.harness.threads import allowed_cpus
from xfbench.runner.copies import CopiesCell
from xfbench.runner.group import Group, Job


def default_threads(cpus: int) -> list[int]:
    """1, 2, 4, ... up to cpus, and cpus itself when it is not a power of two."""
    counts, n = [], 1
    while n <= cpus:
        counts.append(n)
        n *= 2
    return counts + ([cpus] if counts[-1] != cpus else [])


def thread_counts(value: str | None) -> list[int]:
    cpus = len(allowed_cpus())
    if value is None:
        return default_threads(cpus)
    counts = []
    for part in option_list("threads", value):
        if not part.isdigit() or int(part) < 1:
            raise UsageError(f"--threads takes positive counts like 1,2,4, not {part!r}")
        if int(part) > cpus:
            raise UsageError(f"--threads {part} is more than the {cpus} CPUs this process may use")
        counts.append(int(part))
    return sorted(set(counts))


def _fits(copies: str, threads: int) -> bool:
    try:
        copy_plan(copies, threads)
    except UsageError:
        return False
    return True


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


@dataclass(kw_only=True)
class Plan:
    selection: dict  # normalised, stored with the results to recognise a resume
    jobs: list[Job]
    preset_name: str

    @property
    def cells(self):
        return [c for job in self.jobs for c in job.cells]


def make_plan(
    *,
    framework=None,
    model=None,
    mode=None,
    precision=None,
    device=None,
    threads=None,
    batch_size=None,
    preset=None,
    data=None,
    task=None,
    weights=None,
    skip_missing_devices=False,
    ci_target=None,
    data_dir=None,
    data_workers=None,
    copies=None,
    profile_layers=False,
) -> Plan:
    """Validate every option (UsageError: one line for the user) and list the jobs."""
    counts = thread_counts(threads)
    base = dict(
        framework=framework,
        model=model,
        mode=mode,
        precision=precision,
        device=device,
        batch_size=batch_size,
        preset=preset,
        data=data,
        data_dir=data_dir,
        data_workers=data_workers,
    )
    selections = {
        n: parse(**base, threads=str(n), skip_missing_devices=skip_missing_devices) for n in counts
    }
    sel = selections[counts[0]]
    if ci_target is not None:
        options.number("--ci-target", ci_target, high=100, what="a percentage")
    if weights not in (None, *WEIGHT_SOURCES):
        raise UsageError(f"unknown weights {weights!r}; valid: {', '.join(WEIGHT_SOURCES)}")
    if copies is not None and threads is None and "cpu" in sel.devices:
        # not asked for a thread count: the counts where that many copies fit
        fits = [n for n in counts if _fits(copies, n)]
        counts = fits or counts  # none: copy_plan says why, in one line
    copy_sets = {n: copy_plan(copies, n) if "cpu" in sel.devices else [] for n in counts}
    tasks = option_list("task", task) or list(sel.preset.tasks)
    for t in tasks:
        if t not in TASKS:
            raise UsageError(f"unknown task {t!r}; valid: {', '.join(TASKS)}")
    # What each child is given (options.CHILD_OPTIONS), normalised where the child would
    # otherwise fill in its own defaults differently.
    given = {
        "model": ",".join(sel.networks),
        "mode": mode,
        "precision": ",".join(sel.precisions),
        "preset": sel.preset.name,
        "batch-size": batch_size,
        "data": sel.data,
        "weights": weights or "seed",
        "skip-missing-devices": skip_missing_devices,
        "ci-target": ci_target,
        "data-dir": sel.data_dir,
        # as given: each job's default follows its own thread count
        "data-workers": data_workers if sel.data == "real" else None,
        "scenario": None,  # the serving suite's (runner.suites.serving_plan)
        "latency-bound": None,
        "profile-layers": profile_layers,
    }
    assert set(given) == set(options.CHILD_OPTIONS), "each child option is given"
    jobs = []
    for fw in sel.frameworks:
        for dev in sel.devices:
            # A GPU or TPU cell runs once, with the most host threads asked for (recorded
            # in its threads field): its time is the device's, and repeating it per CPU
            # thread count would only measure the same cell again.
            for n in counts if dev == "cpu" else counts[-1:]:
                group_cells = [
                    c
                    for t in tasks
                    for c in cells(selections[n], t)
                    if c.framework == fw and c.device == dev
                ]
                sets = copy_sets[n] if dev == "cpu" else []
                if group_cells and sets:
                    cells_x = [CopiesCell(cell=c, copies=len(sets)) for c in group_cells]
                    jobs.append(Job(Group(fw, dev, n, part=f"x{len(sets)}"), cells_x, given, sets))
                elif group_cells:
                    jobs.append(Job(Group(fw, dev, n), group_cells, given))
    selection = {
        "frameworks": list(sel.frameworks),
        "networks": list(sel.networks),
        "modes": list(sel.modes) if sel.modes else None,
        "precisions": list(sel.precisions),
        "devices": list(sel.devices),
        "threads": counts,
        "tasks": tasks,
        "preset": sel.preset.name,
        "batch_size": sel.batch_size,
        "data": sel.data,
        "data_dir": sel.data_dir,
        "weights": weights or "seed",
        **({"profile_layers": True} if profile_layers else {}),
        **({"copies": copies} if copies is not None else {}),
    }
    return Plan(selection=selection, jobs=jobs, preset_name=sel.preset.name)


def default_timeout(preset_name: str) -> float:
    return PRESETS[preset_name].cell_timeout_s
