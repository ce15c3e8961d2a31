"""`xfbench run --suite scaling|allreduce`: options checked before anything runs, the job
each child is handed (its suite's cells, not options), and the sweep (children, failures,
resume, report) driven against stand-in suites declared in one place, so nothing here
trains a network."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from xfbench.environment import FAULT
from xfbench.plugin import SUITES_DIR, declared
from xfbench.report import render_folder
from xfbench.runner import cli
from xfbench.runner.group import Group, child_command, job_document, key
from xfbench.runner.plan import make_plan
from xfbench.runner.store import RunFolder
from xfbench.scaling.cell import default_threads_per_worker

FAULT_ENV = FAULT.name
ROOT = Path(__file__).resolve().parents[1]
SMOKE = ["--framework", "torch", "--preset", "smoke"]


def run(argv, monkeypatch=None, fault=""):
    if monkeypatch is not None:
        monkeypatch.setenv(FAULT_ENV, fault)
    return cli.main(argv + ["--quiet"])


# ------------------------------------------------------------------ options


@pytest.mark.parametrize(
    "args, words",
    [
        (["--suite", "nope"], "unknown suite 'nope'; valid: single, scaling, allreduce"),
        (["--suite", "scaling", "--workers", "0"], "--workers takes positive counts"),
        (["--suite", "scaling", "--workers", "two"], "--workers takes positive counts"),
        (
            ["--suite", "scaling", "--scaling", "medium"],
            "unknown scaling 'medium'; valid: strong, weak",
        ),
        (["--suite", "scaling", "--mode", "eager"], "--mode does not apply to --suite scaling"),
        (["--suite", "scaling", "--task", "infer"], "--task does not apply to --suite scaling"),
        (
            ["--suite", "scaling", "--framework", "onnxruntime"],
            "--suite scaling runs torch, jax, tensorflow; not 'onnxruntime'",
        ),
        (["--suite", "scaling", "--model", "nope"], "unknown model 'nope'"),
        (
            ["--suite", "scaling", "--batch-size", "9", "--model", "fcn5"],
            "2 workers do not divide it",
        ),
        (
            ["--suite", "scaling", "--threads", "1,2"],
            "--threads takes one positive count per worker",
        ),
        (["--suite", "scaling", "--device", "cuda:3"], "cuda:3 is not present"),
        (
            ["--suite", "allreduce", "--framework", "tensorflow"],
            "--suite allreduce runs torch, jax",
        ),
        (
            ["--suite", "allreduce", "--model", "fcn5"],
            "--model does not apply to --suite allreduce",
        ),
        (["--suite", "allreduce", "--workers", "1", "--world-sizes", "2"], "give one"),
        (
            ["--suite", "allreduce", "--allreduce-sizes", ","],
            "--allreduce-sizes needs at least one",
        ),
        (["--suite", "allreduce", "--allreduce-sizes", "3KB:1KB"], "runs backwards"),
        (
            ["--suite", "scaling", "--device", "cpu", "--workers", "1,64"],
            "--workers 64 with 1 thread(s) each needs 64 CPUs",
        ),
        (
            ["--suite", "allreduce", "--device", "cpu", "--world-sizes", "64"],
            "--world-sizes 64 with 1 thread(s) each needs 64 CPUs",
        ),
        (["--workers", "2"], "--workers does not apply to --suite single"),
        (["--scaling", "weak"], "--scaling does not apply to --suite single"),
    ],
)
def test_bad_suite_options_are_one_line_before_anything_runs(tmp_path, capsys, args, words):
    results = tmp_path / "r"
    rc = cli.main(["--preset", "smoke", "--results", str(results)] + args)
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and words in err, err
    assert "Traceback" not in err
    assert not results.exists()


def test_each_child_is_handed_its_cells_and_settings_not_options(tmp_path):
    """The plan's jobs carry the suite's own cells (scaling.cell.expand's), grouped one
    child per (framework, device); the job file a child is handed names the suite, its
    files, exactly those cells as records and the settings they are measured with, and
    the child reads the cells back as they were."""
    from xfbench.scaling.cell import ScalingCell

    suites = declared()
    plan = make_plan(
        suites["scaling"],
        dict(
            framework="torch,jax",
            model="resnet56,fcn_r",
            preset="smoke",
            device="cpu",
            workers="1,2",
            scaling="strong,weak",
        ),
    )
    assert plan.selection["suite"] == "scaling"
    assert [j.group.name for j in plan.jobs] == ["scaling-torch-cpu", "scaling-jax-cpu"]
    job = plan.jobs[1]
    # strong smoke batch: the smoke batch (8) times the most workers, so 1 and 2 divide it
    assert [c.id for c in job.cells][:2] == [
        "resnet56-jax-cpu-w1-strong-b16",
        "resnet56-jax-cpu-w2-strong-b16",
    ]
    assert [key(c) for c in job.cells][-1] == "scaling-fcn_r-jax-cpu-w2-weak-b8"
    doc = job_document(job, job.cells)
    assert doc["suite"] == "scaling" and doc["files"] == [str(SUITES_DIR / "test_scaling.py")]
    assert doc["settings"] == {
        "preset": "smoke",
        "threads": None,  # the suite's own threads per worker
        "framework": "jax",
        "device": "cpu",
    }
    assert [ScalingCell.from_dict(c) for c in doc["cells"]] == job.cells
    assert doc["cells"][-1] == {
        "kind": "scaling",
        "network": "fcn_r",
        "framework": "jax",
        "device": "cpu",
        "workers": 2,
        "scaling": "weak",
        "batch": 8,
        "precision": "fp32",
        "scale": "smoke",
        # the suite's own default, from the one expansion (scaling.cell.expand)
        "threads_per_worker": default_threads_per_worker(2),
    }
    assert child_command(doc)[-1] == str(SUITES_DIR / "test_scaling.py")

    # --threads is per worker and reaches the child; a given batch is the batch of every cell
    plan = make_plan(
        suites["scaling"],
        dict(
            framework="torch",
            model="resnet56",
            preset="paper",
            device="cpu",
            workers="1,2",
            threads="1",
            batch_size="64",
        ),
    )
    [job] = plan.jobs
    assert job_document(job, job.cells)["settings"]["threads"] == "1"
    assert [c.id for c in job.cells] == [f"resnet56-torch-cpu-w{w}-strong-b64" for w in (1, 2)]

    plan = make_plan(
        suites["allreduce"],
        dict(framework="torch,jax", device="cpu", preset="smoke", world_sizes="1,2",
             allreduce_sizes="1K,4K"),
    )  # fmt: skip
    assert [key(c) for j in plan.jobs for c in j.cells] == [
        f"allreduce-{i}" for i in ("torch-cpu-n1", "torch-cpu-n2", "jax-cpu-n1", "jax-cpu-n2")
    ]
    doc = job_document(plan.jobs[0], plan.jobs[0].cells)
    assert doc["settings"]["allreduce_sizes"] == "1K,4K"
    assert plan.jobs[0].group.name == "allreduce-torch-cpu"
    # the train/infer groups keep their names (log files of earlier runs)
    assert Group("torch", "cuda:0", 4).name == "torch-cuda0-t4"


def test_a_child_runs_exactly_the_cells_of_its_job(tmp_path):
    """A pytest process handed a job file (XFBENCH_JOB) generates its cells, no others,
    whatever the options would have expanded to."""
    import os
    import subprocess
    import sys

    from xfbench.adapters import Cell

    cell = Cell(network="fcn8", framework="null", mode="none", precision="fp32", device="cpu",
                threads=1, batch_size=8, task="train", scale="smoke")  # fmt: skip
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"suite": "single", "settings": {"preset": "smoke", "threads": "1",
                   "framework": "null", "device": "cpu"}, "cells": [cell.as_dict()]}))  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XFBENCH_JOB": str(job)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
         str(SUITES_DIR / "test_train.py"), str(SUITES_DIR / "test_infer.py")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    cells = [line.split("::")[1] for line in collected if "not-selected" not in line]
    assert cells == [f"test_train[{cell.id}]"], proc.stdout[-2000:]


# ------------------------------------------------------------------ sweeps against stand-ins

# Stand-ins for the scaling and all-reduce suites, each declared in one place (its module,
# loaded by the children as a plugin): the real suite's own sweep and table, a test that
# records a step time of 0.1 s / workers**0.5 (efficiency 1/sqrt(2) at 2 workers) or a
# sweep of made-up bandwidths, so nothing here trains a network or starts a worker.
STAND_IN = """
import os

import pytest

from xfbench.allreduce import plugin as allreduce
from xfbench.plugin import Suite, Summary, Swept, declare
from xfbench.scaling import plugin as scaling
from xfbench.scaling.cell import ScalingCell

HERE = os.path.dirname(os.path.abspath(__file__))


def _scaling_cells(metafunc):
    opt = metafunc.config.getoption
    return [ScalingCell(network=n, framework=opt("framework"), device="cpu", workers=int(w),
                        scaling=s, batch=int(opt("batch_size")), threads_per_worker=1,
                        scale="smoke")
            for n in opt("model").split(",") for s in opt("scaling").split(",")
            for w in opt("workers").split(",")]


SCALING = declare(Suite(name="scaling", param="scell", cells=_scaling_cells,
                        cell_type=ScalingCell, files=(os.path.join(HERE, "test_scaling.py"),),
                        sweep=Swept(plan=scaling.sweep, about=""),
                        summary=Summary(title="stand-in scaling", table=scaling.summary),
                        kinds=(scaling.KIND,), report=scaling.SUITE.report))
ALLREDUCE = declare(Suite(name="allreduce", param="case", cells=lambda metafunc: [],
                          cell_type=allreduce.Case,
                          files=(os.path.join(HERE, "test_allreduce.py"),),
                          sweep=Swept(plan=allreduce.sweep, about=""),
                          summary=Summary(title="stand-in all-reduce", table=allreduce.summary),
                          kinds=(allreduce.KIND,), report=allreduce.SUITE.report))
"""

SCALING = """
import os


def test_scaling(scell, benchmark):
    seconds = 0.1 / scell.workers ** 0.5
    global_batch = scell.batch if scell.scaling == "strong" else scell.batch * scell.workers
    benchmark._mode = "benchmark.pedantic(...)"
    benchmark.group = f"scaling {scell.network} {scell.scaling}"
    benchmark.extra_info.update({
        **scell.as_dict(), "global_batch": global_batch,
        "per_worker_batch": global_batch // scell.workers, "status": "ok",
        "seconds_per_batch": seconds, "samples_per_s": global_batch / seconds,
        "speedup": None, "efficiency": None, "backend": "gloo", "comm_share": None,
        "pid": os.getpid()})
    stats = benchmark._make_stats(1)
    for _ in range(3):
        stats.update(seconds)
"""

ALLREDUCE = """
def test_allreduce(case, benchmark, request):
    sizes = [int(s.rstrip("K")) * 1024
             for s in request.config.getoption("allreduce_sizes").split(",")]
    n = case.world_size
    rows = [{"pattern": p, "bytes": b, "count": b // 4, "dtype": "fp32", "status": "ok",
             "seconds": 1e-4 * b / 1024, "algbw_gbps": 1.0, "busbw_gbps": 2 * (n - 1) / n,
             "correct": True, "framework": case.framework, "backend": "gloo",
             "device": case.device, "world_size": n}
            for b in sizes for p in ("allreduce", "reduce_broadcast")]
    benchmark._mode = "benchmark.pedantic(...)"
    benchmark.extra_info.update({"kind": "allreduce", "framework": case.framework,
                                 "backend": "gloo", "device": case.device,
                                 "world_size": n, "rows": rows})
    stats = benchmark._make_stats(1)
    stats.update(rows[-2]["seconds"])
"""


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """The stand-in suites declared here in place of the real ones, and in every child
    (PYTEST_PLUGINS), whose files they run; their results are reported as the real ones'."""
    import importlib
    import sys

    import xfbench.plugin

    suites = tmp_path / "standins"
    suites.mkdir()
    (suites / "xfbench_standins.py").write_text(textwrap.dedent(STAND_IN))
    (suites / "test_scaling.py").write_text(textwrap.dedent(SCALING))
    (suites / "test_allreduce.py").write_text(textwrap.dedent(ALLREDUCE))
    real = [s for s in xfbench.plugin.SUITES if s.name not in ("scaling", "allreduce")]
    monkeypatch.setattr(xfbench.plugin, "SUITES", real)
    monkeypatch.syspath_prepend(str(suites))
    sys.modules.pop("xfbench_standins", None)
    importlib.import_module("xfbench_standins")  # declares them into xfbench.plugin.SUITES
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{suites}")
    monkeypatch.setenv("PYTEST_PLUGINS", "xfbench_standins")
    return tmp_path


@pytest.mark.slow
def test_scaling_sweep_records_failures_resumes_and_reports(stand_ins, monkeypatch):
    """A suite declared in one place (the stand-in's module) reaches the plan, the
    children (its cells in their job files), the results folder and the report."""
    folder = RunFolder(stand_ins / "r")
    argv = SMOKE + [
        "--suite",
        "scaling",
        "--model",
        "fcn_r",
        "--device",
        "cpu",
        "--workers",
        "1,2",
        "--scaling",
        "strong,weak",
        "--cell-timeout",
        "4",
        "--results",
        str(folder.root),
    ]
    k = {
        (w, s): f"scaling-fcn_r-torch-cpu-w{w}-{s}-b{16 if s == 'strong' else 8}"
        for w in (1, 2)
        for s in ("strong", "weak")
    }
    faults = f"{k[2, 'strong']}:kill,{k[2, 'weak']}:sleep"
    assert run(argv, monkeypatch, faults) == 1

    assert folder.has_result(k[1, "strong"]) and folder.has_result(k[1, "weak"])
    killed, timed_out = folder.failure(k[2, "strong"]), folder.failure(k[2, "weak"])
    assert killed["status"] == "killed" and "SIGKILL" in killed["reason"]
    assert timed_out["status"] == "timeout" and "--cell-timeout" in timed_out["reason"]
    assert killed["cell"]["kind"] == "scaling" and killed["cell"]["workers"] == 2
    assert killed["output_tail"]
    entry = json.loads((folder.cells / f"{k[1, 'strong']}.json").read_text())["benchmarks"][0]
    assert entry["extra_info"]["kind"] == "scaling" and entry["stats"]["median"] == 0.1
    merged = json.loads(folder.merged.read_text())
    assert len(merged["benchmarks"]) == 2 and len(merged["xfbench"]["failures"]) == 2
    assert merged["xfbench"]["selection"]["suite"] == "scaling"
    assert sorted(p.name for p in folder.logs.iterdir()) == ["scaling-torch-cpu.log"]
    # the child was handed its cells: the job file names them, no more
    job = json.loads((folder.root / "jobs" / "scaling-torch-cpu.json").read_text())
    assert job["suite"] == "scaling" and job["files"][0].startswith(str(stand_ins))

    # the same command again: every cell is finished, nothing runs
    sizes = {p: p.stat().st_size for p in folder.logs.iterdir()}
    assert run(argv, monkeypatch) == 1
    assert {p: p.stat().st_size for p in folder.logs.iterdir()} == sizes

    # --retry-failed runs the two failures again, and they pass now
    assert run(argv + ["--retry-failed"], monkeypatch) == 0
    assert folder.failures() == [] and len(folder.results()) == 4

    # the report reads the folder: a scaling table with speedups computed from 1 worker,
    # nothing in Table 7
    render_folder(folder.root, ["md", "csv"])
    rows = (folder.root / "report-scaling.csv").read_text().splitlines()
    assert len(rows) == 1 + 4
    md = (folder.root / "report.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("| FCN-R") and "16 global" in x)
    assert "1.41x" in line and "71%" in line  # 0.1 / (0.1 / sqrt 2)
    assert (folder.root / "report.csv").read_text().count("\n") == 1  # header only


def test_allreduce_sweep_passes_world_sizes_and_message_sizes(stand_ins, monkeypatch, capsys):
    folder = RunFolder(stand_ins / "r")
    argv = SMOKE + [
        "--suite",
        "allreduce",
        "--device",
        "cpu",
        "--world-sizes",
        "1,2",
        "--allreduce-sizes",
        "1K,4K",
        "--results",
        str(folder.root),
    ]
    assert run(argv, monkeypatch) == 0
    assert [p.name for p in sorted(folder.cells.iterdir())] == [
        "allreduce-torch-cpu-n1.json",
        "allreduce-torch-cpu-n2.json",
    ]
    entry = json.loads((folder.cells / "allreduce-torch-cpu-n2.json").read_text())["benchmarks"][0]
    assert [r["bytes"] for r in entry["extra_info"]["rows"]] == [1024, 1024, 4096, 4096]
    assert "2 of 2 cells measured, 0 failed" in capsys.readouterr().out
    # the summary table of an all-reduce sweep: the suite's declared table
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "busbw GB/s all-reduce (largest)" in out and "| torch" in out
    assert "busbw (GB/s)" in out  # and each sweep's nccl-tests table


def test_plain_pytest_json_carries_scaling_failures(stand_ins):
    """Without the runner, --benchmark-json still lists a failed scaling cell under
    "xfbench" with its kind, so the report shows it among the scaling failures."""
    import os
    import subprocess
    import sys

    out = stand_ins / "out.json"
    env = dict(os.environ, **{FAULT_ENV: "scaling-fcn_r-torch-cpu-w2-strong-b16:raise"})
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_scaling.py",
            "--framework",
            "torch",
            "--device",
            "cpu",
            "--model",
            "fcn_r",
            "--workers",
            "1,2",
            "--scaling",
            "strong",
            "--batch-size",
            "16",
            f"--benchmark-json={out}",
        ],
        cwd=stand_ins / "standins",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert [b["extra_info"]["workers"] for b in data["benchmarks"]] == [1]
    [failure] = data["xfbench"]["failures"]
    assert failure["cell"]["kind"] == "scaling" and failure["cell"]["workers"] == 2
    assert failure["status"] == "failed" and "fault injected" in failure["reason"]
    from xfbench.report import render

    render([out], stand_ins / "report", ["md"])
    md = (stand_ins / "report" / "report.md").read_text()
    assert "### Failed scaling cells" in md and "fault injected" in md


def test_a_suites_own_failure_record_is_the_one_recorded(stand_ins, monkeypatch):
    """A suite that knows why its cell failed (the workers timed out) leaves its record in
    item.stash[xfbench.plugin.SUITE_FAILURE]; the runner keeps its status and reason."""
    test = stand_ins / "standins" / "test_scaling.py"
    test.write_text(
        test.read_text()
        + textwrap.dedent("""

        import pytest
        from xfbench.plugin import SUITE_FAILURE


        @pytest.fixture(autouse=True)
        def workers_time_out(request, scell):
            if scell.workers == 2:
                request.node.stash[SUITE_FAILURE] = {
                    "cell": {"kind": "scaling", **scell.as_dict()}, "status": "timeout",
                    "reason": "the workers gave no result within 5 s", "output_tail": "rank 1"}
                pytest.fail("timeout: the workers gave no result within 5 s")
        """)
    )
    folder = RunFolder(stand_ins / "r")
    argv = SMOKE + [
        "--suite",
        "scaling",
        "--model",
        "fcn_r",
        "--device",
        "cpu",
        "--workers",
        "1,2",
        "--results",
        str(folder.root),
    ]
    assert run(argv, monkeypatch) == 1
    [failure] = folder.failures()
    assert failure["status"] == "timeout" and failure["output_tail"] == "rank 1"
    assert failure["reason"] == "the workers gave no result within 5 s"
    assert failure["cell"]["workers"] == 2


def test_a_failure_recorded_by_the_suite_and_the_runner_plugin_is_listed_once():
    from xfbench.runner.plugin import _once_per_cell

    cell = {"kind": "scaling", "network": "fcn_r", "workers": 2}
    twice = [
        {"cell": cell, "status": "skipped", "reason": "a"},
        {"cell": dict(cell), "status": "skipped", "reason": "a"},
        {"cell": {**cell, "workers": 4}, "status": "failed", "reason": "b"},
    ]
    assert _once_per_cell(twice) == [twice[0], twice[2]]


def test_allreduce_summary_has_a_column_per_measured_pattern():
    """torch measures three patterns, jax two: the summary's busbw columns are those some
    sweep has (jax alone: no reduce+broadcast column), blank where a sweep lacks one."""
    from xfbench.allreduce.table import cells_table

    def sweep(framework, patterns, busbw):
        return {
            "framework": framework,
            "device": "cpu",
            "world_size": 2,
            "backend": "b",
            "rows": [
                {"pattern": p, "bytes": b, "busbw_gbps": busbw[p], "correct": True}
                for b in (1024, 4096)
                for p in patterns
            ],
        }

    torch = sweep(
        "torch",
        ("allreduce", "reduce_broadcast", "parameter_server"),
        {"allreduce": 1.5, "reduce_broadcast": 0.75, "parameter_server": 0.25},
    )
    jax = sweep(
        "jax", ("allreduce", "parameter_server"), {"allreduce": 2.5, "parameter_server": 0.125}
    )

    def cells(text):
        lines = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("|")]
        return [[c.strip() for c in line] for line in lines if not line[0].strip().startswith("-")]

    header, t, j = cells(cells_table([torch, jax]))
    assert header[5:] == [
        "busbw GB/s all-reduce (largest)",
        "busbw GB/s reduce+broadcast",
        "busbw GB/s parameter server",
        "correct",
    ]
    assert t[5:] == ["1.5", "0.75", "0.25", "yes"] and j[5:] == ["2.5", "", "0.125", "yes"]
    header, j = cells(cells_table([jax]))
    assert header[5:] == [
        "busbw GB/s all-reduce (largest)",
        "busbw GB/s parameter server",
        "correct",
    ]
    assert j[5:] == ["2.5", "0.125", "yes"]


