"""Faults made for real: a disk that fills, as RLIMIT_FSIZE makes one for the process and
its children (it holds for root too, unlike a read-only folder). Each ends in one line
naming the file, a non-zero exit and no traceback, and leaves no partial file behind."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = next((ROOT / "xfbench" / "report" / "references").glob("*/merged.json")).parent


def _with_file_limit(limit: int, *args: str) -> subprocess.CompletedProcess:
    def limited():
        # past the limit a write fails with EFBIG, as on a full disk, instead of the
        # default SIGXFSZ killing the process
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "xfbench.harness.cli", *args],
        preexec_fn=limited,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def _whole_json_files(folder: Path) -> list[Path]:
    """Every JSON file under folder; fails on one that does not parse (a partial write)."""
    files = list(folder.rglob("*.json"))
    for f in files:
        json.loads(f.read_text())
    return files


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_full_disk_during_a_sweep_is_one_line_and_leaves_no_partial_file(tmp_path):
    results = tmp_path / "r"
    proc = _with_file_limit(
        3000,
        "run",
        "--framework",
        "null",
        "--preset",
        "smoke",
        "--task",
        "train",
        "--model",
        "fcn5,fcn8",
        "--threads",
        "1",
        "--results",
        str(results),
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("xfbench run:")]
    assert "cannot write" in line and str(results) in line and "File too large" in line
    assert "the cells written so far are kept" in line
    _whole_json_files(results)
    assert not [p for p in results.rglob("*.tmp*")]


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_full_disk_while_writing_the_report_names_the_file_and_leaves_no_empty_one(tmp_path):
    out = tmp_path / "report"
    proc = _with_file_limit(30_000, "report", str(REFERENCE), "--out", str(out))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert proc.stderr.startswith("xfbench report: cannot write ") and "File too large" in (
        proc.stderr
    )
    written = [p for p in out.rglob("*") if p.is_file()]
    assert all(p.stat().st_size > 0 for p in written), written  # whole files or none
    assert not [p for p in written if ".tmp" in p.name]
    assert not (out / "report.html").exists()  # the file named was not left half-written
