"""Reading results: runner folders and plain pytest-benchmark JSON files.

A RESULTS argument is either
  - a runner folder (results/<date>-<host>/): merged.json when it is readable (made
    again in memory where it lacks records of cells/ or failed/: a sweep killed before
    it merged), otherwise cells/*.json plus failed/*.json; a folder of plain JSON files
    is read file by file. Unreadable files in a folder are listed as problems and the
    rest is reported;
  - a plain file written by `pytest --benchmark-json=...`: it must be readable,
    otherwise the whole report stops with an error naming the file.

Each argument becomes one Run. The pytest-benchmark stats are the source of
truth for every time: the median of a cell is stats.median.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xfbench import records
from xfbench.machine import model_label
from xfbench.plugin import declared
from xfbench.records import number
from xfbench.report import suites
from xfbench.report.equivalence import equivalence_records
from xfbench.runner.store import RunFolder

FAILURE_STATUSES = ("failed", "timeout", "killed", "oom", "skipped")


class LoadError(Exception):
    """A results file or folder that cannot be used; the message names it."""


class NewerRecordError(LoadError):
    """A record of a kind or schema version this xfbench does not know: the whole report
    stops rather than guess, wherever the record is."""


def _kind(record: dict, where: str) -> str | None:
    declared()  # every suite's record kind, known once its plugin is imported
    try:
        return records.kind_of(record)
    except records.RecordError as e:
        raise NewerRecordError(f"{where}: {e}") from None


@dataclass
class Result:
    """One cell of one run: a timed benchmark entry or a failure record."""

    task: str
    network: str
    framework: str
    mode: str
    precision: str
    device: str
    device_name: str
    threads: int
    batch_size: int
    data: str
    scale: str
    status: str  # "ok" or one of FAILURE_STATUSES
    median: float | None = None  # seconds per mini-batch, from stats.median
    reason: str = ""
    info: dict[str, Any] = field(default_factory=dict)  # extra_info as written
    source: str = ""
    rounds: list[float] = field(default_factory=list)  # every timed round (stats.data)
    copies: int = 1  # processes run at once (xfbench run --copies); median: theirs
    copy_rounds: list[list[float]] = field(default_factory=list)  # each copy's rounds
    tokens: int | None = None  # a transformer's sequence length

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.median is not None

    @property
    def accelerator(self) -> bool:
        return self.device != "cpu"


def same_cell(r: Result) -> tuple:
    """What makes two results of any suite the same cell: measured twice by one machine,
    they are two groups of its runs (report/model.py); in two runs of a pooled reference,
    their rounds are pooled (report/score.py)."""
    return (
        r.task,
        r.network,
        r.framework,
        r.mode,
        r.precision,
        r.device_name,
        r.threads,
        r.batch_size,
        r.data,
        r.scale,
        r.copies,
        r.tokens,
    )


@dataclass
class Run:
    """Everything read from one RESULTS argument."""

    name: str  # the folder or file name, to tell runs apart
    path: str
    machine: dict[str, Any]  # see machine_of()
    # every record read, timed or failed, by its kind (report/suites.py): as its suite's
    # reader made it (a dict, or the network suite's Result), the equivalence checks'
    # under "equivalence"
    records: dict[str, list[Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # files or entries left out, and why
    files: int = 0  # files read

    @property
    def empty(self) -> bool:
        return not any(self.records.values())

    def of(self, *kinds: str) -> list[Any]:
        """The records of these kinds (report/suites.py), their failed cells among them,
        in the order they were read."""
        return [r for kind, found in self.records.items() if kind in kinds for r in found]


def read_json(path: Path) -> dict:
    """A pytest-benchmark JSON document, or LoadError saying what is wrong with the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LoadError(f"{path}: cannot read: {e}") from None
    return parse_json(text, str(path))


