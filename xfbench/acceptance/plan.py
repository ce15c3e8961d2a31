"""What a GPU window runs next (`xfbench acceptance --part next`, gpu/window.sh's default),
from what the checked-in references of this GPU model hold. A reference is of this model
when its cells ran on a device of exactly this name (NVIDIA H100 80GB HBM3), as scoring
matches them (report/score.py).

A reference holds a cell of a sweep (`xfbench run`) when it has a record of it, measured
by today's code or skipped with its reason: a measured cell whose `timed_version` is older
than its suite declares (Suite.gpu's `timed`) is held by older code, "stale"; a cell that failed or
was cut is not held. It holds the roofs when its roofs.json has this device's, and a pytest
step (the GEMM, the all-reduce, DDP, the equivalence checks, the GPU tests) when a window's
steps.json, kept beside the cells (acceptance/reference.py), says it passed.

The window's steps, within its budget (each step's cap counted against it):
1. today's code first: the steps with stale cells, in the plan's order;
2. then the first part of the plan (steps.PARTS) that is not held, in its order;
3. then every later step not held, in the plan's order, each that fits what is left: a step
   that does not fit never stops the ones after it.
A step whose cells are partly held runs only the missing ones: its options narrowed to their
values (framework, mode, precision, batch size, network, task), its cap to their share. A
step a window cut at its cap is never planned again with the same cells and cap: its
finished cells leave it, so the unfinished ones get the whole cap; where it finished none
its cap doubles (what the cut run measured: they need more than it), up to what a window
holds, and past that its first cell runs alone under a whole window (a pytest step's cap
doubles likewise).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from xfbench.acceptance.run import RESERVE_S
from xfbench.acceptance.steps import PARTS, Step
from xfbench.errors import UsageError


@dataclass(frozen=True)
class Cut:
    """A step a window cut at its cap: the records that run's folder holds (what it
    measured or gave up on before the cut)."""

    step: str
    cap_s: float
    records: tuple[dict, ...]


@dataclass(frozen=True)
class Held:
    """What the references of one GPU model hold: records of cells, roofs, passed steps."""

    folders: tuple[str, ...]  # the references, by name
    records: tuple[dict, ...]  # each cell's fields and status
    roofs: frozenset[str]  # devices whose roofs were measured
    passed: frozenset[str]  # steps a window's steps.json says passed
    cuts: tuple[Cut, ...] = ()  # steps a window cut at their cap


@dataclass(frozen=True)
class Next:
    steps: list[Step]  # the probe, then what to run
    line: str  # which part and why, for the run's first line


def gpu_name(device: str) -> str | None:
    """The device's model as NVML names it (the frameworks use the same name)."""
    from xfbench import machine

    handle = machine.nvml_handle(device)
    if handle is None:
        return None
    name = machine._nvml().nvmlDeviceGetName(handle)
    return name.decode() if isinstance(name, bytes) else str(name)


def _documents(folder: Path) -> list[Path]:
    """Each run of a reference: its folders holding a merged.json or a window's
    steps.json (one that measured no cell has no merged.json)."""
    return sorted({p.parent for name in ("merged.json", "steps.json") for p in folder.rglob(name)})


def _records(doc: dict) -> list[dict]:
    out = [{**b.get("extra_info", {}), "status": "ok"} for b in doc.get("benchmarks", [])]
    for f in (doc.get("xfbench") or {}).get("failures", []):
        out.append({**(f.get("cell") or {}), "status": f.get("status")})
    return out


def held(model: str, references: list[Path]) -> Held:
    """What the references measured on this GPU model hold (report/score.py's matching)."""
    from xfbench.report import score

    folders, records, roofs, passed, cuts = [], [], set(), set(), []
    for path in references:
        try:
            kind = score.device_kind(score.load_reference(path))
        except Exception:  # a reference that cannot be read holds nothing here
            continue
        if kind != model:
            continue
        folders.append(path.name)
        for run in _documents(path):
            found = []
            if (run / "merged.json").is_file():
                found = _records(json.loads((run / "merged.json").read_text()))
                records += found
            if (run / "roofs.json").is_file():
                kept = json.loads((run / "roofs.json").read_text())
                roofs |= {k for k, v in kept.items() if "memory_bandwidth_gbps" in v}
            if (run / "steps.json").is_file():
                done = json.loads((run / "steps.json").read_text())
                passed |= {o["step"] for o in done if o.get("status") == "passed"}
                cuts += [
                    Cut(o["step"], float(o.get("timeout_s") or 0), tuple(found))
                    for o in done
                    if o.get("status") == "timeout"
                ]
    return Held(
        folders=tuple(folders),
        records=tuple(records),
        roofs=frozenset(roofs),
        passed=frozenset(passed),
        cuts=tuple(cuts),
    )


def sweep_plan(step: Step):
    """The runner's plan of a sweep step (its cells, its selection), made as on the machine
    the step names, whether or not this one has that device (references are read and made
    on any machine); None for a step that is no sweep."""
    from xfbench.harness import selection
    from xfbench.runner.plan import plan_of

    argv = list(step.argv)
    if argv[2:4] != ["xfbench.harness.cli", "run"]:
        return None
    named = argv[argv.index("--device") + 1] if "--device" in argv else "cpu"
    here = selection.present_devices
    selection.present_devices = lambda: sorted({*here(), *named.split(",")})
    try:
        return plan_of(argv[4:])
    finally:
        selection.present_devices = here


