"""`xfbench reference`: what GPU windows brought back, made checked-in references.

    xfbench reference BACK [BACK ...] [--into DIR] [--commit SHA]

BACK is the folder a window's $OUT came back in (acceptance.tar.gz, summary.md and
console.log: docs/gpus.md). For each, in the order given, the window's part (that of its
first step after the probe) and DIR/<date>-<gpu>/<part>/ (DIR: the package's references,
xfbench/report/references) gets:
- merged.json: the cells of the window's sweeps as the runner merges them (a sweep cut at
  its cap leaves in cells/ what its merged.json lacks); a cell the window planned and did
  not finish as a failure naming its step's outcome; the records of its pytest steps (the
  GEMM, the equivalence checks, the all-reduce, DDP);
- selection.json: the selection of each sweep the window ran, made true to the cells the
  folder holds of it (measured or failed): its lists are its cells' values (threads as they
  recorded them, batch sizes as numbers), split where one list would name a cell the folder
  has no record of (one kept in another part's folder);
- roofs.json where the window measured the roofs; gpu-tests.xml where it ran the GPU tests;
- steps.json (each step's outcome) and window.json (commit, date, GPU, its first line).
A window of a part already there goes to <part>-2 (then -3, ...); the same window again
changes nothing. DIR/<date>-<gpu>/README.md is then written anew from its part folders.
Exit status: 0, or 2 with one line for a BACK that cannot be read.
"""

from __future__ import annotations

import datetime
import json
import re
import sys
import tarfile
from collections import Counter
from dataclasses import replace
from pathlib import Path, PurePosixPath

from xfbench import command_line
from xfbench.acceptance.plan import sweep_plan
from xfbench.acceptance.steps import Step, steps
from xfbench.errors import UsageError

ARCHIVE = "acceptance.tar.gz"


class Window:
    """One window's archive, read: its files by their path inside its --out folder."""

    def __init__(self, back: Path):
        path = back / ARCHIVE if back.is_dir() else back
        try:
            tar = tarfile.open(path, "r:gz")
        except (OSError, tarfile.TarError) as e:
            raise UsageError(f"{path}: not a window's archive ({e})") from None
        self.files: dict[str, bytes] = {}
        self.mtimes: dict[str, float] = {}
        with tar:
            for m in tar.getmembers():
                if m.isfile():
                    inside = str(PurePosixPath(*PurePosixPath(m.name).parts[1:]))
                    self.files[inside] = tar.extractfile(m).read()
                    self.mtimes[inside] = m.mtime
        if "steps.json" not in self.files:
            raise UsageError(f"{path}: no steps.json inside: not what a window brings back")
        self.source = path
        console = back / "console.log" if back.is_dir() else None
        self.first_line, self.commands = "", {}
        if console and console.is_file():
            lines = console.read_text(errors="replace").splitlines()
            self.first_line = (lines or [""])[0]
            # "=== step (what; time-out N s)" then "$ command": the commands of a window
            # whose steps.json predates their being kept there
            for head, command in zip(lines, lines[1:]):
                found = re.match(r"=== (\S+) \(", head)
                if found and command.startswith("$ "):
                    self.commands[found.group(1)] = tuple(command[2:].split())

    def json(self, name: str):
        return json.loads(self.files[name]) if name in self.files else None

    def docs(self, folder: str) -> list[dict]:
        return [
            json.loads(data)
            for name, data in sorted(self.files.items())
            if name.startswith(folder) and name.endswith(".json")
        ]


def same_cell(planned: dict, record: dict) -> bool:
    """The same cell, but for the host's thread count (a GPU cell's host has its own)."""
    return all(record.get(k) == v for k, v in planned.items() if k != "threads")


def not_finished(cell: dict, step: str, outcome: dict) -> dict:
    """The failure record of a planned cell its step ended before it had a record (cut at
    its cap, or failed), naming the step's outcome."""
    from xfbench import records

    why = outcome["status"] + (f": {outcome['reason']}" if outcome.get("reason") else "")
    return {**records.header("failure"), "cell": cell,
            "status": "timeout" if outcome["status"] == "timeout" else "failed",
            "reason": f"not finished: its step {step} {why}", "output_tail": ""}  # fmt: skip


