"""`xfbench acceptance`: the GPU acceptance run (docs/gpus.md).

    xfbench acceptance [--part first,gemm,... | --steps NAME,...]
                       [--device cuda:0] [--preset quick|paper|smoke] [--budget SECONDS]
                       [--out DIR] [--archive FILE.tar.gz] [--pack DIR] [--list]

Runs the probe and then the chosen steps (steps.py), each under its own time-out and all
under --budget seconds; writes each step's log, the suites' JSON and the sweeps' results
folder under --out, then summary.md there, prints the summary, and packs --out into
--archive when asked. --pack DIR keeps DIR to what a lent GPU machine brings back
(returns.py), rewritten after every step. Exit status: 0 when every step passed, 1 when
any did not, 2 for a bad option, 130 when interrupted (the summary and archive of what ran
are still written).
"""

from __future__ import annotations

import argparse
import datetime
import socket
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from xfbench import command_line
from xfbench.acceptance import plan as plan_next
from xfbench.acceptance import returns
from xfbench.acceptance.run import RESERVE_S, run_steps
from xfbench.acceptance.steps import BUDGET_S, PRESETS, chosen, steps
from xfbench.acceptance.steps import parts as plan_parts
from xfbench.acceptance.summary import summary
from xfbench.errors import UsageError
from xfbench.harness.selection import (
    normalize_device,
    option_list,
    present_devices,
)


def parser() -> argparse.ArgumentParser:
    p = command_line.ArgumentParser(prog="xfbench acceptance", description=__doc__.splitlines()[0])
    p.add_argument(
        "--part",
        type=command_line.WORD,
        help=f"comma-separated parts of {', '.join(plan_parts())}, or next: the first part the "
        "checked-in references of this GPU model do not hold, then what fits the budget "
        "(default: first)",
    )
    word = command_line.WORD
    p.add_argument(
        "--steps", type=word, help="comma-separated step names instead of parts (--list names them)"
    )
    p.add_argument(
        "--device",
        default="cuda:0",
        type=word,
        help="the device every step measures (default cuda:0)",
    )
    p.add_argument(
        "--preset", default="quick", type=word, help=f"one of {', '.join(PRESETS)} (default quick)"
    )
    p.add_argument(
        "--budget",
        type=command_line.number_kind("a number of seconds"),
        help=f"seconds for the whole run (default {BUDGET_S}: one call of a lent GPU)",
    )
    p.add_argument(
        "--out",
        type=command_line.OUTPUT_FOLDER,
        help="folder for everything it writes (default results/acceptance-DATE-HOST)",
    )
    p.add_argument(
        "--archive",
        type=command_line.OUTPUT_FILE,
        help="pack the --out folder into this .tar.gz at the end",
    )
    p.add_argument(
        "--pack",
        type=command_line.OUTPUT_FOLDER,
        help="after every step, write the summary so far and an archive of --out into this "
        "folder, within the limits of what a lent GPU machine brings back (docs/gpus.md)",
    )
    p.add_argument(
        "--list", action="store_true", help="print the steps and their commands, run nothing"
    )
    return p


@dataclass(frozen=True)
class Plan:
    """What the command line asks for, checked: the steps, where they go, the budget."""

    device: str
    out: Path
    todo: list
    budget: float
    pack: Path | None
    why: str = ""  # --part next: which part and why


