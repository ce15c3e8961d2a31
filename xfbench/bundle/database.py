"""The results database: `xfbench collect BUNDLE... --db FILE` merges checked bundles into
one SQLite file (the standard library's sqlite3), which `xfbench report`, `score` and
`compare` read as they read folders (report/load.py).

Every run is kept whole (its files, compressed), so a report from the database is the
report from the folder; the cells table indexes them for queries. Keys: a run is its
run_id (a hash of its files, pack.py), a cell is (run_id, cell), a bundle its SHA-256: a
bundle collected again, or another bundle of the same folder, changes nothing.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import sqlite3
import zlib
from dataclasses import dataclass
from pathlib import Path

from xfbench import records
from xfbench.bundle.pack import MACHINE, MODELS, PIP_FREEZE, BundleError
from xfbench.bundle.read import Bundle
from xfbench.plugin import declared

SCHEMA_VERSION = 1
OUTCOMES = ("new", "superseded", "known", "part")  # what add() made of a bundle
SUFFIXES = (".sqlite", ".sqlite3", ".db")
HEADER = b"SQLite format 3\x00"

# docs/records.md shows this schema (tests/test_bundle.py holds them together).
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,              -- 'schema_version'
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,           -- SHA-256 of the run's file names and contents
    name TEXT NOT NULL,                -- the runner folder's name
    host TEXT NOT NULL,
    cpu_model TEXT NOT NULL,
    gpus TEXT NOT NULL,                -- JSON list of GPU names
    merged_at TEXT,                    -- merged.json's datetime: the folder's last merge
    commit_id TEXT,                    -- the suite's commit that measured
    xfbench TEXT NOT NULL,             -- the version that packed the bundle
    environment TEXT NOT NULL,         -- pip freeze, NAME==VERSION lines
    machine_record TEXT NOT NULL,      -- JSON: the machine record
    models TEXT NOT NULL               -- JSON: the model files' hashes (models.json)
);
CREATE TABLE IF NOT EXISTS bundles (
    sha256 TEXT PRIMARY KEY,           -- of the whole bundle file
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    file_name TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    packed_at TEXT NOT NULL,
    collected_at TEXT NOT NULL         -- its first collection
);
CREATE TABLE IF NOT EXISTS files (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    path TEXT NOT NULL,                -- inside the runner folder, e.g. cells/x.json
    sha256 TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    body BLOB NOT NULL,                -- zlib-compressed contents
    PRIMARY KEY (run_id, path)
);
CREATE TABLE IF NOT EXISTS cells (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    cell TEXT NOT NULL,                -- the benchmark's name, or a failure's cell id
    kind TEXT,                         -- the record's kind, as its suite declares it
    task TEXT,
    network TEXT,
    framework TEXT,
    mode TEXT,
    precision TEXT,
    device TEXT,
    threads INTEGER,
    batch_size INTEGER,
    status TEXT NOT NULL,              -- ok, or the failure's status
    median_s REAL,                     -- stats.median (null for a failure)
    rounds TEXT,                       -- JSON list: every timed round, seconds
    PRIMARY KEY (run_id, cell)
);
"""


@dataclass
class StoredRun:
    run_id: str
    name: str  # unique in the database: the folder's name, with @ and the id if shared
    files: dict[str, bytes]


def is_database(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(HEADER)) == HEADER
    except OSError:
        return False