def test_merged_json_carries_the_speedup_of_cells_run_in_separate_children(tmp_path):
    """Each scaling cell's file is written by its own child, before the one-worker cell
    may exist; merged.json fills in speedup and efficiency from the cells side by side."""
    from xfbench.runner.store import RunFolder

    folder = RunFolder(tmp_path)

    def entry(workers, seconds):
        extra = {
            "kind": "scaling",
            "cell_id": f"fcn_r-torch-cpu-w{workers}-strong-b16",
            "network": "fcn_r",
            "framework": "torch",
            "device": "cpu",
            "precision": "fp32",
            "scale": "smoke",
            "scaling": "strong",
            "threads_per_worker": 1,
            "workers": workers,
            "global_batch": 16,
            "per_worker_batch": 16 // workers,
            "status": "ok",
            "seconds_per_batch": seconds,
            "samples_per_s": 16 / seconds,
            "speedup": None,
            "efficiency": None,
        }
        return {"machine_info": {}, "commit_info": {}, "benchmarks": [{"extra_info": extra}]}

    folder.write_result("scaling-w1", entry(1, 0.9))
    folder.write_result("scaling-w2", entry(2, 0.5))
    merged = json.loads(folder.merge({"suite": "scaling"}, {}).read_text())
    by_workers = {b["extra_info"]["workers"]: b["extra_info"] for b in merged["benchmarks"]}
    assert by_workers[2]["speedup"] == pytest.approx(1.8)
    assert by_workers[2]["efficiency"] == pytest.approx(0.9)
    assert by_workers[2]["speedup_baseline"] == "fcn_r-torch-cpu-w1-strong-b16"