def _plan(args) -> Plan:
    """The checked command line (UsageError: one line), every output checked before the
    first step rather than after the last."""
    device = normalize_device(args.device)
    if args.preset not in PRESETS:
        raise UsageError(f"unknown --preset {args.preset!r}; valid: {', '.join(PRESETS)}")
    out = Path(args.out or f"results/acceptance-{datetime.date.today()}-{socket.gethostname()}")
    everything = steps(device, args.preset, out.resolve())
    parts = option_list("part", args.part) or ["first"]
    if "next" in parts and parts != ["next"]:
        raise UsageError("--part next chooses the parts itself: give it alone")
    unknown = [p for p in parts if p not in plan_parts() and p != "next"]
    if unknown:
        raise UsageError(f"unknown --part {unknown[0]!r}; valid: {', '.join(plan_parts())}")
    names = option_list("steps", args.steps)
    budget = command_line.number("--budget", args.budget or BUDGET_S, what="a number of seconds")
    if device == "cpu" and not args.budget:  # the rehearsal: the CPU's own caps, all of them
        budget = max(budget, sum(s.cap_s for s in everything if s.part in ("probe", "first")))
        budget += RESERVE_S
    known = [s.name for s in everything]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown step {unknown[0]!r}; valid: {', '.join(known)}")
    pack = Path(args.pack).resolve() if args.pack else None
    if pack and pack.is_relative_to(out.resolve()):
        raise UsageError(f"--pack {args.pack} is inside --out {out}: it would pack itself")
    if not args.list:
        command_line.output_path("--out", str(out), folder=True)
        command_line.output_path("--pack", args.pack, folder=True)
        command_line.output_path("--archive", args.archive)
        if device not in present_devices():
            raise UsageError(
                f"device {device} is not present; this machine has: {', '.join(present_devices())}"
            )
    if parts == ["next"] and not names:
        upcoming = _next(everything, device, budget)
        return Plan(
            device=device,
            out=out,
            todo=upcoming.steps,
            budget=budget,
            pack=pack,
            why=upcoming.line,
        )
    todo = chosen(everything, parts, names)
    return Plan(device=device, out=out, todo=todo, budget=budget, pack=pack)


def _next(everything: list, device: str, budget: float) -> plan_next.Next:
    """--part next: the plan's next steps for this GPU model; the first part, saying why,
    when the references cannot be read (a window is never lost to its choice)."""
    from xfbench.report.score import references

    try:
        return plan_next.choose(everything, device, budget, references())
    except Exception as e:
        first = chosen(everything, ["first"], None)
        return plan_next.Next(first, f"part first: the next part could not be chosen ({e})")


def _print_steps(todo: list, budget: float) -> None:
    """--list: each step with its part, time-out and command, and the caps against the budget."""
    for s in todo:
        print(f"{s.name} [{s.part}, time-out {s.cap_s} s]: {s.what}\n  {' '.join(s.argv)}")
    caps = sum(s.cap_s for s in todo)
    print(
        f"caps: {caps} s planned against the budget's {budget:.0f} s "
        f"({RESERVE_S} s of it kept for the summary and the archive)"
    )


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            args = parser().parse_args(argv)
        except SystemExit as e:  # --help
            return 2 if e.code else 0
        plan = _plan(args)
    except UsageError as e:
        print(f"xfbench acceptance: {e}", file=sys.stderr)
        return 2
    device, out, todo, pack = plan.device, plan.out, plan.todo, plan.pack
    args.budget = plan.budget
    if plan.why:
        print(f"xfbench acceptance: {plan.why}")
    if args.list:
        _print_steps(todo, args.budget)
        return 0
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"xfbench acceptance: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    caps = " (the CPU's rehearsal caps: each step's cpu_cap_s)" if device == "cpu" else ""
    print(
        f"xfbench acceptance: {len(todo)} steps on {device}, budget {args.budget:.0f} s{caps}, "
        f"into {out}"
    )
    kept = [""]

    def keep(outcomes) -> None:
        """The summary so far, in --out and (--pack) in what comes back, after each step."""
        kept[0] = summary(outcomes, out)
        (out / "summary.md").write_text(kept[0] + "\n")
        if pack:
            returns.pack(out, pack, kept[0])

    outcomes = run_steps(todo, args.budget, out, after=keep)
    print("\n" + kept[0])
    if args.archive:
        with tarfile.open(args.archive, "w:gz") as tar:
            tar.add(out, arcname=out.name)
        print(f"\nxfbench acceptance: everything is in {args.archive}")
    if any(o.status == "interrupted" for o in outcomes):
        return 130
    return 0 if all(o.status == "passed" for o in outcomes) else 1