# A selection's lists, each by the cell field it lists
LISTS = {"frameworks": "framework", "networks": "network", "modes": "mode",
         "precisions": "precision", "devices": "device", "threads": "threads",
         "tasks": "task", "batch_sizes": "batch_size"}  # fmt: skip


def _listed(cell: dict) -> dict:
    """A cell's values of a selection's lists (lengths as the generation suite writes them)."""
    out = {key: cell.get(field) for key, field in LISTS.items()}
    if cell.get("prompt_tokens") is not None:
        out["lengths"] = f"{cell['prompt_tokens']}/{cell.get('new_tokens')}"
    return out


def true_selections(planned: dict, cells: list[dict]) -> list[dict]:
    """The selection a sweep planned, made true to the cells a folder holds of it (their
    fields, measured or failed): one a (framework, mode, precision, device, threads, task,
    lengths) of its cells, each list the values its cells have, in the plan's order. Only
    networks and batch sizes stay lists of several values, and a selection whose networks
    and batch sizes are not all paired among its cells is split by network, so that none
    names a cell the folder has no record of."""
    keys = [k for k in (*LISTS, "lengths") if k in planned]
    apart = [k for k in keys if k not in ("networks", "batch_sizes")]
    groups: dict[tuple, list[dict]] = {}
    for cell in map(_listed, cells):
        groups.setdefault(tuple(cell.get(k) for k in apart), []).append(cell)
    out = []
    for group in groups.values():
        pairs = {(c["networks"], c["batch_sizes"]) for c in group}
        networks = {n for n, _ in pairs}
        sizes = {b for _, b in pairs}
        whole = "batch_sizes" not in planned or len(pairs) == len(networks) * len(sizes)
        for network in [None] if whole else sorted(networks):
            mine = [c for c in group if network is None or c["networks"] == network]
            out.append({k: _values(planned[k], mine, k) if k in keys else v
                        for k, v in planned.items()})  # fmt: skip
    return out


def _values(planned, cells: list[dict], key: str) -> list:
    """The values cells have of one list, in the plan's order, then any the plan had not."""
    found = []
    for c in cells:
        if c.get(key) not in found:
            found.append(c.get(key))
    known = planned if isinstance(planned, list) else []
    new = [v for v in found if v not in known]
    # numbers by value (batch sizes, thread counts), then the rest by name
    return [v for v in known if v in found] + sorted(
        new, key=lambda v: (not isinstance(v, int), v if isinstance(v, int) else str(v))
    )


