"""`xfbench run`: sweep cells, one fresh process per (framework, device, threads) group.

`--suite NAME` runs another declared suite's cells (xfbench.plugin.Suite: scaling,
allreduce, serving) through the same children, folder and resume.

Every option is checked before anything runs; a bad one gives one line and exit 2.
Exit status: 0 when every cell has a result or was skipped with its reason, 1 when
any cell failed (crash, kill, out of memory, time-out, exception), 130 when interrupted.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from pathlib import Path

from xfbench import command_line
from xfbench.errors import UsageError
from xfbench.plugin import declared
from xfbench.records import RecordError
from xfbench.runner import arguments
from xfbench.runner.budget import Budget, framework_of
from xfbench.runner.copies import run_copies
from xfbench.runner.group import Job, key, run_group
from xfbench.runner.plan import Plan, default_timeout, make_suite_plan
from xfbench.runner.progress import SweepProgress
from xfbench.runner.store import RunFolder, StoreError, default_folder, find_resumable, read_json

HARD_FAILURES = ("failed", "timeout", "killed", "oom")


def parser() -> command_line.ArgumentParser:
    declared()  # every suite's options
    p = command_line.ArgumentParser(prog="xfbench run", description=__doc__.split("\n\n")[0])
    arguments.add_run_arguments(p, command_line.KINDS)
    return p


def _writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"results folder {folder} is not writable: {e.strerror or e}") from None


def choose_folder(args, plan: Plan) -> RunFolder:
    if args.results:
        return RunFolder(args.results)
    base = Path("results")

    def complete(folder: RunFolder) -> bool:
        return all(
            folder.is_finished(key(c), args.retry_failed, args.retry_contended) for c in plan.cells
        )

    found = find_resumable(base, plan.selection, complete) if base.is_dir() else None
    return RunFolder(found or default_folder(base))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        try:
            args = parser().parse_args(argv)
        except SystemExit as e:  # --help
            return int(e.code or 0)
        # nan, inf, 0 and below would each disable the limit silently
        args.cell_timeout = command_line.seconds("--cell-timeout", args.cell_timeout)
        plan = make_suite_plan(args)
        if not plan.cells:
            raise UsageError(
                "the selection has no cells (no mode of these frameworks runs on these devices)"
            )
        if args.dry_run:
            print(dry_run(plan))
            return 0
        folder = choose_folder(args, plan)
        for path in (folder.root, folder.cells, folder.failed, folder.logs):
            _writable(path)
        folder.check_version()
        folder.lock()
    except (UsageError, RecordError, StoreError) as e:
        print(f"xfbench run: {e}", file=sys.stderr)
        return 2
    try:
        return sweep(args, plan, folder)
    except StoreError as e:
        # a full disk, or a folder made unwritable meanwhile: every cell already
        # written is kept, and the same command resumes after the cause is fixed
        print(f"xfbench run: {e}; the cells written so far are kept", file=sys.stderr)
        return 3
    finally:
        folder.unlock()


def dry_run(plan: Plan) -> str:
    """The plan in words: each process group, its cells and about how long it takes."""
    from xfbench.harness.estimate import ASSUMED_GFLOPS_PER_THREAD
    from xfbench.runner.estimate import group_seconds

    def seconds(s: float | None) -> str:
        return "?" if s is None else f"~{s:.0f} s" if s < 600 else f"~{s / 60:.0f} min"

    lines, total = [], 0.0
    for job in plan.jobs:
        s = group_seconds(job.cells, plan.preset_name)
        total = None if s is None or total is None else total + s
        lines.append(f"{job.group.name}: {len(job.cells)} cells, {seconds(s)}")
        lines += [f"  {key(c)}" for c in job.cells]
    lines.append(
        f"{len(plan.cells)} cells in {len(plan.jobs)} process groups, {seconds(total)} in all "
        f"(preset {plan.preset_name}; steps estimated from their FLOPs at "
        f"{ASSUMED_GFLOPS_PER_THREAD:g} GFLOP/s a CPU thread, so a machine's real time may "
        "be half of it or several times it); nothing was measured or written"
    )
    return "\n".join(lines)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def sweep(args, plan: Plan, folder: RunFolder) -> int:
    from xfbench import machine

    quiet = args.quiet or args.json_only
    budget = _budget(args, plan)
    machine_description = machine.describe()
    machine_description["roofs"] = (
        read_json(folder.root / "roofs.json") or {}
        if args.skip_roofs
        else measure_roofs(plan, folder, quiet)
    )
    timeout = args.cell_timeout or default_timeout(plan.preset_name)
    folder.add_selection(plan.selection)
    todo = [
        c
        for c in plan.cells
        if not folder.is_finished(key(c), args.retry_failed, args.retry_contended)
    ]
    stamps = {key(c): folder.stamps(key(c)) for c in todo}
    if not quiet:
        print(
            f"{len(plan.cells)} cells in {len(plan.jobs)} process groups; "
            f"{len(plan.cells) - len(todo)} already finished in {folder.root}; "
            f"{len(todo)} to run",
            file=sys.stderr,
        )
    counts = functools.partial(_done_and_failed, folder, todo, stamps)

    # A kill of this process (SIGTERM) stops the child and keeps what finished, as Ctrl-C does.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    interrupted = False
    with SweepProgress(len(todo), quiet) as progress:
        try:
            for job, job_todo, later in _jobs_to_run(plan, set(stamps)):
                _run_job(job, job_todo, later, budget=budget, folder=folder, timeout=timeout,
                         quiet=quiet, on_poll=lambda current: progress.update(current, *counts()))  # fmt: skip
                progress.update(f"finished {job.group.name}", *counts())
                folder.merge(plan.selection, machine_description)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            signal.signal(signal.SIGTERM, previous)
    taken = time.monotonic() - budget.start if budget else 0.0
    merged = folder.merge(plan.selection, machine_description)
    status = _summary(args=args, plan=plan, folder=folder, merged=merged, interrupted=interrupted)
    if budget:  # how the budget went, on stderr: also under --quiet and --json-only
        print(_spent(budget, taken), file=sys.stderr)
    return status


def _spent(budget: Budget, taken_s: float) -> str:
    """--minutes: the minutes the sweep (its roofs and cells) took against those planned."""
    planned, took = budget.seconds / 60, taken_s / 60
    over = f", {took - planned:.1f} over" if took - planned >= 0.05 else ""
    return (f"--minutes {planned:g}: the sweep took {took:.1f} min against the "
            f"{planned:g} planned{over}")  # fmt: skip


def _jobs_to_run(plan: Plan, todo_keys: set):
    """Each process group with cells still to run: the group, those cells, and the cells
    still to run of it and every later group (which the budget shares its time among)."""
    for i, job in enumerate(plan.jobs):
        job_todo = [c for c in job.cells if key(c) in todo_keys]
        if job_todo:
            yield (
                job,
                job_todo,
                [[c for c in j.cells if key(c) in todo_keys] for j in plan.jobs[i:]],
            )


def _run_job(job: Job, job_todo: list, later: list, *, budget, folder, timeout, quiet, on_poll):
    """One process group's cells still to run, in one child (or one per copy), with the
    rounds the budget gives them; the time they took counted against it."""
    settings, rounds = _budgeted(budget, job, later, quiet=quiet, folder=folder)
    part = Job(job.group, job_todo, settings, job.copies)
    t0 = time.monotonic()
    (run_copies if job.copies else run_group)(part, folder, timeout, on_poll)
    if budget:
        budget.done(job_todo, rounds, time.monotonic() - t0)


def _done_and_failed(folder: RunFolder, todo: list, stamps: dict) -> tuple[int, int]:
    """How many of the sweep's cells are done since it started, and how many failed."""
    done = failed = 0
    for c in todo:
        k = key(c)
        result, failure = folder.stamps(k)
        if result not in (None, stamps[k][0]):  # a record newer than the sweep's start
            done += 1
        elif failure not in (None, stamps[k][1]):
            done += 1
            # a cell skipped with its reason is done, not failed (as the last line says)
            failed += (folder.failure(k) or {}).get("status") in HARD_FAILURES
    return done, failed