def planned_cells(step: Step) -> list[dict] | None:
    """The cells `xfbench run` would measure for a sweep step (their fields), or None for
    a step that is no sweep."""
    plan = sweep_plan(step)
    return None if plan is None else [c.as_dict() for c in plan.cells]


def _same(cell: dict, record: dict) -> bool:
    """The record is of this cell: the same fields but the host's thread count (a GPU
    cell's host may have other cores)."""
    return all(record.get(k) == v for k, v in cell.items() if k != "threads")


def _has(cell: dict, records: tuple[dict, ...], version: int = 1) -> bool:
    """A record of this cell, measured by today's code (its timed_version at least the
    suite's, absent 1) or skipped with its reason."""
    return any(
        _same(cell, r)
        and (
            r.get("status") == "skipped"
            or (r.get("status") == "ok" and r.get("timed_version", 1) >= version)
        )
        for r in records
    )


def _stale(cell: dict, records: tuple[dict, ...], version: int) -> bool:
    """Measured, but only by older code than today's."""
    return not _has(cell, records, version) and _has(cell, records, 1)


@dataclass(frozen=True)
class Todo:
    """A step as a window would run it: the step (narrowed to its missing cells), how many
    cells it runs, whether any was measured by older code, what the cap was derived from."""

    step: Step
    cells: tuple[dict, ...] = ()  # a sweep's cells to measure; () for any other step
    stale: bool = False
    note: str = ""


# A sweep's options that choose its cells, by the cell's field
CHOOSING = (
    ("framework", "--framework"),
    ("mode", "--mode"),
    ("precision", "--precision"),
    ("batch_size", "--batch-size"),
    ("network", "--model"),
    ("task", "--task"),
)


