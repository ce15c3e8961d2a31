"""benchmarks/alternate.py: BASE and NEW runs of one sitting, alternated."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "alternate.py"

# Stands in for an xfbench command: logs its side, its results folder and its slowdown,
# and fails where told to.
FAKE = """
import os, sys
log, side = sys.argv[1], sys.argv[2]
folder = sys.argv[sys.argv.index("--results") + 1]
os.makedirs(folder, exist_ok=True)
with open(log, "a") as f:
    f.write(f"{side} {folder.rsplit('/', 1)[1]} {os.environ.get('XFBENCH_SLOWDOWN', '-')}\\n")
sys.exit(1 if side == "new" and folder.endswith("run-2") and "--fail" in sys.argv else 0)
"""


def _alternate(tmp_path, *extra):
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE)
    log = tmp_path / "log"
    command = f"{sys.executable} {fake} {log}"
    done = subprocess.run(
        [sys.executable, SCRIPT, "--out", tmp_path / "ab", "--pairs", "3",
         "--base", f"{command} base", "--new", f"{command} new", *extra],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done, log.read_text().splitlines() if log.exists() else []


def test_the_sides_alternate_each_first_as_often_and_only_new_is_slowed(tmp_path):
    done, log = _alternate(tmp_path, "--sweep", "--model fcn5", "--new-slowdown", "torch:0.2")
    assert done.returncode == 0, done.stderr
    assert log == [
        "base run-1 -", "new run-1 torch:0.2",
        "new run-2 torch:0.2", "base run-2 -",
        "base run-3 -", "new run-3 torch:0.2",
    ]  # fmt: skip
    assert f"NEW: {tmp_path}/ab/new/run-1,{tmp_path}/ab/new/run-2" in done.stdout


def test_a_failed_sweep_is_said_and_the_other_runs_go_on(tmp_path):
    done, log = _alternate(tmp_path, "--sweep=--fail", "--sweep", "--model fcn5")
    assert done.returncode == 1
    assert len(log) == 12  # two sweeps a run, six runs
    assert done.stderr.strip() == f"a sweep failed in 1 run(s): {tmp_path}/ab/new/run-2"


def test_no_pairs_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, SCRIPT, "--out", tmp_path, "--pairs", "0", "--sweep", "x"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip().endswith("--pairs must be 1 or more")