def parse_json(text: str | bytes, where: str) -> dict:
    """A JSON document's object, or LoadError naming where it came from."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise LoadError(f"{where}: cannot read: {e}") from None
    if not text.strip():
        raise LoadError(f"{where}: empty file")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise LoadError(
            f"{where}: malformed or truncated JSON (line {e.lineno}, column {e.colno}: {e.msg})"
        ) from None
    if not isinstance(doc, dict):
        raise LoadError(
            f"{where}: not a pytest-benchmark JSON file (top level is a "
            f"{type(doc).__name__}, not an object)"
        )
    return doc


def _is_benchmark_doc(doc: dict) -> bool:
    return isinstance(doc.get("benchmarks"), list)


def _is_failure_doc(doc: dict) -> bool:
    return "benchmarks" not in doc and _kind(doc, "a record") == "failure"


def _label(host: str, cpu_model: str, gpus: list[str]) -> str:
    """host: CPU + GPUs (2x of a model where there are two)."""
    label = f"{host}: {cpu_model}"
    if gpus:
        names = sorted(set(gpus))
        label += " + " + ", ".join(
            f"{gpus.count(n)}x {n}" if gpus.count(n) > 1 else n for n in names
        )
    return label


def machine_of(doc: dict) -> dict[str, Any]:
    """Host, CPU model and GPU names of the machine that wrote a document.

    The label (host: CPU + GPUs) names the machine in column groups, the reference
    choice and the prices file."""
    info = doc.get("machine_info") if isinstance(doc.get("machine_info"), dict) else {}
    desc = info.get("xfbench")
    if not isinstance(desc, dict):
        top = doc.get("xfbench")
        desc = top.get("machine") if isinstance(top, dict) else None
    desc = desc if isinstance(desc, dict) else {}
    cpu = info.get("cpu") if isinstance(info.get("cpu"), dict) else {}
    host = str(info.get("node") or "unknown-host")
    cpu_model = str(
        desc.get("cpu_model")
        or cpu.get("brand_raw")
        or info.get("processor")
        or info.get("machine")
        or "unknown CPU"
    )
    # files written before the label carried them: family and model from either description
    ids = desc.get("cpu") if isinstance(desc.get("cpu"), dict) else {}
    cpu_model = model_label(
        cpu_model,
        ids.get("family", cpu.get("family")),
        ids.get("model_number", cpu.get("model")),
    )
    gpus = [str(g.get("name", "?")) for g in desc.get("gpus") or [] if isinstance(g, dict)]
    return {
        "label": _label(host, cpu_model, gpus),
        "host": host,
        "cpu_model": cpu_model,
        "gpus": gpus,
        "cores_physical": desc.get("cores_physical"),
        "cores_logical": desc.get("cores_logical"),
        "topology": desc.get("topology") if isinstance(desc.get("topology"), dict) else {},
        "memory_bytes": desc.get("memory_bytes"),
        "os": desc.get("os"),
        "packages": desc.get("packages") or {},
        "isa": _isa_of(desc, cpu),
        "software": _software(desc),
        "commit": _commit(doc.get("commit_info")),
        # the CPU's measured roofs per thread count (roofline/roofs.py), when the run had them
        "roofs": desc.get("roofs") if isinstance(desc.get("roofs"), dict) else {},
    }


def _software(desc: dict) -> str:
    """Library versions, then the GPU driver and the CUDA and cuDNN the frameworks
    reported (their runtimes), as one line."""
    packages = desc.get("packages") if isinstance(desc.get("packages"), dict) else {}
    parts = [f"{k} {v}" for k, v in packages.items() if k not in ("pytest", "pytest-benchmark")]
    gpus = [g for g in desc.get("gpus") or [] if isinstance(g, dict)]
    drivers = sorted({str(g["driver"]) for g in gpus if g.get("driver")})
    if drivers:
        parts.append("driver " + ", ".join(drivers))
    runtimes = desc.get("runtimes") if isinstance(desc.get("runtimes"), dict) else {}
    seen = set()
    for versions in runtimes.values():
        for k, v in versions.items() if isinstance(versions, dict) else ():
            if any(w in k.lower() for w in ("cuda", "cudnn", "nccl")) and (k, v) not in seen:
                seen.add((k, v))
                parts.append(f"{k} {v}")
    return ", ".join(parts)


def _commit(info) -> str:
    """The suite's commit that measured, as pytest-benchmark records it."""
    if not isinstance(info, dict) or not info.get("id"):
        return ""
    return str(info["id"])[:10] + (" (uncommitted changes)" if info.get("dirty") else "")