def _with_option(argv: tuple[str, ...], option: str, value: str) -> tuple[str, ...]:
    """argv with option (as --x=v or --x v) set to value, or added after `run`."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == option:
            out[i + 1] = value
            return tuple(out)
        if arg.startswith(option + "="):
            out[i] = f"{option}={value}"
            return tuple(out)
    return (*out[:4], f"{option}={value}", *out[4:])


def narrowed(step: Step, cells: list[dict], missing: list[dict]) -> Step:
    """The step with its cell-choosing options narrowed to the values of the missing cells
    (each option's order kept): the product of those values, which holds every missing
    cell and may hold held ones between them."""
    argv = step.argv
    for field_name, option in CHOOSING:
        every = list(dict.fromkeys(c.get(field_name) for c in cells))
        wanted = [v for v in every if any(m.get(field_name) == v for m in missing)]
        if wanted != every and None not in wanted:
            argv = _with_option(argv, option, ",".join(str(v) for v in wanted))
    return replace(step, argv=argv)


def _version(step: Step):
    """The cell -> version of today's code, for the suite a sweep step runs."""
    plan = sweep_plan(step)
    gpu = plan.suite.gpu if plan is not None else None
    return (gpu.timed if gpu else None) or (lambda cell: 1)


def _cut(step: Step, h: Held) -> Cut | None:
    """The step's cut of the longest cap: the latest, since a cut's cap only grows."""
    return max((c for c in h.cuts if c.step == step.name), key=lambda c: c.cap_s, default=None)


def _key(cell: dict) -> tuple:
    """A cell's identity across hosts (its fields but the host's thread count)."""
    return tuple(sorted((k, str(v)) for k, v in cell.items() if k != "threads"))


def to_run(
    step: Step, device: str, h: Held, planned: list[dict], window_s: float = math.inf
) -> Todo | None:
    """What of the step a window runs (None: the references hold it all, or the window's
    earlier steps plan every cell it has left), its cells already planned earlier in the
    window left out of its cap's count; window_s, the most one step's cap may be."""
    if step.name.endswith("roofs"):
        return None if device in h.roofs else Todo(step)
    try:
        cells = planned_cells(step)
    except UsageError:  # a sweep this machine cannot plan is not known to be held
        return Todo(step)
    if cells is None:  # a pytest step: held where a window's steps.json says it passed
        if step.name in h.passed:
            return None
        cap, note = _after_cut(step, _cut(step, h), window_s)
        return Todo(replace(step, cap_s=cap), note=note)
    version = _version(step)
    missing = [c for c in cells if not _has(c, h.records, version(c))]
    if not cells or not missing:
        return None
    stale = any(_stale(c, h.records, version(c)) for c in missing)
    whole, step, runs = step, narrowed(step, cells, missing), missing
    if len(missing) < len(cells):
        runs = planned_cells(step) or missing
    cut, cap, note = _cut(step, h), step.cap_s, ""
    if cut is not None:
        # the cells the cut run began: those of its folder's records
        tried = {_key(c) for c in cells if any(_same(c, r) for r in cut.records)}
        if {_key(c) for c in runs} == tried:  # the same cells: a longer cap, or one alone
            if min(2 * cut.cap_s, window_s) <= cut.cap_s and len(runs) > 1:
                step, runs = narrowed(whole, cells, [missing[0]]), [missing[0]]
                cap = int(window_s)
                note = f"its cells were cut at {cut.cap_s:.0f} s: the first alone, {cap} s"
            else:
                cap, note = _after_cut(step, cut, window_s)
        else:
            note = f"cut at {cut.cap_s:.0f} s before: only the cells it did not finish"
    fresh = [c for c in runs if not any(_same(c, p) for p in planned)]
    if not fresh:
        return None
    if cut is None and len(fresh) < len(cells):
        # the cells it runs, a share of the cap, and a process's start (10-15 s)
        cap = min(cap, math.ceil(cap * len(fresh) / len(cells)) + 15)
    return Todo(replace(step, cap_s=cap), tuple(fresh), stale, note)


def _after_cut(step: Step, cut: Cut | None, window_s: float) -> tuple[int, str]:
    """A step's cap where a window cut it running the same cells: doubled (they needed
    more than that cap), up to what a window holds; a cap no window can give more is
    planned as it is needed, and is left for later windows, said."""
    if cut is None or cut.cap_s < step.cap_s:
        return step.cap_s, ""
    if min(2 * cut.cap_s, window_s) > cut.cap_s:
        cap = int(min(2 * cut.cap_s, window_s))
        return cap, f"cut at {cut.cap_s:.0f} s running the same: cap {cap} s"
    return int(2 * cut.cap_s), f"cut at {cut.cap_s:.0f} s, a window's whole room: needs more"


def step_held(step: Step, device: str, h: Held) -> bool:
    return to_run(step, device, h, []) is None


def choose(all_steps: list[Step], device: str, budget_s: float, references: list[Path]) -> Next:
    """Today's code first, then the next part that is not held, then the later steps that
    fit the budget (the module's docstring)."""
    probe = [s for s in all_steps if s.part == "probe"]
    model = gpu_name(device)
    if model is None:
        return Next(probe + [s for s in all_steps if s.part == "first"],
                    f"part first: the next part is chosen by a GPU's model, and {device} names none")  # fmt: skip
    h = held(model, references)
    room = whole = budget_s - RESERVE_S - sum(s.cap_s for s in probe)
    pending = [s for s in all_steps if s.part != "probe"]
    first = _first_part(pending, device, h)
    if first is None:
        return Next(probe, f"nothing: the references of {model} ({', '.join(h.folders)}) "
                           "hold every part of the plan; name a --part to measure again")  # fmt: skip
    todo: list[Todo] = []
    planned: list[dict] = []
    left_out: list[str] = []

    def take(step: Step, only_stale: bool = False) -> None:
        nonlocal room
        if any(t.step.name == step.name for t in todo):
            return
        t = to_run(step, device, h, planned, window_s=whole)
        if t is None or (only_stale and not t.stale):
            return
        if t.step.cap_s > room:
            if not only_stale and step.name not in left_out:
                left_out.append(step.name)
            return
        todo.append(t)
        planned.extend(t.cells)
        room -= t.step.cap_s

    for step in pending:
        take(step, only_stale=True)
    for step in pending:
        if step.part == first:
            take(step)
    for step in pending:
        take(step)
    held_first = sum(step_held(s, device, h) for s in pending if s.part == first)
    line = _line(model, h, first, held_n=held_first, todo=todo, pending=pending, left_out=left_out)
    return Next(probe + [t.step for t in todo], line)


def _first_part(pending: list[Step], device: str, h: Held) -> str | None:
    """The first part of the plan with a step the references do not hold."""
    return next((s.part for s in pending if not step_held(s, device, h)), None)


def _line(
    model: str, h: Held, first: str, *, held_n: int, todo: list, pending: list, left_out: list
) -> str:
    """Which part is next and why, what else runs, and the caps against the budget."""
    total = sum(s.part == first for s in pending)
    ours = [t.step.name for t in todo if t.step.part == first]
    if not h.folders:
        why = f"no checked-in reference was measured on {model}; all its steps"
    else:
        by = ", ".join(h.folders)
        why = f"{by} hold{'s' * (len(h.folders) == 1)} {held_n} of its {total} steps"
        before = " and the parts before it" if first != PARTS[0] else ""
        why += f"{before}; runs {', '.join(ours) or 'none of them first'}"
    line = f"part {first}, next in the plan for {model}: {why}"
    stale = [t.step.name for t in todo if t.stale]
    if stale:
        line = f"today's code first: {', '.join(stale)} (cells measured by older code); " + line
    later = [t.step.name for t in todo if t.step.part != first and not t.stale]
    if later:
        line += f"; then, within the budget, {', '.join(later)}"
    notes = [f"{t.step.name}: {t.note}" for t in todo if t.note]
    if notes:
        line += f" ({'; '.join(notes)})"
    if left_out:
        shown = ", ".join(left_out[:3]) + (
            f" and {len(left_out) - 3} more" if len(left_out) > 3 else ""
        )
        line += f"; left for later windows, past the budget: {shown}"
    return line
