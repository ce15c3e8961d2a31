"""The summary that ends an acceptance run: each step's outcome, then the figures the
run must reach beside the published ones, from what the steps wrote.

- each suite's own sections made from its step's output, where its report module gives
  them (`acceptance`, FromOutput: the GEMM suite's table, and CuPy over torch.matmul
  against its goal);
- each suite's sections read from the sweeps' results (`acceptance`, FromSweeps: the
  network suite's ResNet-50 training, images/s of every cell beside the published figure the
  report's anchors match to it);
- the sweeps, read as `xfbench report` reads them (its model, built once): cells
  measured, failed and skipped, the failures' one-line reasons; each suite's own table
  of its records (token generation, serving: the suite's terminal summary). A sweep cut
  at its cap gives the cells it wrote (read from cells/: it never merged) and a failure
  for each cell it planned and did not finish;
- the GPU's roofs the sweeps measured (device-to-device bandwidth, each type's matmul
  peak) beside its datasheet's;
- the equivalence checks on the device: each check's error, verified or (TF32) recorded;
- the GPU tests: passed, failed, skipped (their JUnit XML).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from xfbench.acceptance.run import Outcome
from xfbench.report import suites
from xfbench.report.load import Run, add_document, load
from xfbench.report.model import Report, build


def summary(outcomes: list[Outcome], out: Path) -> str:
    """The steps' table, then each section the outputs allow. A step's output that is
    missing leaves its section out; one that is empty, cut short or malformed gives its
    section as one line saying so: nothing a step wrote can end the run or lose the other
    sections."""
    parts = [_steps(outcomes)]
    sections = [
        _guarded("Machine", "probe.json", _machine, out),
        *(
            _guarded(title, made.file, made.section, out, read_output)
            for title, made in _from_outputs(suites.declared())
        ),
        *(_sweeps_sections(out) or [_missing("Sweeps", "results", outcomes, out)]),
        _guarded("Equivalence", "equivalence.json", _equivalence, out),
        _guarded("GPU tests", "gpu-tests.xml", _gpu_tests, out),
    ]
    said = {s.split("\n", 1)[0] for s in sections if s}
    missing = [
        _missing(title, source, outcomes, out)
        for title, source in _outputs(suites.declared())
        if f"## {title}" not in said
    ]
    return "\n\n".join(parts + [s for s in sections + missing if s])


def _outputs(declared) -> list[tuple[str, str]]:
    """(section, the file it reads) of each section a step's output makes."""
    own = [(title, made.file) for title, made in _from_outputs(declared)]
    return [("Machine", "probe.json"), *own, ("Equivalence", "equivalence.json"),
            ("GPU tests", "gpu-tests.xml")]  # fmt: skip


def _from_outputs(declared) -> list[tuple[str, suites.FromOutput]]:
    """(title, section) of each suite's section made from its step's output."""
    return [
        (title, made)
        for s in declared
        for title, made in s.hooks.acceptance.items()
        if isinstance(made, suites.FromOutput)
    ]


def _missing(title: str, source: str, outcomes: list[Outcome], out: Path) -> str:
    """A section whose file a step that ran should have written, and did not: one line
    (a step that did not run leaves its section out)."""
    from xfbench.acceptance.steps import steps

    if (out / source).exists():
        return ""
    writers = {
        s.name for s in steps("cuda:0", "quick", out) if source in {p.name for p in s.outputs}
    }
    ran = [o for o in outcomes if o.step in writers and o.status != "skipped"]
    if not ran:
        return ""
    o = ran[-1]
    return (
        f"## {title}\n\nmissing: {source}: its step {o.step} {o.status} without writing it "
        f"(logs/{o.step}.log)"
    )


class Unreadable(Exception):
    """A step's output that cannot be used, in one line naming it."""


def _guarded(title: str, source: str, make, *args) -> str:
    """make(*args), or its section as one line when what it reads cannot be used."""
    try:
        return make(*args)
    except Exception as e:  # any reader's failure: said in one line, never raised
        text = str(e) if isinstance(e, Unreadable) else f"{source}: {type(e).__name__}: {e}"
        return f"## {title}\n\nunreadable: {(text.splitlines() or [''])[0][:300]}"