def _isa_of(desc: dict, cpu: dict) -> list[str]:
    """The CPU's vector extensions: xfbench's own description, else pytest-benchmark's
    cpuinfo flags (files written before xfbench recorded them)."""
    own = desc.get("cpu") if isinstance(desc.get("cpu"), dict) else {}
    if isinstance(own.get("isa"), list):
        return [str(f) for f in own["isa"]]
    from xfbench.machine import isa

    flags = cpu.get("flags")
    return isa(flags) if isinstance(flags, list) else []


def integer(value, default=0) -> int:
    """A whole number as a file writes one (int() of it), else default."""
    try:
        found = int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return found if abs(found) < 2**31 else default  # no real count is that large


def cell_result(cell: dict, status: str, source: str, *, task: str = "") -> Result:
    """A Result of a cell's fields (`task`: its task where the cell names none), with no
    time: the reader of its kind adds what it measured."""
    device = str(cell.get("device", "cpu"))
    return Result(
        task=str(cell.get("task", task)),
        network=str(cell.get("network", "?")),
        framework=str(cell.get("framework", "?")),
        mode=str(cell.get("mode", "?")),
        precision=str(cell.get("precision", "fp32")),
        device=device,
        device_name=str(cell.get("device_name") or device),
        threads=integer(cell.get("threads")),
        batch_size=integer(cell.get("batch_size")),
        data=str(cell.get("data", "resident")),
        scale=str(cell.get("scale", "full")),
        status=status,
        source=source,
        copies=max(1, integer(cell.get("copies"), 1)),
        tokens=integer(cell.get("tokens")) or None,
    )


def scored_result(record: dict, *, task: str, batch: int, median: float, rounds, scale=None):
    """A suite's record as the Result the scores compare (its report module's `scored`,
    report/suites.py): its cell's fields, and what the caller makes its median, rounds
    and scale."""
    result = cell_result(record, "ok", str(record.get("source", "")))
    result.task, result.batch_size, result.data = task, batch, "resident"
    result.median, result.rounds, result.info = median, list(rounds), record
    result.scale = scale or result.scale
    return result


def scored_failure(record: dict, *, task: str) -> Result:
    """A suite's failed record as the failed Result of its workload `task` the scores count
    (its report module's `scored`, report/suites.py)."""
    result = failure_result(record, str(record.get("source", "")))
    result.task = task
    return result


def failure_result(record: dict, source: str, *, task: str = "") -> Result:
    """A failure record ({"cell": {...}, "status", "reason", ...}, or the cell fields at
    the top level as the runner's plugin keeps them) as a Result (`task`: its task where
    the cell names none)."""
    cell, status, reason = records.failed_cell(record)
    result = cell_result(cell, status, source, task=task)
    reason = str(reason or "no reason recorded")
    result.reason = " ".join(reason.split())  # one line, whatever was written
    result.info = {k: v for k, v in record.items() if k != "cell"}
    return result


def _median(entry: dict) -> float:
    stats = entry.get("stats")
    if not isinstance(stats, dict):
        raise ValueError("no stats")
    median = stats.get("median")
    if (
        not isinstance(median, (int, float))
        or isinstance(median, bool)
        or not math.isfinite(median)
        or median <= 0
    ):
        raise ValueError(f"stats.median is {median!r}, not a positive number of seconds")
    return float(median)


def round_times(data) -> list[float]:
    """The positive, finite round times of a list (anything else: none)."""
    if not isinstance(data, list):
        return []
    out = [number(x) for x in data]
    return [x for x in out if x is not None and x > 0] if all(out) else []