def _budget(args, plan: Plan) -> Budget | None:
    """--minutes: the sweep's time budget, counted from now (the roofs' time included);
    its value was checked where the command line was parsed (its kind, "minutes")."""
    if args.minutes is None:
        return None
    minutes = command_line.number("--minutes", args.minutes, what="a number of minutes")
    return Budget(seconds=minutes * 60, preset_name=plan.preset_name)


def _budgeted(
    budget: Budget | None, job: Job, later: list[list], *, quiet: bool, folder: RunFolder
):
    """The group's settings, with the rounds a cell the budget allows (--minutes). What the
    budget chose, and any overrun, is said on stderr (unless quiet) and in the group's log,
    which keeps it in the results folder whatever was printed."""
    if budget is None:
        return job.settings, None
    rounds = budget.rounds(later)
    framework = framework_of(job.cells[0]) if job.cells else ""
    how = ("its groups so far" if framework in budget.taken
           else "the groups so far" if budget.taken else "the estimate as it is")  # fmt: skip
    over = budget.needed(later, 1) - budget.left
    line = (
        f"--minutes: {job.group.name} at {rounds} timed round{'s' * (rounds != 1)} a cell "
        f"({budget.left / 60:.1f} min left; {framework} planned at "
        f"{budget.scale_of(framework):.2f} x the estimate, from {how})"
        + (f"; over the budget by about {over / 60:.1f} min at one round a cell, the "
           "fewest: every cell still runs" if over > 0 else "")
    )  # fmt: skip
    try:
        folder.logs.mkdir(parents=True, exist_ok=True)
        with open(folder.logs / f"{job.group.name}.log", "a") as log:
            log.write(f"# {line}\n")
    except OSError as e:  # a folder made unwritable meanwhile: stop as any failed write does
        raise StoreError(f"cannot write {folder.logs}: {e.strerror or e}") from None
    if not quiet:
        print(line, file=sys.stderr)
    return {**job.settings, "rounds": str(rounds)}, rounds