def read_output(path: Path) -> dict:
    """A step's JSON output, or Unreadable saying whether it is empty, cut short or not
    JSON (a step killed while writing it, or one that wrote nothing)."""
    data = path.read_bytes()
    if not data.strip():
        raise Unreadable(f"{path.name} is empty (its step wrote nothing: see its log)")
    try:
        doc = json.loads(data)
    except ValueError as e:
        cut = "cut short" if len(data) and e.pos >= len(data.rstrip()) else "not JSON"
        raise Unreadable(f"{path.name} is {cut} ({e})") from None
    if not isinstance(doc, dict):
        raise Unreadable(f"{path.name} holds a {type(doc).__name__}, not a JSON object")
    return doc


def _machine(out: Path) -> str:
    """What the probe saw: the host, its GPUs and the packages that ran the steps."""
    path = out / "probe.json"
    if not path.exists():
        return ""
    m = read_output(path).get("machine", {})
    gpus = ", ".join(f"{g.get('name')} (driver {g.get('driver')})" for g in m.get("gpus", []))
    packages = ", ".join(f"{k} {v}" for k, v in sorted(m.get("packages", {}).items()))
    return (
        f"## Machine\n\n{m.get('cpu_model', '?')}, {m.get('cores_logical', '?')} CPUs; "
        f"{gpus or 'no GPU'}; Python {m.get('python', '?')}; {packages}"
    )


def _steps(outcomes: list[Outcome]) -> str:
    rows = [[o.step, o.status, f"{o.seconds:.0f}", o.reason] for o in outcomes]
    text = "## Steps\n\n" + tabulate(
        rows, headers=["step", "status", "s", "reason"], tablefmt="github"
    )
    for o in outcomes:
        if o.log_tail:
            text += f"\n\n{o.step}'s log ends (logs/{o.step}.log):\n\n```\n{o.log_tail}\n```"
    return text


def _sweeps_sections(out: Path) -> list[str]:
    """The sweeps' sections, from their results folder read once as the report reads it
    (no section when no sweep ran)."""
    folder = out / "results"
    if not folder.exists():
        return []
    try:
        run = load(folder)
        for failure in _unfinished(out):
            add_document(run, failure, f"{out.name}/steps.json")
        report = build([run])
    except Exception as e:  # LoadError, or a reader's own on a file cut short
        return [f"## Sweeps\n\nunreadable: {folder.name}/: {(str(e).splitlines() or [''])[0]}"]
    where = f"{folder.name}/"
    return [
        *(
            _guarded(title, where, made.section, run, report)
            for s in suites.declared()
            for title, made in s.hooks.acceptance.items()
            if isinstance(made, suites.FromSweeps)
        ),
        _guarded("Sweeps", where, _sweeps, run),
        *(_guarded(s.title, where, _suite_table, s, report) for s in suites.declared()),
        _guarded("GPU roofs", f"{where}roofs.json", _roofs, run, report),
    ]


def _unfinished(out: Path) -> list[dict]:
    """A failure record for each cell a sweep step ended before it had a record (cut at
    its cap): its cells planned from its command in steps.json, as `xfbench reference`
    plans them. A step that cannot be planned here gives none (its outcome says why)."""
    from xfbench.acceptance.plan import sweep_plan
    from xfbench.acceptance.reference import not_finished, same_cell
    from xfbench.acceptance.steps import Step
    from xfbench.runner.store import RunFolder

    try:
        outcomes = json.loads((out / "steps.json").read_text())
    except (OSError, ValueError):
        return []
    folder = RunFolder(out / "results")
    kept = [b.get("extra_info") or {} for r in folder.results() for b in r["benchmarks"]]
    kept += [f.get("cell") or {} for f in folder.failures()]
    lost = []
    for o in outcomes if isinstance(outcomes, list) else []:
        try:
            if o["status"] in ("passed", "skipped") or not o.get("argv"):
                continue
            made = sweep_plan(
                Step(name=o["step"], part="", cap_s=0, argv=tuple(o["argv"]), what="")
            )
        except Exception:  # any planner's failure: the step's outcome is in the table
            continue
        for cell in (c.as_dict() for c in made.cells) if made else ():
            if not any(same_cell(cell, k) for k in kept):
                lost.append(not_finished(cell, o["step"], o))
    return lost


def _sweeps(run: Run) -> str:
    cells = suites.cells(run)
    measured = [r for r in cells if r.ok]
    skipped = [r for r in cells if r.status == "skipped"]
    lost = [r for r in cells if not r.ok and r.status != "skipped"]
    lines = [
        "## Sweeps",
        "",
        f"{len(measured)} cells measured, {len(lost)} failed, {len(skipped)} skipped; "
        f"the report: xfbench report {run.path}",
    ]
    for r in lost:
        what = " ".join(
            str(v)
            for v in (r.task, r.framework, r.network, r.mode, r.precision, r.device, r.batch_size)
            if v
        )
        lines.append(f"- {r.status}: {what}: {r.reason}")
    reasons = Counter(r.reason for r in skipped)
    for reason, n in reasons.most_common():
        lines.append(f"- skipped ({n} cell{'s' * (n != 1)}): {reason}")
    lines += [f"- left out: {problem}" for problem in run.problems]
    return "\n".join(lines)