def add_document(run: Run, doc: dict, source: str) -> None:
    """Add the entries and failures of one pytest-benchmark document (or one failure
    record) to a run; entries that cannot be used go to run.problems."""
    own = suites.by_kind()  # imports the declarations: the suites' own kinds are then known
    if _is_failure_doc(doc):
        _add_failure(run, doc, source, own)
        return
    if not _is_benchmark_doc(doc):
        raise LoadError(f"{source}: not a pytest-benchmark JSON file (no 'benchmarks' list)")
    checks = equivalence_records(doc)
    if checks:
        run.records.setdefault("equivalence", []).extend(checks)
    used = 0
    for i, entry in enumerate(doc["benchmarks"]):
        name = entry.get("name", f"entry {i}") if isinstance(entry, dict) else f"entry {i}"
        extra = entry.get("extra_info") if isinstance(entry, dict) else None
        if not isinstance(extra, dict):
            run.problems.append(f"{source}: {name}: no extra_info (not written by xfbench)")
            continue
        entry = Entry(data=entry, extra=extra, where=f"{source}: {name}", source=source)
        used += _add_entry(run, entry, own)
    top = doc.get("xfbench")
    failures = top.get("failures") if isinstance(top, dict) else None
    for record in failures or []:
        if isinstance(record, dict):
            _kind(record, f"{source}: a failure record")
            _add_failure(run, record, source, own)
            used += 1
    if doc["benchmarks"] and not used:
        run.problems.append(f"{source}: no xfbench entries among {len(doc['benchmarks'])}")


@dataclass(frozen=True)
class Entry:
    """One pytest-benchmark entry: itself, its extra_info, where it was read."""

    data: dict
    extra: dict
    where: str  # its file and name, for run.problems
    source: str  # its file

    def median(self) -> tuple[float | None, str | None]:
        """Its stats.median in seconds, or None and why not in one line."""
        try:
            return _median(self.data), None
        except ValueError as e:
            return None, str(e)

    def rounds(self) -> list[float]:
        """Its timed rounds (stats.data), each a positive, finite number of seconds."""
        return round_times((self.data.get("stats") or {}).get("data"))


def _add_entry(run: Run, entry: Entry, own: dict[str, suites.SuiteReport]) -> int:
    """Add one entry to the run by its kind (own: the suites' kinds), read by its suite's
    report (report/suites.py); how many entries it used (0: not used, said in
    run.problems)."""
    kind = _kind(entry.extra, entry.where)
    if kind == "equivalence":
        return 1  # already taken by equivalence_records
    if kind not in own:
        run.problems.append(f"{entry.where}: not an xfbench cell (no network/framework)")
        return 0
    record, problem = own[kind].read(entry)
    if problem:
        run.problems.append(f"{entry.where}: {problem}")
    if record is not None:
        own[kind].keep(run, kind, record)
    return int(record is not None)


def _add_failure(run: Run, record: dict, source: str, own: dict[str, suites.SuiteReport]) -> None:
    """A failure record, read by the suite it is a cell of (own: the suites, by kind)."""
    suite = suites.owner(records.failed_cell(record)[0], list(own.values()))
    if suite is None:
        run.problems.append(f"{source}: a failed cell of no declared suite")
        return
    suite.keep(run, suite.failure_kind(record), suite.read_failure(record, source))


def _chosen_files(names: list[str], read: Callable[[str], dict], where: str):
    """Which of a runner folder's files to read (paths inside it), and notes on what was
    passed over: merged.json when it is readable, else cells/ and failed/, else every JSON
    file at the top."""
    notes: list[str] = []
    if "merged.json" in names:
        try:
            if _is_benchmark_doc(read("merged.json")):
                return ["merged.json"], notes
            notes.append(
                f"{where}/merged.json: not a pytest-benchmark JSON file (no 'benchmarks' "
                f"list); reading cells/ and failed/ instead"
            )
        except LoadError as e:
            notes.append(f"{e}; reading cells/ and failed/ instead")

    def inside(folder: str) -> list[str]:
        return sorted(n for n in names if n.startswith(folder) and "/" not in n[len(folder) :])

    parts = [n for n in inside("cells/") + inside("failed/") if n.endswith(".json")]
    if parts or any(n.startswith("cells/") for n in names):
        return parts, notes
    top = [n for n in names if "/" not in n and n.endswith(".json")]
    return sorted(top), notes