class Made:
    """What one window adds to a reference: its documents, built from the archive."""

    def __init__(self, window: Window, commit: str | None):
        self.window = window
        self.outcomes = window.json("steps.json")
        probe = window.json("probe.json") or {}
        self.gpu = ((probe.get("machine") or {}).get("gpus") or [{}])[0].get("name")
        cells = window.docs("results/cells/")
        merged = window.json("results/merged.json") or (cells[0] if cells else {})
        self.device, preset = self._where(cells)
        plan = {s.name: s for s in steps(self.device, preset, Path("acceptance"))}
        ran = [self._as_run(o, plan) for o in self.outcomes if o["step"] in plan]
        self.part = next((s.part for s in ran if s.part != "probe"), "probe")
        self.gpu = self.gpu or next((c.get("device_name") for c in self._records(cells)), None)
        if not self.gpu:
            raise UsageError(f"{window.source}: no GPU named in its probe or its cells")
        stamp = window.mtimes["steps.json"]
        self.date = datetime.datetime.fromtimestamp(stamp, datetime.UTC).date().isoformat()
        recorded = merged.get("commit_info") or {}
        self.commit = commit or (recorded.get("id") or "unknown")[:7] + (
            " with uncommitted changes" if recorded.get("dirty") else ""
        )
        # a GPU cell's host threads as the window's cells recorded them (a cell planned
        # here is planned at this host's count)
        counts = Counter(r.get("threads") for r in self._records(cells) if r.get("threads"))
        self.threads = counts.most_common(1)[0][0] if counts else None
        self.merged = self._merged(merged, cells, ran)
        self.roofs: dict = {}  # set by keep(): those this reference does not hold yet

    def _as_run(self, outcome: dict, plan: dict[str, Step]) -> Step:
        """The step as the window ran it: its command from steps.json or the console, else
        as the plan has it now."""
        argv = outcome.get("argv") or self.window.commands.get(outcome["step"])
        step = plan[outcome["step"]]
        return replace(step, argv=tuple(argv)) if argv else step

    @staticmethod
    def _records(cells: list[dict]) -> list[dict]:
        return [b.get("extra_info", {}) for doc in cells for b in doc.get("benchmarks", [])]

    def _where(self, cells: list[dict]) -> tuple[str, str]:
        """The device and preset the window's cells ran at (the window's own options)."""
        found = self._records(cells)
        device = Counter(r.get("device") for r in found if r.get("device")).most_common(1)
        preset = Counter(r.get("preset") for r in found if r.get("preset")).most_common(1)
        return (device[0][0] if device else "cuda:0"), (preset[0][0] if preset else "quick")

    def _merged(self, merged: dict, cells: list[dict], ran: list[Step]) -> dict:
        """The window's records: each sweep's planned cells from the records in cells/ and
        failed/ (a sweep cut at its cap left there what its merged.json lacks), a cell
        with neither a failure naming its step's outcome; the pytest steps' own."""
        outcome = {o["step"]: o for o in self.outcomes}
        benchmarks, failures = [], []
        self.sweeps: list[tuple[dict, list[dict]]] = []  # each sweep's selection and cells
        done = [b for doc in cells for b in doc.get("benchmarks", [])]
        failed = self.window.docs("results/failed/")
        for step in ran:
            if outcome[step.name]["status"] == "skipped":  # never started: nothing to keep
                continue
            made = sweep_plan(step)
            if made is None:  # a pytest step: its own output, where it wrote one
                benchmarks, failures = self._pytest_step(step, benchmarks, failures)
                continue
            planned = [c.as_dict() for c in made.cells]
            self.sweeps.append((made.selection, planned))
            for cell in planned:
                hit = [b for b in done if same_cell(cell, b.get("extra_info", {}))]
                lost = [f for f in failed if same_cell(cell, f.get("cell") or {})]
                if hit:  # once, though two steps of the window plan the same cell
                    benchmarks += [b for b in hit if not any(b is k for k in benchmarks)]
                elif lost:
                    failures += [f for f in lost if not any(f is k for k in failures)]
                elif not any(same_cell(cell, f.get("cell") or {}) for f in failures):
                    if self.threads and cell.get("device") != "cpu":
                        cell = {**cell, "threads": self.threads}
                    failures.append(not_finished(cell, step.name, outcome[step.name]))
        xf = dict(merged.get("xfbench") or {})
        xf["failures"] = failures
        commit_info = dict(merged.get("commit_info") or {})
        if commit_info.get("id") and not self.commit.startswith(commit_info["id"][:7]):
            commit_info["recorded_id"] = commit_info["id"]  # the device copy's git said so
        commit_info["id"] = self.commit.split()[0]
        return {**merged, "commit_info": commit_info, "benchmarks": benchmarks, "xfbench": xf}

    def _pytest_step(self, step: Step, benchmarks: list, failures: list):
        for out in step.outputs:
            doc = self.window.json(out.name) if out.suffix == ".json" else None
            if doc:
                benchmarks = benchmarks + doc.get("benchmarks", [])
                failures = failures + (doc.get("xfbench") or {}).get("failures", [])
        return benchmarks, failures

    def selections(self) -> list[dict]:
        """Each sweep's selection, true to the cells this folder holds of it (a sweep none
        of whose cells is here has none)."""
        here = [b.get("extra_info", {}) for b in self.merged["benchmarks"]]
        here += [f.get("cell") or {} for f in self.merged["xfbench"]["failures"]]
        out = []
        for selection, planned in self.sweeps:
            mine = {id(r): r for cell in planned for r in here if same_cell(cell, r)}
            out += true_selections(selection, list(mine.values()))
        return out

    def files(self) -> dict[str, bytes]:
        """The part folder's files: a window that measured nothing has no merged.json (the
        report reads a runner folder by it) and keeps its steps' outcomes only."""
        out = {
            "steps.json": _dumps(self.outcomes),
            "window.json": _dumps(
                {
                    "commit": self.commit,
                    "date": self.date,
                    "gpu": self.gpu,
                    "part": self.part,
                    "first_line": self.window.first_line,
                    "archive": self.window.source.name,
                }
            ),  # fmt: skip
        }
        if self.merged["benchmarks"] or self.merged["xfbench"]["failures"]:
            selections = self.selections()
            xf = {**self.merged["xfbench"], "selection": selections[0] if selections else {},
                  "selections": selections}  # fmt: skip
            out["merged.json"] = _dumps({**self.merged, "xfbench": xf})
            out["selection.json"] = _dumps(selections)
        names = {o["step"] for o in self.outcomes}
        if self.roofs:
            out["roofs.json"] = _dumps(self.roofs)
        if any(n.endswith("gpu-tests") for n in names) and "gpu-tests.xml" in self.window.files:
            out["gpu-tests.xml"] = self.window.files["gpu-tests.xml"]
        return out