def connect(path: Path | str, write: bool = False) -> sqlite3.Connection:
    """The database at path: read-only, or for collecting into (created when absent);
    BundleError when it cannot be used or is not an xfbench results database."""
    path = Path(path)
    if not write and not path.is_file():
        raise BundleError(f"{path}: no such database")
    if path.exists() and path.stat().st_size and not is_database(path):
        raise BundleError(f"{path}: not an SQLite database")
    try:
        if write:
            db = sqlite3.connect(path, timeout=30)
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables and not {"meta", "runs"} <= tables:
                db.close()
                raise BundleError(f"{path}: an SQLite database of something else; not written")
            db.executescript(SCHEMA)
            db.execute(
                "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
            db.commit()
        else:  # reading never writes: a read-only file, or one being collected into, reads
            db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.Error as e:
        if "no such table" in str(e):
            raise BundleError(f"{path}: not an xfbench results database (no meta table)") from None
        raise BundleError(f"{path}: cannot use the database: {e}") from None
    if row is None or int(row[0]) > SCHEMA_VERSION:
        db.close()
        raise BundleError(
            f"{path}: written by a newer xfbench (database schema {row and row[0]}; this one "
            f"reads up to {SCHEMA_VERSION})"
        )
    return db


def _json(body: bytes):
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def cell_rows(files: dict[str, bytes]) -> list[tuple]:
    """The cells table's rows of one run: merged.json's entries and failures, else the
    cells/ and failed/ files'."""
    merged = _json(files.get("merged.json", b""))
    if isinstance(merged, dict) and isinstance(merged.get("benchmarks"), list):
        docs = [merged]
    else:
        docs = [
            _json(body)
            for name, body in sorted(files.items())
            if name.startswith(("cells/", "failed/")) and name.endswith(".json")
        ]
    rows = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        for entry in doc.get("benchmarks") or []:
            if isinstance(entry, dict) and isinstance(entry.get("extra_info"), dict):
                rows.append(_entry_row(entry))
        top = doc.get("xfbench") if isinstance(doc.get("xfbench"), dict) else {}
        failures = list(top.get("failures") or [])
        if "benchmarks" not in doc:
            failures.append(doc)  # a failed/ file is one failure record
        rows += [_failure_row(f) for f in failures if isinstance(f, dict)]
    return rows


def _kind(record: dict) -> str | None:
    declared()  # every suite's record kind, known once its plugin is imported
    try:
        return records.kind_of(record)
    except records.RecordError:
        return None


def _entry_row(entry: dict) -> tuple:
    extra, stats = entry["extra_info"], entry.get("stats") or {}
    rounds = stats.get("data") if isinstance(stats.get("data"), list) else None
    return (
        str(entry.get("name") or entry.get("fullname")),
        _kind(extra),
        extra.get("task"),
        extra.get("network"),
        extra.get("framework"),
        extra.get("mode"),
        extra.get("precision"),
        extra.get("device"),
        extra.get("threads"),
        extra.get("batch_size"),
        str(extra.get("status") or "ok"),
        stats.get("median"),
        json.dumps(rounds) if rounds is not None else None,
    )


def _failure_row(record: dict) -> tuple:
    cell = record.get("cell") if isinstance(record.get("cell"), dict) else record
    name = cell.get("id") or cell.get("name") or json.dumps(cell, sort_keys=True)
    return (
        f"{cell.get('task', '?')}-{name}",
        "failure",
        cell.get("task"),
        cell.get("network"),
        cell.get("framework"),
        cell.get("mode"),
        cell.get("precision"),
        cell.get("device"),
        cell.get("threads"),
        cell.get("batch_size"),
        str(record.get("status") or "failed"),
        None,
        None,
    )


def add(db: sqlite3.Connection, bundle: Bundle) -> str:
    """One checked bundle into the database, in one transaction. What became of it: "new",
    "known" (its run is in already), "superseded" (it holds all the cells of an earlier
    bundle of the same folder, which it replaces) or "part" (an earlier bundle of a run
    collected whole already; only the bundle is recorded)."""
    files = bundle.run_files
    record = _json(bundle.members[MACHINE]) or {}
    merged = _json(files.get("merged.json", b"")) or {}
    info = merged.get("machine_info") if isinstance(merged.get("machine_info"), dict) else {}
    host = str(info.get("node") or _first_host(files) or "unknown-host")
    cpu = str(record.get("cpu_model") or "unknown CPU")
    rows = cell_rows(files)
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    with db:  # commits, or rolls back on any error: nothing half-collected
        kept = bundle.run_id
        if db.execute("SELECT 1 FROM runs WHERE run_id=?", (kept,)).fetchone():
            outcome = "known"
        else:
            outcome, kept = _place(
                db, bundle, host=host, cpu=cpu, cells={r[0] for r in rows}, merged=merged
            )
        if outcome in ("new", "superseded"):
            _insert_run(db, bundle, record=record, merged=merged, host=host, cpu=cpu)
            db.executemany(
                "INSERT OR IGNORE INTO cells VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(bundle.run_id, *row) for row in rows],
            )
        db.execute(
            "INSERT OR IGNORE INTO bundles VALUES (?,?,?,?,?,?)",
            (
                bundle.sha256,
                kept,
                bundle.path.name,
                bundle.size,
                str(bundle.manifest.get("packed_at")),
                now,
            ),
        )
    return outcome


def _insert_run(db, bundle: Bundle, *, record: dict, merged: dict, host: str, cpu: str) -> None:
    """The run's row and its files (compressed), inside the caller's transaction."""
    from xfbench.bundle.pack import sha256

    commit = merged.get("commit_info") if isinstance(merged.get("commit_info"), dict) else {}
    db.execute(
        "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (
            bundle.run_id,
            bundle.run_name,
            host,
            cpu,
            json.dumps([g.get("name") for g in record.get("gpus") or []]),
            merged.get("datetime"),
            commit.get("id"),
            str(bundle.manifest.get("xfbench")),
            bundle.text(PIP_FREEZE),
            json.dumps(record, sort_keys=True),
            bundle.text(MODELS),
        ),
    )
    db.executemany(
        "INSERT INTO files VALUES (?,?,?,?,?)",
        [
            (bundle.run_id, name, sha256(body), len(body), zlib.compress(body, 6))
            for name, body in sorted(bundle.run_files.items())
        ],
    )