def _load_files(name: str, where: str, names: list[str], read: Callable[[str], dict]) -> Run:
    """One runner folder's run from its files' names (inside it) and a reader of them."""
    files, notes = _chosen_files(names, read, where)
    run = Run(name=name, path=where, machine={}, problems=notes)
    for file in files:
        try:
            doc = read(file)
            if not run.machine and _is_benchmark_doc(doc):
                run.machine = machine_of(doc)
            add_document(run, doc, f"{where}/{file}")
            run.files += 1
        except NewerRecordError:
            raise
        except LoadError as e:
            run.problems.append(str(e))
    if run.empty:
        detail = "; ".join(run.problems[:3]) if run.problems else "no JSON files in it"
        raise LoadError(f"{where}: no usable results ({detail})")
    run.machine = run.machine or machine_of({})
    # Roofs measured after the cells (the acceptance run measures a GPU's last) are in the
    # folder's roofs.json only: they join those the machine record carries.
    try:
        kept = read("roofs.json") if "roofs.json" in names else None
    except LoadError as e:
        kept = None
        run.problems.append(f"{e}; the roofs it holds are left out")
    if isinstance(kept, dict):
        run.machine["roofs"] = {**run.machine.get("roofs", {}), **kept}
    return run


def load(path: str | Path) -> Run:
    """One RESULTS argument as a Run; LoadError when nothing in it can be used."""
    path = Path(path)
    if not path.exists():
        raise LoadError(f"{path}: no such file or folder")
    if path.is_file():
        doc = read_json(path)
        if not (_is_benchmark_doc(doc) or _is_failure_doc(doc)):
            raise LoadError(f"{path}: not a pytest-benchmark JSON file (no 'benchmarks' list)")
        # a runner's merged.json is named after its folder
        name = path.parent.resolve().name if path.name == "merged.json" else path.stem
        run = Run(name=name, path=str(path), machine=machine_of(doc), files=1)
        add_document(run, doc, str(path))
        if run.empty:
            raise LoadError(
                f"{path}: no xfbench results in it"
                + (f" ({run.problems[0]})" if run.problems else "")
            )
        return run
    names = [
        p.relative_to(path).as_posix()
        for p in path.rglob("*.json")
        if p.is_file() and p.relative_to(path).parts[0] in ("cells", "failed")
    ]
    names += [p.name for p in path.glob("*.json") if p.is_file()]
    if (path / "cells").is_dir() and not any(n.startswith("cells/") for n in names):
        names.append("cells/")  # an empty cells/: the folder's cells, none finished
    # a sweep killed before it merged (cut at its cap) left records merged.json lacks
    records = any(n.startswith(("cells/", "failed/")) for n in names)
    again = RunFolder(path).merged_again() if records and "merged.json" in names else None

    def read(name: str) -> dict:
        return again if again is not None and name == "merged.json" else read_json(path / name)

    return _load_files(path.name or str(path), str(path), names, read)


def load_many(argument: str | Path) -> list[Run]:
    """The runs one RESULTS argument names: a database's (FILE, or FILE:PATTERN for the
    runs whose name matches), each runner folder inside a folder of them (a reference of
    several runs, say), else the one run of a file or folder."""
    from xfbench.bundle import database
    from xfbench.bundle.pack import BundleError

    try:
        named = database.split(str(argument))
        if named:
            return [
                _load_files(
                    stored.name,
                    f"{named[0]}:{stored.name}",
                    list(stored.files),
                    lambda n, s=stored, db=named[0]: parse_json(s.files[n], f"{db}:{s.name}/{n}"),
                )
                for stored in database.stored_runs(*named)
            ]
    except BundleError as e:
        raise LoadError(str(e)) from None
    path = Path(argument)
    if path.is_dir() and not _is_runner_folder(path):
        inner = sorted(p for p in path.iterdir() if p.is_dir() and _is_runner_folder(p))
        if inner:
            return [load(p) for p in inner]
    return [load(path)]


def pooled(runs: list[Run], name: str, path: str) -> Run:
    """Several runs of one machine as one Run (a reference of several runs): their results
    side by side; the scores pool the rounds of a cell measured in several of them
    (report/score.py)."""
    out = Run(name=name, path=path, machine=runs[0].machine)
    for run in runs:
        out.problems.extend(run.problems)
        for kind, found in run.records.items():
            out.records.setdefault(kind, []).extend(found)
        out.files += run.files
    return out


def _is_runner_folder(path: Path) -> bool:
    return (path / "merged.json").is_file() or (path / "cells").is_dir()
