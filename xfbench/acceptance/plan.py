"""What a GPU window runs next (`xfbench acceptance --part next`, gpu/window.sh's default):
the first part of the plan (steps.PARTS, docs/gpus.md's order) that the checked-in
references of this GPU model do not yet hold, then the next parts' steps while their caps
fit the budget. A reference is of this model when its cells ran on a device of exactly
this name (NVIDIA H100 80GB HBM3), as scoring matches them (report/score.py).

A reference holds a step when:
- a sweep (`xfbench run`): every cell the runner plans for it has a record there,
  measured or skipped with its reason; a cell that failed or was cut is not held, so a
  part with failed cells counts as measured only for the cells that passed;
- the roofs: its roofs.json has this device's roofs;
- a pytest step (the GEMM, the all-reduce, DDP, the equivalence checks, the GPU tests):
  the window's steps.json, kept beside the cells (acceptance/reference.py), says it passed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from xfbench.acceptance.run import RESERVE_S
from xfbench.acceptance.steps import PARTS, Step
from xfbench.errors import UsageError


@dataclass(frozen=True)
class Held:
    """What the references of one GPU model hold: records of cells, roofs, passed steps."""

    folders: tuple[str, ...]  # the references, by name
    records: tuple[dict, ...]  # each cell's fields and status
    roofs: frozenset[str]  # devices whose roofs were measured
    passed: frozenset[str]  # steps a window's steps.json says passed


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

    folders, records, roofs, passed = [], [], set(), set()
    for path in references:
        try:
            kind = score.device_kind(score.load_reference(path))
        except Exception:  # a reference that cannot be read holds nothing here
            continue
        if kind != model:
            continue
        folders.append(path.name)
        for run in _documents(path):
            if (run / "merged.json").is_file():
                records += _records(json.loads((run / "merged.json").read_text()))
            if (run / "roofs.json").is_file():
                kept = json.loads((run / "roofs.json").read_text())
                roofs |= {k for k, v in kept.items() if "memory_bandwidth_gbps" in v}
            if (run / "steps.json").is_file():
                done = json.loads((run / "steps.json").read_text())
                passed |= {o["step"] for o in done if o.get("status") == "passed"}
    return Held(tuple(folders), tuple(records), frozenset(roofs), frozenset(passed))


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


def _has(cell: dict, records: tuple[dict, ...]) -> bool:
    """A record of this cell, measured or skipped with its reason: the same fields but the
    host's thread count (a GPU cell's host may have other cores)."""
    return any(
        r.get("status") in ("ok", "skipped")
        and all(r.get(k) == v for k, v in cell.items() if k != "threads")
        for r in records
    )


def step_held(step: Step, device: str, h: Held) -> bool:
    if step.name in h.passed:
        return True
    if step.name.endswith("roofs"):
        return device in h.roofs
    try:
        cells = planned_cells(step)
    except UsageError:  # a sweep this machine cannot plan is not known to be held
        return False
    return bool(cells) and all(_has(c, h.records) for c in cells)


def choose(all_steps: list[Step], device: str, budget_s: float, references: list[Path]) -> Next:
    """The next part's steps that are not held, then the later parts' while caps fit."""
    probe = [s for s in all_steps if s.part == "probe"]
    model = gpu_name(device)
    if model is None:
        return Next(probe + [s for s in all_steps if s.part == "first"],
                    f"part first: the next part is chosen by a GPU's model, and {device} names none")  # fmt: skip
    h = held(model, references)
    room = budget_s - RESERVE_S - sum(s.cap_s for s in probe)
    todo, first_part = [], None
    for part in PARTS:
        for step in (s for s in all_steps if s.part == part):
            if step_held(step, device, h):
                continue
            if first_part is None:
                first_part = part
            elif step.part != first_part and step.cap_s > room:
                break
            todo.append(step)
            room -= step.cap_s
        else:
            continue
        break
    if first_part is None:
        return Next(probe, f"nothing: the references of {model} ({', '.join(h.folders)}) "
                           "hold every part of the plan; name a --part to measure again")  # fmt: skip
    ours = [s.name for s in todo if s.part == first_part]
    total = sum(s.part == first_part for s in all_steps)
    if not h.folders:
        why = f"no checked-in reference was measured on {model}; all its steps"
    else:
        by = ", ".join(h.folders)
        why = f"{by} hold{'s' * (len(h.folders) == 1)} {total - len(ours)} of its {total} steps"
        before = " and the parts before it" if first_part != PARTS[0] else ""
        why += f"{before}; runs {', '.join(ours)}"
    line = f"part {first_part}, next in the plan for {model}: {why}"
    later = [s.name for s in todo if s.part != first_part]
    if later:
        line += f"; then, within the budget, {', '.join(later)}"
    return Next(probe + todo, line)