def _dumps(doc) -> bytes:
    return (json.dumps(doc, indent=1) + "\n").encode()


def gpu_folder_name(date: str, gpu: str) -> str:
    """<date>-<gpu>: the model's id in published.toml (h100-sxm), else its name in words."""
    from xfbench.published import gpu_for

    known = gpu_for(gpu)
    slug = known.id if known else re.sub(r"^nvidia ", "", gpu.lower())
    return f"{date}-{re.sub(r'[^a-z0-9]+', '-', slug).strip('-')}"


def _measurement(b: dict) -> str:
    """One measurement, whichever document holds it: its test and its timed rounds."""
    stats = b.get("stats") or {}
    return json.dumps([b.get("fullname"), stats.get("data") or stats.get("median")])


def _without_kept(made: Made, folder: Path) -> None:
    """A window resumed into an earlier window's folder kept that window's cells (the
    runner measures a cell once): those already in this reference are not added again,
    which would count their rounds twice."""
    kept = set()
    for merged in folder.glob("*/merged.json"):
        kept |= {_measurement(b) for b in json.loads(merged.read_text()).get("benchmarks", [])}
    made.merged["benchmarks"] = [
        b for b in made.merged["benchmarks"] if _measurement(b) not in kept
    ]
    # the roofs likewise: the sweeps' folder's, where this reference does not hold them yet
    roofs = made.window.json("results/roofs.json") or {}
    held = [json.loads(p.read_text()) for p in folder.glob("*/roofs.json")]
    made.roofs = {
        k: v for k, v in roofs.items() if "error" not in v and all(h.get(k) != v for h in held)
    }


def keep(made: Made, into: Path) -> tuple[Path, bool]:
    """The window's part folder under into (new, or the one already holding it)."""
    folder = into / gpu_folder_name(made.date, made.gpu)
    files = made.files()
    n = 1
    while True:
        part = folder / (made.part if n == 1 else f"{made.part}-{n}")
        if not part.exists():
            break
        if (part / "steps.json").is_file() and (part / "steps.json").read_bytes() == files[
            "steps.json"
        ]:
            return part, False
        n += 1
    _without_kept(made, folder)
    files = made.files()
    part.mkdir(parents=True)
    for name, data in files.items():
        (part / name).write_bytes(data)
    return part, True