def roof_targets(selection: dict) -> dict[str, list[str]]:
    """What a sweep measures the roofs of: {"t<N>": the child's arguments} for each CPU
    thread count, {"cuda:N": ...} for each GPU it names."""
    counts = selection.get("threads")
    devices = selection.get("devices") or []
    wanted = {}
    if isinstance(counts, list) and "cpu" in devices:
        wanted.update({f"t{n}": ["--threads", str(n)] for n in counts})
    wanted.update({d: ["--device", d] for d in devices if d.startswith("cuda:")})
    return wanted


def measure_roofs(plan: Plan, folder: RunFolder, quiet: bool) -> dict:
    """The machine's memory bandwidth and peaks (roofline/roofs.py) before any cell runs:
    the CPU's at each CPU thread count of the sweep, each in a child pinned to that many
    CPUs, and each GPU's of the sweep in a child of its own; each child keeps them in the
    folder (roofs.json) so that a resumed sweep reuses them. {"t<N>": {...}, "cuda:N": {...}},
    or {key: {"error": why}} for what could not be measured."""
    import subprocess

    from xfbench.runner.store import write_json

    wanted = roof_targets(plan.selection)
    path = folder.root / "roofs.json"
    for name, where in wanted.items():
        known = (read_json(path) or {}).get(name, {"error": "not yet"})
        if "error" not in known and not known.get("stopped"):  # a roof stopped: again
            continue
        if not quiet:
            what = f"{where[1]} thread(s)" if where[0] == "--threads" else where[1]
            print(f"measuring the roofs of {what}", file=sys.stderr)
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "xfbench.roofline.roofs", *where, "--into", str(path)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            why = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        except subprocess.TimeoutExpired as e:
            why = f"TimeoutExpired: {e}"
        kept = read_json(path) or {}
        if name not in kept:  # the child died before it could say why
            write_json(path, {**kept, name: {"error": why}})
    return read_json(path) or {} if wanted else {}


