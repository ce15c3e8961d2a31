"""The sweep runner: one process per group, failures recorded, nothing lost, resume.

Cells use the null adapter (and torch where two frameworks are needed) at smoke size;
faults are injected through the XFBENCH_FAULT test hook of runner/plugin.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xfbench.environment import FAULT
from xfbench.errors import UsageError
from xfbench.harness.selection import cells, parse
from xfbench.harness.sweeps import default_threads
from xfbench.harness.threads import allowed_cpus
from xfbench.plugin import declared
from xfbench.runner import cli
from xfbench.runner.plan import make_plan
from xfbench.runner.store import RunFolder, StoreError, default_folder, host, write_json

FAULT_ENV = FAULT.name

ROOT = Path(__file__).resolve().parents[1]
CPUS = len(allowed_cpus())
# --device cpu: on a machine with a GPU the default devices add cuda:0, and these tests are
# about the CPU cells.
NULL = ["--framework", "null", "--preset", "smoke", "--task", "train", "--device", "cpu"]


def run(argv, monkeypatch=None, fault=""):
    if monkeypatch is not None:
        monkeypatch.setenv(FAULT_ENV, fault)
    return cli.main(argv + ["--quiet"])


def test_default_threads_are_powers_of_two_and_the_maximum():
    assert default_threads(1) == [1]
    assert default_threads(2) == [1, 2]
    assert default_threads(6) == [1, 2, 4, 6]
    assert default_threads(8) == [1, 2, 4, 8]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--framework", "nope"], "unknown framework 'nope'"),
        (["--model", "nope"], "unknown model 'nope'"),
        (["--device", "xpu"], "unknown device 'xpu'"),
        (["--device", "cuda:7"], "cuda:7 is not present"),
        (["--threads", f"1,{CPUS + 1}"], f"--threads {CPUS + 1} is more than"),
        (["--threads", "two"], "--threads takes positive counts"),
        (["--task", "fly"], "unknown task 'fly'"),
        (["--cell-timeout", "0"], "--cell-timeout must be a positive, finite number"),
        (["--cell-timeout", "nan"], "--cell-timeout must be a positive, finite number"),
        (["--cell-timeout", "inf"], "--cell-timeout must be a positive, finite number"),
        (["--cell-timeout", "-5"], "--cell-timeout must be a positive, finite number"),
        (["--device", "tpu:0"], "tpu:0 is not present on this machine (present: cpu"),
        (["--model", ""], "--model is empty"),
        (["--framework", ""], "--framework is empty"),
        (["--preset", ""], "--preset is empty"),
        (["--threads", ""], "--threads is empty"),
        (["--model", "fcn5,fcn5"], "--model names 'fcn5' more than once"),
        (["--threads", "1,1"], "--threads names '1' more than once"),
        (["--device", "cpu,cpu"], "--device names 'cpu' more than once"),
        (["--weights", ""], "--weights is empty"),
    ],
)
def test_bad_input_is_one_line_before_anything_runs(tmp_path, capsys, args, words):
    results = tmp_path / "r"
    rc = cli.main(["--framework", "null", "--preset", "smoke", "--results", str(results)] + args)
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and words in err, err
    assert "Traceback" not in err
    assert not results.exists()


def test_an_empty_results_folder_name_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["--framework", "null", "--preset", "smoke", "--results", ""])
    err = capsys.readouterr().err
    assert rc == 2 and "--results is empty" in err
    assert not (tmp_path / "results").exists()


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_missing_devices_skipped_on_request_still_fail_a_run_that_measured_nothing(
    tmp_path, capsys
):
    """--skip-missing-devices records the absent device's cells as skipped; a run that
    measured nothing exits non-zero, so a script never reads it as a success."""
    results = tmp_path / "r"
    rc = cli.main(
        NULL + ["--device", "cuda:7", "--skip-missing-devices", "--results", str(results)]
    )
    out = capsys.readouterr()
    assert rc == 1 and "no cell was measured" in out.err
    failed = list((results / "failed").glob("*.json"))
    assert failed and all(json.loads(f.read_text())["status"] == "skipped" for f in failed)


def test_unwritable_results_folder_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc = cli.main(NULL + ["--results", str(blocker / "sub")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "not writable" in err


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
@pytest.mark.skipif(CPUS < 2, reason="a thread sweep needs 2 CPUs")
def test_a_finished_sweep_writes_its_report(tmp_path, capsys):
    """Command 1's promise: the table, then report.md, .html and .csv in the run folder."""
    folder = RunFolder(tmp_path / "r")
    assert (
        cli.main(NULL + ["--model", "fcn_r", "--threads", "1", "--results", str(folder.root)]) == 0
    )
    out = capsys.readouterr().out
    for name in ("report.md", "report.html", "report.csv"):
        assert (folder.root / name).is_file() and str(folder.root / name) in out


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_quiet_sweep_writes_its_report_and_prints_one_line(tmp_path, capsys):
    """--quiet changes what is printed, not what is written."""
    folder = RunFolder(tmp_path / "r")
    argv = NULL + ["--model", "fcn_r", "--threads", "1", "--results", str(folder.root)]
    assert cli.main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().out.strip().splitlines() == [
        f"1 of 1 cells measured, 0 failed, 0 not run: {folder.merged}"
    ]
    assert all(
        (folder.root / name).is_file() for name in ("report.md", "report.html", "report.csv")
    )