def _suite_table(suite: suites.SuiteReport, report: Report) -> str:
    """A suite's own records (token generation, serving...) in its own summary table."""
    found = [r for m in report.machines for r in m.of(suite.kind)]
    table = suite.summary_table(found) if found else None
    return f"## {suite.title}\n\n{table}" if table else ""


def _roofs(run: Run, report: Report) -> str:
    """Each GPU's measured roofs (the runner measures them before its cells) and, where
    xfbench/published.toml has its datasheet, the datasheet's and measured over datasheet."""
    from xfbench.published import gpu_for
    from xfbench.report.roofline import PEAK_TYPES, roofs

    def g(values) -> list[str]:
        return [f"{v:.4g}" if v else "" for v in values]

    rows = []
    for m in report.machines:
        for key, r in sorted(roofs(m).items()):
            if r["device"] == "cpu":
                continue
            measured = [r["bandwidth_gbps"], *(r["peaks_tflops"].get(t) for t in PEAK_TYPES)]
            rows.append([f"{key}: {r['device_name']}", "measured", *g(measured)])
            sheet = gpu_for(r["device_name"])
            if sheet:
                listed = [sheet.memory_gbps, *(sheet.peaks_tflops.get(t) for t in PEAK_TYPES)]
                rows.append([sheet.name, f"datasheet ({sheet.source})", *g(listed)])
                rows.append(
                    ["", "measured / datasheet"]
                    + [f"{a / b:.2f}" if a and b else "" for a, b in zip(measured, listed)]
                )
    broken = [p for p in run.problems if "roofs.json" in p]
    if broken:
        raise Unreadable(broken[0])
    if not rows:
        return ""
    headers = ["GPU", "from", "memory GB/s", *(f"{t} TFLOP/s" for t in PEAK_TYPES)]
    return "## GPU roofs\n\n" + tabulate(
        rows, headers=headers, tablefmt="github", disable_numparse=True
    )


def _equivalence(out: Path) -> str:
    path = out / "equivalence.json"
    if not path.exists():
        return ""
    doc = read_output(path)
    rows = []
    for b in doc.get("benchmarks", []):
        r = b.get("extra_info", {}).get("equivalence")
        if not r:
            continue
        verdict = (
            ("verified" if r.get("verified") else "NOT verified")
            if r.get("asserted", True)
            else "recorded"
        )
        rows.append(
            [r.get("network"), r.get("framework"), r.get("mode"), r.get("device", "cpu"), r.get("precision", "fp32"),
             r.get("check"), f"{r.get('max_rel_err', float('nan')):.2e}", f"{_bound(r):.0e}", verdict]
        )  # fmt: skip
    if not rows:
        return "## Equivalence\n\nno check gave a record"
    headers = [
        "network",
        "framework",
        "mode",
        "device",
        "precision",
        "check",
        "error",
        "tolerance",
        "",
    ]
    return "## Equivalence\n\n" + tabulate(
        rows, headers=headers, tablefmt="github", disable_numparse=True
    )


def _bound(r: dict) -> float:
    """The bound the check's error (max_rel_err) is held to: a training check's is the
    updated weights' (derived from a plain fp32 run), its `tolerance` the loss's."""
    return r.get("weights_tolerance", r.get("tolerance", float("nan")))


def _gpu_tests(out: Path) -> str:
    path = out / "gpu-tests.xml"
    if not path.exists():
        return ""
    if not path.read_bytes().strip():
        raise Unreadable(f"{path.name} is empty (its step wrote nothing: see its log)")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise Unreadable(f"{path.name} is not whole JUnit XML ({e})") from None
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return "## GPU tests\n\nno test suite in the JUnit XML"
    total = int(suite.get("tests", 0))
    failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    skipped = int(suite.get("skipped", 0))
    lines = [
        "## GPU tests",
        "",
        f"{total - failed - skipped} passed, {failed} failed, {skipped} skipped",
    ]
    for case in suite.iter("testcase"):
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            lines.append(
                f"- {case.get('name')}: {(bad.get('message') or '').splitlines()[0][:200] if bad.get('message') else ''}"
            )
    return "\n".join(lines)