def readme(folder: Path) -> str:
    """The reference folder's README, from its part folders' files."""
    parts = sorted(p for p in folder.iterdir() if (p / "window.json").is_file())
    windows = [json.loads((p / "window.json").read_text()) for p in parts]
    gpu = windows[0]["gpu"]
    lines = [f"# {gpu}, {folder.name[:10]}", ""]
    lines += [
        f"Made by `xfbench reference` from what GPU windows brought back (docs/gpus.md), one "
        f"folder a window; together one reference, which a later run on an {gpu} is scored "
        "against (a run on another GPU model never is). Each folder holds the window's "
        "cells (`merged.json`), its sweeps' selections, its steps' outcomes (`steps.json`) "
        "and, where measured, the GPU's roofs.",
        "",
    ]
    lines += _machine_lines(next((p for p in parts if (p / "merged.json").is_file()), None))
    for part, window in zip(parts, windows):
        lines += ["", *_part_lines(part, window)]
    for hand in sorted(p for p in folder.iterdir() if p.is_dir() and p not in parts):
        note = hand / "NOTE.md"
        lines += ["", f"## `{hand.name}`: assembled by hand, not by `xfbench reference`", ""]
        lines += [note.read_text().strip() if note.is_file() else "(no note)"]
    return "\n".join(lines) + "\n"


def _machine_lines(part: Path | None) -> list[str]:
    if part is None:
        return ["No window of this folder measured a cell."]
    merged = json.loads((part / "merged.json").read_text())
    m = (merged.get("machine_info") or {}).get("xfbench") or {}
    gpus = m.get("gpus") or [{}]
    packages = ", ".join(f"{k} {v}" for k, v in sorted((m.get("packages") or {}).items()))
    return [
        f"Machine (the first window's that measured): {gpus[0].get('name', '?')}, driver "
        f"{gpus[0].get('driver', '?')}; host {m.get('cpu_model', '?')}, "
        f"{m.get('cores_logical', '?')} CPUs; Python {m.get('python', '?')}; {packages}."
    ]


def _part_lines(part: Path, window: dict) -> list[str]:
    outcomes = json.loads((part / "steps.json").read_text())
    merged_path = part / "merged.json"
    merged = json.loads(merged_path.read_text()) if merged_path.is_file() else {}
    failures = (merged.get("xfbench") or {}).get("failures", [])
    lines = [
        f"## `{part.name}`: part {window['part']}, {window['date']}, xfbench at {window['commit']}",
        "",
    ]
    if window.get("first_line"):
        lines += [f"The window's first line: `{window['first_line']}`", ""]
    lines += ["| step | status | s | reason |", "|---|---|---|---|"]
    lines += [
        f"| {o['step']} | {o['status']} | {o['seconds']:.0f} | {o.get('reason') or ''} |"
        for o in outcomes
    ]
    ok = sum(1 for b in merged.get("benchmarks", []))
    lines += ["", f"{ok} records measured, {len(failures)} cells not:"]
    for f in failures:
        c = f.get("cell") or {}
        what = " ".join(str(c[k]) for k in ("task", "framework", "network", "mode", "precision",
                                              "batch_size") if c.get(k) is not None)  # fmt: skip
        lines.append(f"- {f.get('status')}: {what}: {f.get('reason')}")
    if not failures:
        lines[-1] = lines[-1].replace(", 0 cells not:", "; no planned cell was left unfinished.")
    return lines


def write_readmes(folders) -> None:
    for folder in sorted(set(folders)):
        (folder / "README.md").write_text(readme(folder))


def main(argv: list[str] | None = None) -> int:
    from xfbench.report.score import REFERENCES

    p = command_line.ArgumentParser(prog="xfbench reference", description=__doc__.splitlines()[0])
    p.add_argument("back", nargs="+", type=command_line.PATH,
                   help="what a window brought back (its folder or archive)")  # fmt: skip
    p.add_argument("--into", default=str(REFERENCES), type=command_line.OUTPUT_FOLDER,
                   help="the references' folder")  # fmt: skip
    p.add_argument("--commit", type=command_line.TEXT,
                   help="the commit the window ran (default: its records')")  # fmt: skip
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    into = Path(args.into)
    try:
        made = [Made(Window(Path(b)), args.commit) for b in args.back]
    except (UsageError, OSError, ValueError) as e:
        print(f"xfbench reference: {e}", file=sys.stderr)
        return 2
    folders = set()
    for m in made:
        part, new = keep(m, into)
        folders.add(part.parent)
        print(f"{'made' if new else 'already there:'} {part}")
    write_readmes(folders)
    return 0


if __name__ == "__main__":
    sys.exit(main())
