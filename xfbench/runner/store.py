"""The results folder: one file per finished cell, written atomically, and a merged file.

    results/<YYYY-MM-DD>-<host>/
      cells/<task>-<cell-id>.json    pytest-benchmark JSON of one finished cell
      failed/<task>-<cell-id>.json   {"cell", "status", "reason", "output_tail"}
      logs/<group>.log               everything the group's pytest processes printed
      selection.json                 the selections that ran into this folder
      merged.json                    every cell, the failures, the selection and the machine

A cell is finished when it has a file in cells/ or in failed/; a sweep started
again skips finished cells, so an interrupted sweep loses at most the cell in flight.
--retry-failed runs the failed/ ones again, --retry-contended the cells/ ones whose
record is marked contended; a cell's new record replaces its old one.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from xfbench import records
from xfbench.plugin import declared

# A failure record's statuses; "skipped" cells are recorded the same way so no cell is blank.
STATUSES = ("failed", "timeout", "killed", "oom", "skipped")


def cell_key(task: str, cell_id: str) -> str:
    """The file name (without .json) of one cell of one task."""
    return f"{task}-{cell_id}"


class StoreError(OSError):
    """A results file could not be written; the message is one line naming it."""


def write_json(path: Path, data) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one.
    StoreError (one line naming the file) when it cannot be written: a full disk, a
    folder without write permission."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, default=str)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise StoreError(f"cannot write {path}: {e.strerror or e}") from None


def valid_result(data) -> bool:
    """A cell's file as the runner writes it: a pytest-benchmark document with a list of
    benchmarks (a truncated or foreign file is not a finished cell)."""
    return isinstance(data, dict) and isinstance(data.get("benchmarks"), list)


def valid_failure(data) -> bool:
    return isinstance(data, dict) and data.get("status") in STATUSES


def read_json(path: Path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def host() -> str:
    return socket.gethostname().split(".")[0] or "host"


def default_folder(base: Path) -> Path:
    return base / f"{time.strftime('%Y-%m-%d')}-{host()}"


class RunFolder:
    def __init__(self, root: Path | str):
        self.root = Path(root).absolute()  # children run in the checkout, not here
        self.cells = self.root / "cells"
        self.failed = self.root / "failed"
        self.logs = self.root / "logs"
        self.merged = self.root / "merged.json"

    # -- one cell ---------------------------------------------------------------------
    def has_result(self, key: str) -> bool:
        """Whether the cell has a readable result: a truncated or foreign file in cells/
        is not one, so the cell runs again and its new file replaces the bad one."""
        return valid_result(read_json(self.cells / f"{key}.json"))

    def failure(self, key: str) -> dict | None:
        data = read_json(self.failed / f"{key}.json")
        return data if valid_failure(data) else None

    def is_contended(self, key: str) -> bool:
        """The cell's result was measured while other processes took its CPUs
        (the harness's `contended` mark on any of its entries)."""
        result = read_json(self.cells / f"{key}.json") or {}
        return any(
            (b.get("extra_info") or {}).get("contended") is True
            for b in result.get("benchmarks", [])
        )

    def is_finished(
        self, key: str, retry_failed: bool = False, retry_contended: bool = False
    ) -> bool:
        if self.has_result(key):
            return not (retry_contended and self.is_contended(key))
        return not retry_failed and self.failure(key) is not None

    @staticmethod
    def _stamp(path: Path) -> tuple[int, int] | None:
        try:
            st = path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns)

    def failure_stamp(self, key: str) -> tuple[int, int] | None:
        """Identifies one version of a failure record (None: there is none)."""
        return self._stamp(self.failed / f"{key}.json")

    def stamps(self, key: str) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """(result, failure) stamps of a cell: a record written later is a new file
        (write_json replaces), so a changed stamp means a new record, whatever the clock."""
        return self._stamp(self.cells / f"{key}.json"), self.failure_stamp(key)

    def write_result(self, key: str, benchmark_json: dict) -> None:
        write_json(self.cells / f"{key}.json", benchmark_json)
        # A success replaces an earlier failure of the same cell (--retry-failed).
        (self.failed / f"{key}.json").unlink(missing_ok=True)

    def write_failure(
        self, key: str, cell: dict, status: str, reason: str, output_tail: str = ""
    ) -> dict:
        assert status in STATUSES, status
        record = {
            **records.header("failure"),
            "cell": cell,
            "status": status,
            "reason": reason,
            "output_tail": output_tail,
        }
        write_json(self.failed / f"{key}.json", record)
        # One record per cell, the newest: a contended result measured again
        # (--retry-contended) that now fails is replaced by the failure.
        (self.cells / f"{key}.json").unlink(missing_ok=True)
        return record

    # -- the whole folder -------------------------------------------------------------
    def lock(self) -> None:
        """Hold the folder for this process until it exits: a second `xfbench run` into
        the same folder would run the same cells and overwrite them. StoreError (one
        line) when another process holds it. flock: released by the kernel when the
        holder exits, however it exits, so no stale lock is ever left."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreError(
                f"another xfbench run (pid {holder}) is writing into {self.root}: wait for "
                "it to finish, or give another --results folder"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd  # kept open: closing it would release the lock

    def unlock(self) -> None:
        fd = getattr(self, "_lock_fd", None)
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def check_version(self) -> None:
        """RecordError (one line) when a record in the folder was written by a newer
        xfbench: resuming into it would mix two schemas."""
        for path in sorted(self.cells.glob("*.json")) + sorted(self.failed.glob("*.json")):
            data = read_json(path)
            entries = (
                [b.get("extra_info") or {} for b in data["benchmarks"] if isinstance(b, dict)]
                if valid_result(data)
                else [data]
                if isinstance(data, dict)
                else []
            )
            declared()  # every suite's record kind, known once its plugin is imported
            for record in entries:
                try:
                    records.kind_of(record)
                except records.RecordError as e:
                    raise records.RecordError(f"{path}: {e}") from None

    def results(self) -> list[dict]:
        """Every finished cell's pytest-benchmark JSON, in file-name order (a truncated or
        foreign file is no finished cell: has_result)."""
        found = (read_json(path) for path in sorted(self.cells.glob("*.json")))
        return [data for data in found if valid_result(data)]

    def failures(self) -> list[dict]:
        found = (read_json(path) for path in sorted(self.failed.glob("*.json")))
        return [data for data in found if valid_failure(data)]

    def selections(self) -> list[dict]:
        return read_json(self.root / "selection.json") or []

    def add_selection(self, selection: dict) -> None:
        stored = self.selections()
        if selection not in stored:
            write_json(self.root / "selection.json", stored + [selection])

    def merge(self, selection: dict, machine: dict) -> Path:
        """merged.json: a valid pytest-benchmark JSON of every finished cell, plus the
        failures, the selection and the machine under the key "xfbench"."""
        write_json(self.merged, self.merged_doc(selection, machine))
        return self.merged

    def merged_doc(self, selection: dict, machine: dict) -> dict:
        """What merge() writes, made in memory."""
        import pytest_benchmark

        results = self.results()
        first = results[0] if results else {}
        machine_info = dict(first.get("machine_info") or {})
        # The frameworks' runtime versions, as each group's child reported them.
        machine = {
            **machine,
            "runtimes": {**children_runtimes(results), **machine.get("runtimes", {})},
        }
        machine_info["xfbench"] = machine
        merged = {
            "machine_info": machine_info,
            "commit_info": first.get("commit_info") or {},
            "benchmarks": [b for r in results for b in r.get("benchmarks", [])],
            "datetime": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "version": pytest_benchmark.__version__,
            "xfbench": {
                "failures": self.failures(),
                "selection": selection,
                "machine": machine,
                # every selection that ran into this folder (the cells are theirs)
                "selections": self.selections(),
            },
        }
        # What a suite knows only once its cells, run in separate children, are beside
        # each other and the run's machine and roofs (scaling's speedup over one worker,
        # the network suite's MFU)
        infos = [b.get("extra_info") or {} for b in merged["benchmarks"]]
        for suite in declared().values():
            if suite.merged:
                suite.merged(infos, machine)
        return merged

    def merged_again(self) -> dict | None:
        """merged.json made again in memory where the file lacks a record that cells/ or
        failed/ holds: a sweep killed before it merged (an acceptance step cut at its cap)
        leaves them there. None where merged.json is whole, or not there to say what the
        sweep's selection and machine were."""
        old = read_json(self.merged)
        if not valid_result(old):
            return None
        top = old.get("xfbench") if isinstance(old.get("xfbench"), dict) else {}
        have = {_measurement(r) for r in [*old["benchmarks"], *(top.get("failures") or [])]}
        found = [b for r in self.results() for b in r["benchmarks"]]
        if all(_measurement(x) in have for x in found + self.failures()):
            return None
        machine = top.get("machine") or (old.get("machine_info") or {}).get("xfbench") or {}
        return self.merged_doc(top.get("selection") or {}, machine)


def _measurement(record) -> str:
    """One cell's record as written: a benchmark by its test and timings (the merge adds
    fields to its extra_info, never to these), a failure whole."""
    if isinstance(record, dict) and "stats" in record:
        return json.dumps([record.get("fullname"), record.get("stats")], sort_keys=True)
    return json.dumps(record, sort_keys=True, default=str)


def children_runtimes(results: list[dict]) -> dict[str, dict]:
    """The runtime versions (CUDA, cuDNN, ...) each result's process reported for the
    frameworks it started: only a process that started a framework can ask it."""
    out: dict[str, dict] = {}
    for result in results:
        described = (result.get("machine_info") or {}).get("xfbench") or {}
        out.update(described.get("runtimes") or {})
    return out


def find_resumable(base: Path, selection: dict, is_complete) -> Path | None:
    """The newest folder of this host under base whose stored selections include this
    one and which still has unfinished cells: a sweep interrupted yesterday resumes
    there instead of starting again in today's folder."""
    suffix = f"-{host()}"
    candidates = sorted((p for p in base.glob(f"*{suffix}") if p.is_dir()), reverse=True)
    for path in candidates:
        folder = RunFolder(path)
        if selection in folder.selections() and not is_complete(folder):
            return path
    return None
