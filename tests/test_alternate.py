"""benchmarks/alternate.py: BASE and NEW runs of one sitting, in pairs B N N B, the
pairing written down; its second stage runs just the cells compare could not tell."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
        [sys.executable, SCRIPT, "--out", tmp_path / "ab",
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
        "new run-4 torch:0.2", "base run-4 -",
    ]  # fmt: skip
    # B N N B: each side at the same mean position, so a linear drift cancels
    positions = {side: [i for i, line in enumerate(log) if line.startswith(side)] for side in ("base", "new")}  # fmt: skip
    assert sum(positions["base"]) == sum(positions["new"])
    assert f"NEW: {tmp_path}/ab/new/run-1,{tmp_path}/ab/new/run-2" in done.stdout
    assert "--paired" in done.stdout
    pairs = json.loads((tmp_path / "ab" / "pairs.json").read_text())
    assert pairs["pairs"] == 4 and [r["pair"] for r in pairs["runs"]] == [1, 1, 2, 2, 3, 3, 4, 4]


def test_a_failed_sweep_is_said_and_the_other_runs_go_on(tmp_path):
    done, log = _alternate(tmp_path, "--sweep=--fail", "--sweep", "--model fcn5")
    assert done.returncode == 1
    assert len(log) == 16  # two sweeps a run, eight runs
    assert done.stderr.strip() == f"a sweep failed in 1 run(s): {tmp_path}/ab/new/run-2"


@pytest.mark.parametrize("pairs", ["0", "3"])
def test_pairs_that_leave_a_drift_are_one_line(tmp_path, pairs):
    """Three pairs (B N, N B, B N) leave a linear drift on one side: refused, as are none."""
    done = subprocess.run(
        [sys.executable, SCRIPT, "--out", tmp_path, "--pairs", pairs, "--sweep", "x"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "--pairs must be an even number" in done.stderr


def test_the_second_stage_runs_only_the_cells_compare_could_not_tell(tmp_path):
    """From compare --json: one sweep a cell it could not tell, each in as many pairs as it
    said (made even): a quiet cell does not run as long as a noisy one."""
    sys.path.insert(0, str(SCRIPT.parent))
    import alternate

    train = {"network": "fcn5", "task": "train", "framework": "torch", "mode": "eager",
             "precision": "fp32", "batch_size": 64, "threads": 2, "device_name": "cpu",
             "scale": "full"}  # fmt: skip
    generate = {**train, "network": "gpt2", "task": "generate", "batch_size": 1,
                "scale": "full, 128/128 tokens", "mode": "jit", "framework": "jax"}  # fmt: skip
    doc = {"cells": [
        {"verdict": "cannot tell", "runs_needed": 3, "select": train},
        {"verdict": "within noise", "runs_needed": None, "select": train},
        {"verdict": "cannot tell", "runs_needed": 2, "select": generate},
    ]}  # fmt: skip
    path = tmp_path / "v.json"
    path.write_text(json.dumps(doc))
    assert "--device cuda:0" in alternate.cell_sweep(
        {**train, "device": "cuda:0", "device_name": "NVIDIA H200"}
    )
    assert alternate.undecided(path) == [
        ("--task train --model fcn5 --framework torch --mode eager --precision fp32 "
         "--batch-size 64 --threads 2", 4),  # three, made even
        ("--suite generation --model gpt2 --framework jax --mode jit --precision fp32 "
         "--batch-size 1 --threads 2 --lengths 128/128", 2),
    ]  # fmt: skip
    done, log = _alternate(tmp_path, "--only-undecided", str(path), "--sweep", "--preset reference")
    assert done.returncode == 0, done.stderr
    assert "--paired --stage 2" in done.stdout and "12 runs of a sweep planned" in done.stdout
    # pairs 1 and 2 run both cells, pairs 3 and 4 only the one that asked for four
    runs = [line.split()[1] for line in log]
    assert {f"run-{i}": runs.count(f"run-{i}") for i in range(1, 5)} == {
        "run-1": 4, "run-2": 4, "run-3": 2, "run-4": 2,
    }  # fmt: skip