def test_a_dry_run_prints_the_groups_and_their_estimates_and_writes_nothing(tmp_path, capsys):
    folder = tmp_path / "r"
    argv = ["--framework", "null", "--preset", "smoke", "--device", "cpu", "--threads", "1"]
    assert cli.main([*argv, "--model", "fcn5,fcn8", "--dry-run", "--results", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "null-cpu-t1: 4 cells, ~" in out and "  train-null-fcn8-none-fp32-cpu-t1-b8" in out
    assert "4 cells in 1 process groups" in out and "nothing was measured or written" in out
    assert not folder.exists()


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_each_thread_count_runs_in_its_own_pinned_process(tmp_path):
    folder = RunFolder(tmp_path / "r")
    assert (
        run(NULL + ["--model", "fcn5,fcn8", "--threads", "1,2", "--results", str(folder.root)]) == 0
    )
    entries = [b["extra_info"] for r in folder.results() for b in r["benchmarks"]]
    assert len(entries) == 4
    pids = {}
    for e in entries:
        # the affinity the cell ran under is the count asked for
        assert e["threads_config"]["cpus_allowed"] == e["threads"] == e["threads_requested"]
        pids.setdefault(e["threads"], set()).add(e["pid"])
    assert all(len(p) == 1 for p in pids.values())  # one process per group
    assert pids[1] != pids[2] and os.getpid() not in pids[1] | pids[2]
    merged = json.loads(folder.merged.read_text())
    assert len(merged["benchmarks"]) == 4
    assert merged["xfbench"]["selection"]["threads"] == [1, 2]
    assert merged["xfbench"]["machine"]["cpus_allowed"] == CPUS


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_failures_are_recorded_the_sweep_goes_on_and_resumes(tmp_path, monkeypatch):
    folder = RunFolder(tmp_path / "r")
    argv = NULL + [
        "--model",
        "fcn5,fcn8,alexnet,resnet56,lstm32",
        "--threads",
        "1",
        "--results",
        str(folder.root),
        "--cell-timeout",
        "3",
    ]
    k = {
        n: f"train-null-{n}-none-fp32-cpu-t1-b8"
        for n in ("fcn5", "fcn8", "alexnet", "resnet56", "lstm32")
    }
    faults = f"{k['fcn5']}:raise,{k['fcn8']}:sleep,{k['resnet56']}:kill"
    assert run(argv, monkeypatch, faults) == 1

    status = {f["cell"]["network"]: f for f in folder.failures()}
    assert status["fcn5"]["status"] == "failed" and "fault injected" in status["fcn5"]["reason"]
    assert status["fcn8"]["status"] == "timeout" and "--cell-timeout" in status["fcn8"]["reason"]
    assert status["resnet56"]["status"] == "killed" and "SIGKILL" in status["resnet56"]["reason"]
    assert status["resnet56"]["output_tail"]
    assert sorted(status) == ["fcn5", "fcn8", "resnet56"]
    assert folder.has_result(k["alexnet"]) and folder.has_result(k["lstm32"])
    merged = json.loads(folder.merged.read_text())
    assert len(merged["benchmarks"]) == 2 and len(merged["xfbench"]["failures"]) == 3
    # the exception did not end its process; the time-out and the kill did
    log = (folder.logs / "null-cpu-t1.log").read_text()
    assert log.count("$ ") == 3

    # the same command again: every cell is finished, nothing runs
    size = len(log)
    assert run(argv, monkeypatch) == 1
    assert len((folder.logs / "null-cpu-t1.log").read_text()) == size

    # --retry-failed runs the three failures again, in one process, and they pass now
    assert run(argv + ["--retry-failed"], monkeypatch) == 0
    assert folder.failures() == []
    assert len(folder.results()) == 5


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_sweep_resumes_the_newest_unfinished_folder_of_its_selection(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = NULL + ["--model", "fcn5", "--threads", "1"]
    plan = make_plan(
        declared()["single"],
        dict(
            framework="null", model="fcn5", threads="1", preset="smoke", task="train", device="cpu"
        ),
    )
    old = RunFolder(Path("results") / f"2000-01-01-{host()}")
    old.add_selection(plan.selection)
    assert run(argv) == 0
    assert len(old.results()) == 1  # resumed there, not today's folder
    assert not default_folder(Path("results")).exists()
    assert run(argv) == 0  # finished: a new run starts today
    assert len(RunFolder(default_folder(Path("results"))).results()) == 1


def test_table7_preset_runs_one_mode_per_framework_and_trains_only():
    sel = parse(framework="torch", preset="table7", threads="1")
    assert {c.mode for c in cells(sel, "train")} == {"eager"}
    assert make_plan(
        declared()["single"], dict(framework="torch", preset="table7", threads="1")
    ).selection["tasks"] == ["train"]


@pytest.mark.slow
def test_plain_pytest_runs_each_framework_in_its_own_process(tmp_path):
    """Two frameworks in one `pytest suites/`: each group in a child; the parent's
    --benchmark-json holds every cell, and the failure of a killed one."""
    out = tmp_path / "out.json"
    env = dict(os.environ, **{FAULT_ENV: "train-null-fcn8-none-fp32-cpu-t1-b8:kill"})
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "xfbench/suites/test_train.py",
            "--framework",
            "null,torch",
            "--mode",
            "none,eager",
            "--model",
            "fcn5,fcn8",
            "--threads",
            "1",
            "--device",
            "cpu",
            "--preset",
            "smoke",
            f"--benchmark-json={out}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    pids = {b["extra_info"]["framework"]: b["extra_info"]["pid"] for b in data["benchmarks"]}
    assert len(data["benchmarks"]) == 3
    assert pids["null"] != pids["torch"]
    [failure] = data["xfbench"]["failures"]
    assert failure["status"] == "killed" and failure["cell"]["network"] == "fcn8"
    assert "each framework in its own process" in proc.stdout


def test_the_weights_source_reaches_the_children():
    from xfbench.plugin import declared
    from xfbench.runner.plan import make_plan

    plan = make_plan(
        declared()["single"],
        dict(framework="null", model="fcn_r", threads="1", preset="smoke", weights="onnx"),
    )
    assert all(job.settings["weights"] == "onnx" for job in plan.jobs)
    assert plan.selection["weights"] == "onnx"
    import pytest

    with pytest.raises(UsageError, match="unknown weights 'disk'"):
        make_plan(
            declared()["single"],
            dict(framework="null", threads="1", preset="smoke", weights="disk"),
        )


def _mark_contended(folder: RunFolder, key: str) -> None:
    path = folder.cells / f"{key}.json"
    data = json.loads(path.read_text())
    for b in data["benchmarks"]:
        b["extra_info"].update(contended=True, other_cpu_share=0.5, old_record=True)
    path.write_text(json.dumps(data))


def test_a_contended_result_is_finished_unless_retry_contended(tmp_path):
    folder = RunFolder(tmp_path / "r")
    folder.write_result("train-a", {"benchmarks": [{"extra_info": {"contended": False}}]})
    folder.write_result("train-b", {"benchmarks": [{"extra_info": {"contended": True}}]})
    folder.write_result("train-c", {"benchmarks": [{"extra_info": {}}]})  # older: no field
    for k in ("train-a", "train-b", "train-c"):
        assert folder.is_finished(k)
    assert folder.is_finished("train-a", retry_contended=True)
    assert not folder.is_finished("train-b", retry_contended=True)
    assert folder.is_finished("train-c", retry_contended=True)
    # a failure written later replaces the result: one record per cell
    folder.write_failure("train-b", {"network": "fcn5"}, "timeout", "ran past 3 s")
    assert not folder.has_result("train-b") and folder.failure("train-b")["status"] == "timeout"


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_retry_contended_measures_those_cells_again_and_replaces_their_records(
    tmp_path, monkeypatch
):
    folder = RunFolder(tmp_path / "r")
    argv = NULL + ["--model", "fcn5,fcn8", "--threads", "1", "--results", str(folder.root)]
    k5, k8 = (f"train-null-{n}-none-fp32-cpu-t1-b8" for n in ("fcn5", "fcn8"))
    assert run(argv, monkeypatch) == 0
    log = folder.logs / "null-cpu-t1.log"
    for k in (k5, k8):  # every record says whether it was contended
        [entry] = json.loads((folder.cells / f"{k}.json").read_text())["benchmarks"]
        assert isinstance(entry["extra_info"]["contended"], bool)
    _mark_contended(folder, k5)
    untouched = folder.stamps(k8)

    # without the flag a contended cell is finished: nothing runs
    size = len(log.read_text())
    assert run(argv, monkeypatch) == 0
    assert len(log.read_text()) == size

    # with it, only the contended cell runs again, and its new record replaces the old
    assert run(argv + ["--retry-contended"], monkeypatch) == 0
    [named] = [line for line in log.read_text()[size:].splitlines() if line.startswith("# its")]
    assert "null-fcn5-" in named and "null-fcn8-" not in named
    [entry] = json.loads((folder.cells / f"{k5}.json").read_text())["benchmarks"]
    assert "old_record" not in entry["extra_info"]
    assert folder.stamps(k8) == untouched
    assert len(json.loads(folder.merged.read_text())["benchmarks"]) == 2

    # a retry that fails: the failure replaces the contended record (one record per cell)
    _mark_contended(folder, k5)
    assert run(argv + ["--retry-contended"], monkeypatch, f"{k5}:raise") == 1
    assert not folder.has_result(k5) and folder.failure(k5)["status"] == "failed"
    assert folder.has_result(k8)


# -- faults in the results folder ---------------------------------------------------------
def _one_cell_argv(folder: RunFolder) -> list[str]:
    return NULL + ["--model", "fcn5", "--threads", "1", "--results", str(folder.root)]


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_truncated_cell_file_is_not_a_finished_cell(tmp_path, monkeypatch):
    """A cut-off file in cells/ (a copy interrupted, a disk that filled) runs again on resume,
    and its new record replaces it."""
    folder = RunFolder(tmp_path / "r")
    assert run(_one_cell_argv(folder), monkeypatch) == 0
    (path,) = folder.cells.glob("*.json")
    path.write_text(path.read_text()[:200])
    assert not folder.has_result(path.stem)
    assert run(_one_cell_argv(folder), monkeypatch) == 0
    assert folder.has_result(path.stem)
    assert len(json.loads(path.read_text())["benchmarks"]) == 1


def test_a_second_run_into_a_folder_in_use_is_refused(tmp_path, capsys):
    holder = RunFolder(tmp_path / "r")
    holder.lock()  # as a sweep in another process holds it
    rc = cli.main(_one_cell_argv(RunFolder(tmp_path / "r")))
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert f"another xfbench run (pid {os.getpid()}) is writing into" in err
    assert not list(holder.cells.glob("*.json"))


def test_a_folder_written_by_a_newer_xfbench_is_refused(tmp_path, capsys):
    folder = RunFolder(tmp_path / "r")
    write_json(
        folder.failed / "train-x.json",
        {"kind": "failure", "schema_version": 99, "cell": {}, "status": "failed"},
    )
    rc = cli.main(_one_cell_argv(folder))
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "train-x.json: written by a newer xfbench (record schema 99" in err


def test_a_results_file_that_cannot_be_written_is_one_line_naming_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match=r"cannot write .*file/cells/x.json"):
        write_json(blocker / "cells" / "x.json", {})
    assert blocker.read_text() == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any permission")
def test_an_unwritable_cells_folder_is_refused_before_anything_runs(tmp_path, capsys):
    folder = RunFolder(tmp_path / "r")
    folder.cells.mkdir(parents=True)
    folder.cells.chmod(0o500)
    try:
        rc = cli.main(_one_cell_argv(folder))
    finally:
        folder.cells.chmod(0o700)
    err = capsys.readouterr().err
    assert rc == 2 and "is not writable" in err and "cells" in err


def test_a_run_where_every_cell_fails_still_writes_its_benchmark_json(tmp_path, monkeypatch):
    """pytest-benchmark writes no file when no benchmark ran: the failure records would be
    lost. The runner's plugin writes the document itself, without benchmarks."""
    out = tmp_path / "out.json"
    monkeypatch.setenv(FAULT_ENV, "train-null-fcn5-none-fp32-cpu-t1-b8:raise")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "xfbench/suites/test_train.py", "-q"]
        + ["--framework", "null", "--model", "fcn5", "--preset", "smoke", "--threads", "1"]
        + ["--device", "cpu"]
        + [f"--benchmark-json={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout
    data = json.loads(out.read_text())
    assert data["benchmarks"] == []
    (failure,) = data["xfbench"]["failures"]
    assert failure["status"] == "failed" and "fault injected" in failure["reason"]


def test_benchmark_json_is_written_whole_under_pytest_benchmark_5_2_too(tmp_path):
    """pytest-benchmark 5.2 (a lent GPU machine's) hands save_json the file it opened when
    it read --benchmark-json, where 5.3 keeps a path: the GEMM step lost its JSON to a
    TypeError there. Both forms must give the whole document at the option's path."""
    from types import SimpleNamespace

    from xfbench.runner.plugin import pytest_sessionstart

    for name, value in (("opened", None), ("path", str(tmp_path / "path.json"))):
        target = tmp_path / f"{name}.json"
        bench = SimpleNamespace(json=value or open(target, "wb"))  # noqa: SIM115 (5.2's)
        pytest_sessionstart(SimpleNamespace(config=SimpleNamespace(_benchmarksession=bench)))
        bench.save_json({"benchmarks": [], "from": name})
        assert json.loads(target.read_text()) == {"benchmarks": [], "from": name}


@pytest.mark.skipif(CPUS < 2, reason="two thread counts need 2 CPUs")
def test_a_gpu_cell_runs_once_not_once_per_cpu_thread_count():
    plan = make_plan(
        declared()["single"],
        dict(
            framework="null",
            model="fcn5",
            threads="1,2",
            device="cpu,cuda:0",
            preset="smoke",
            task="train",
            skip_missing_devices=True,  # the plan alone: no GPU is needed
        ),
    )
    groups = [(j.group.device, j.group.threads) for j in plan.jobs]
    assert groups == [("cpu", 1), ("cpu", 2), ("cuda:0", 2)]


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_runs_from_inside_another_checkout(tmp_path):
    """Run from a folder holding another xfbench (a second checkout, another version), the
    children still import this xfbench: with the working directory on their path they
    collected that one's suites beside ours and failed every cell ("import file mismatch")."""
    other = tmp_path / "other-checkout"
    shutil.copytree(
        ROOT / "xfbench", other / "xfbench", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "conftest.py", other / "conftest.py")
    proc = subprocess.run(
        # -P: as the installed `xfbench` command, the parent itself imports this xfbench
        [sys.executable, "-P", "-m", "xfbench.harness.cli", "run", "--framework", "null"]
        + ["--model", "fcn_r", "--preset", "smoke", "--threads", "1", "--task", "train"]
        + ["--results", str(tmp_path / "r"), "--quiet"],
        capture_output=True,
        text=True,
        cwd=other,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 of 1 cells measured, 0 failed" in proc.stdout