def _report(folder: RunFolder, quiet: bool) -> None:
    """Render the run folder with `xfbench report` (its scores included), saying where
    unless quiet; the results are safe on disk whatever happens here."""
    from contextlib import redirect_stdout
    from io import StringIO

    from xfbench.report.cli import main as report_main

    try:
        with redirect_stdout(StringIO() if quiet else sys.stdout):
            rc = report_main([str(folder.root)])
    except (Exception, SystemExit) as e:
        rc = f"{type(e).__name__}: {e}"
    if rc not in (0, None, 1):  # 1: the report itself said what it left out, or why
        print(
            f"xfbench report did not finish ({rc}); run: xfbench report {folder.root}",
            file=sys.stderr,
        )


def _score(folder: RunFolder) -> None:
    """This machine's scores against the checked-in reference result set sharing the most
    workloads with the run (report/score.py), or nothing when none shares one."""
    from xfbench.report import score

    try:
        run = score.load_run(folder.root)
        best = score.best_reference(run)
        # a CPU run with no reference stays quiet; an accelerator's is told why
        gpu = best is None and score.device_kind(run) != "cpu"
        missing = score.no_reference_text(run) if gpu else ""
    except Exception as e:  # the results are on disk: a score that fails only says so
        print(f"xfbench score did not finish ({type(e).__name__}: {e})", file=sys.stderr)
        return
    if best is not None:
        print(score.describe(best))
    elif missing:
        print(f"machine score: none: {missing}")


def _bundle(folder: RunFolder, quiet: bool) -> None:
    """The folder packed into its bundle (xfbench bundle); the results are on disk
    whatever happens here."""
    from xfbench.bundle.pack import BundleError, pack

    try:
        path, digest = pack(folder.root)
    except (BundleError, OSError) as e:
        print(f"xfbench bundle did not finish: {e}", file=sys.stderr)
        return
    if not quiet:
        print(f"bundle: {path}  sha256 {digest}")


def _summary(args, plan: Plan, folder: RunFolder, merged: Path, interrupted: bool) -> int:
    records, hard = [], 0
    for c in plan.cells:
        result = read_json(folder.cells / f"{key(c)}.json")
        failure = folder.failure(key(c))
        if result:
            records += [b["extra_info"] for b in result.get("benchmarks", [])]
        elif failure:
            records.append(
                {**failure["cell"], "status": failure["status"], "reason": failure["reason"]}
            )
            hard += failure["status"] in HARD_FAILURES
    finished = sum(1 for c in plan.cells if folder.has_result(key(c)))
    line = (
        f"{finished} of {len(plan.cells)} cells measured, {hard} failed, "
        f"{len(plan.cells) - len(records)} not run: {merged}"
    )
    quiet = args.quiet or args.json_only
    if args.json_only:
        print(merged)
    elif args.quiet:
        print(line)
    else:
        print(plan.suite.summary.table(records) if plan.suite.summary else "")
        print(line)
    if interrupted:
        print("interrupted: run the same command again to resume", file=sys.stderr)
    else:
        # --quiet and --json-only change what is printed, not what is written
        _report(folder, quiet)
        if not quiet:
            _score(folder)
        if args.bundle:
            _bundle(folder, args.json_only)
    if interrupted:
        return 130
    if plan.cells and not finished:
        # every cell skipped (an absent device under --skip-missing-devices, say): a script
        # must not read a run that measured nothing as a success
        print("xfbench: no cell was measured", file=sys.stderr)
        return 1
    return 1 if hard else 0