def _place(db, bundle: Bundle, *, host: str, cpu: str, cells: set, merged: dict) -> tuple:
    """Where a run not yet in the database goes: beside the others ("new"), in place of
    earlier bundles of the same folder whose cells it holds ("superseded"), or nowhere
    when a later bundle of its folder holds its cells ("part", and that run's id). Two
    bundles of one folder with the same cells: the later merge stays. So the database
    does not depend on the order bundles are collected in."""
    same = db.execute(
        "SELECT run_id, merged_at FROM runs WHERE name=? AND host=? AND cpu_model=?",
        (bundle.run_name, host, cpu),
    ).fetchall()
    outcome = "new"
    when = str(merged.get("datetime") or "")
    for other, other_when in same:
        theirs = {r[0] for r in db.execute("SELECT cell FROM cells WHERE run_id=?", (other,))}
        if cells < theirs or (cells == theirs and when <= str(other_when or "")):
            return "part", other
        if theirs <= cells:
            for table in ("files", "cells", "runs"):
                db.execute(f"DELETE FROM {table} WHERE run_id=?", (other,))
            db.execute("UPDATE bundles SET run_id=? WHERE run_id=?", (bundle.run_id, other))
            outcome = "superseded"
    return outcome, bundle.run_id


def _first_host(files: dict[str, bytes]) -> str | None:
    """The host a cell's own file names (a folder packed before its first merge)."""
    for name in sorted(n for n in files if n.startswith("cells/")):
        doc = _json(files[name])
        if isinstance(doc, dict) and isinstance(doc.get("machine_info"), dict):
            return doc["machine_info"].get("node")
    return None


def split(argument: str) -> tuple[Path, str | None] | None:
    """A RESULTS argument naming a database: (file, pattern or None), else None. FILE
    reads every run; FILE:PATTERN the runs whose name (or id's start) matches the
    shell-style pattern."""
    path = Path(argument)
    if path.is_file():
        return (path, None) if is_database(path) else None
    for i, char in enumerate(argument):  # the first colon after a database file's name
        if char == ":" and i and Path(argument[:i]).is_file() and is_database(Path(argument[:i])):
            return Path(argument[:i]), argument[i + 1 :]
    return None


def stored_runs(path: Path, pattern: str | None = None) -> list[StoredRun]:
    """The runs of a database (those matching pattern), oldest first; BundleError when
    the database cannot be read or no run matches."""
    db = connect(path)
    try:
        rows = db.execute("SELECT run_id, name FROM runs ORDER BY name, run_id").fetchall()
        counts: dict[str, int] = {}
        for _, name in rows:
            counts[name] = counts.get(name, 0) + 1
        chosen = []
        for run_id, name in rows:
            shown = name if counts[name] == 1 else f"{name}@{run_id[:8]}"
            if (
                pattern is None
                or any(fnmatch.fnmatchcase(x, pattern) for x in (name, shown))
                or run_id.startswith(pattern)
            ):
                chosen.append((run_id, shown))
        out = []
        for run_id, shown in chosen:
            files = {
                p: zlib.decompress(body)
                for p, body in db.execute(
                    # the records only: a run's logs stay compressed in the database
                    "SELECT path, body FROM files WHERE run_id=? AND path LIKE '%.json' "
                    "ORDER BY path",
                    (run_id,),
                )
            }
            out.append(StoredRun(run_id=run_id, name=shown, files=files))
    except (sqlite3.Error, zlib.error) as e:
        raise BundleError(f"{path}: cannot read the database: {e}") from None
    finally:
        db.close()
    if not out:
        names = ", ".join(sorted(counts)) or "none"
        what = f"no run matches {pattern!r}" if pattern else "no runs in it"
        raise BundleError(f"{path}: {what} (runs: {names})")
    return out


def schema_markdown() -> str:
    """docs/records.md's section on the database, made from SCHEMA."""
    return (
        "\n## The results database\n\n"
        "`xfbench collect BUNDLE... --db FILE` (default `results/xfbench.sqlite`) keeps "
        "every run of the bundles it is given in one SQLite file, "
        f"schema version {SCHEMA_VERSION} (the `meta` table says which). A run's files are "
        "kept whole, so `xfbench report FILE` (every run) or `FILE:PATTERN` (the runs whose "
        "name matches the shell-style pattern, or whose id starts with it) reads exactly "
        "the records the folder held; `cells` indexes them for queries. A run's key is the "
        "hash of its files (merged.json aside, which the runner rewrites), a cell's (run, "
        "cell), a bundle's its SHA-256: collecting a bundle again changes nothing. A later "
        "bundle of the same folder (the same name, host and CPU) holding all the cells of an "
        "earlier one replaces it, and an earlier one collected after it adds only its row in "
        "`bundles`: the database does not depend on the order of collection.\n\n"
        "```sql" + SCHEMA.rstrip() + "\n```\n"
    )


if __name__ == "__main__":
    import sys

    declared()  # every suite's kind and fields
    sys.stdout.write(records.render_markdown() + schema_markdown())
