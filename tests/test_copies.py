"""Throughput past one process (`xfbench run --copies`): the CPU layout it reads, how the
CPUs are shared out, the copies' meeting, the record made from them, and the machine score
taking them where they beat one process."""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path

import pytest

from xfbench import topology
from xfbench.harness.copies import Copy
from xfbench.harness.threads import allowed_cpus
from xfbench.runner import cli
from xfbench.runner.store import RunFolder

CPUS = len(allowed_cpus())
NULL = ["--framework", "null", "--preset", "smoke", "--task", "train", "--device", "cpu"]


def fake_two_sockets(root: Path) -> Path:
    """sysfs of 2 sockets x 2 cores x 2 SMT threads, Linux's numbering: CPUs 0-3 one per
    core (0, 1 on socket 0; 2, 3 on socket 1), 4-7 their siblings; a NUMA node and an L3
    per socket."""
    socket_of = {0: 0, 1: 0, 2: 1, 3: 1, 4: 0, 5: 0, 6: 1, 7: 1}
    for cpu in range(8):
        core = cpu % 4
        topo = root / "cpu" / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{socket_of[cpu]}\n")
        (topo / "core_id").write_text(f"{core % 2}\n")
        (topo / "thread_siblings_list").write_text(f"{core},{core + 4}\n")
        cache = root / "cpu" / f"cpu{cpu}" / "cache" / "index3"
        cache.mkdir(parents=True)
        (cache / "shared_cpu_list").write_text("0-1,4-5\n" if socket_of[cpu] == 0 else "2-3,6-7\n")
    for node, cpus in ((0, "0-1,4-5"), (1, "2-3,6-7")):
        (root / "node" / f"node{node}").mkdir(parents=True)
        (root / "node" / f"node{node}" / "cpulist").write_text(cpus + "\n")
    return root


def test_a_two_socket_machine_is_described_and_its_cpus_shared_out_by_socket(tmp_path):
    root, every = fake_two_sockets(tmp_path), list(range(8))
    assert topology.describe(root, every) == {
        "sockets": 2,
        "numa_nodes": [[0, 1, 4, 5], [2, 3, 6, 7]],
        "l3_domains": [[0, 1, 4, 5], [2, 3, 6, 7]],
        "physical_cores": 4,
        "smt_siblings": [[0, 4], [1, 5], [2, 6], [3, 7]],
    }

    def sets(copies, threads):
        return topology.copy_cpus(copies, threads, root, every)

    # auto: one copy per group of physical cores, never a sibling while a core is free
    assert sets(None, 1) == [[0], [1], [2], [3]]
    # each copy inside one socket (NUMA node, L3 domain)
    assert sets(None, 2) == [[0, 1], [2, 3]] == sets(2, 2)
    assert sets(None, 4) == [[0, 1, 2, 3]]  # no socket holds 4 cores: one copy, across
    assert sets(4, 2) == [[0, 1], [2, 3], [4, 5], [6, 7]]  # then the SMT siblings
    with pytest.raises(ValueError, match="5 copies of 2 threads need 10 CPUs"):
        sets(5, 2)
    assert topology.parse_list("0-2,5,7-8") == [0, 1, 2, 5, 7, 8]


def test_this_machine_is_described_without_error():
    """Whatever the machine: every allowed CPU in exactly the NUMA nodes and L3 domains listed."""
    layout = topology.describe()
    for key in ("numa_nodes", "l3_domains"):
        assert sorted(c for group in layout[key] for c in group) == allowed_cpus()
    assert layout["sockets"] >= 1 and 1 <= layout["physical_cores"] <= CPUS


def test_copies_meet_before_their_rounds_and_one_alone_goes_on_after_the_wait(tmp_path):
    met, arrivals = [], []

    def copy(i, delay):
        time.sleep(delay)
        met.append(Copy(i, 2, tmp_path).meet("train-cell", "start", 5.0))
        arrivals.append(time.monotonic())

    threads = [threading.Thread(target=copy, args=(i, 0.3 * i)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert met == [True, True] and abs(arrivals[0] - arrivals[1]) < 0.2  # left together
    steps = []
    assert not Copy(0, 2, tmp_path).meet("train-other", "end", 0.05, step=lambda: steps.append(1))
    assert steps  # while waiting at the end, a copy keeps stepping


def _copy_doc(rounds, window, cpus_used=1.0):
    median = statistics.median(rounds)
    return {
        "machine_info": {},
        "benchmarks": [
            {
                "name": "test_train[c]",
                "param": "c",
                "stats": {"median": median, "data": rounds},
                "extra_info": {
                    "kind": "train",
                    "batch_size": 10,
                    "flops_per_step": 10**9,
                    "seconds_per_batch": median,
                    "copy_index": 0,
                    "copy_window_s": window,
                    "copies_together": True,
                    "threads_used": cpus_used,
                    "samples_per_kj": 5.0,
                },
            }
        ],
    }


def test_the_copies_record_sums_their_throughput_and_says_how_far_they_overlapped():
    from xfbench.adapters import Cell
    from xfbench.runner.copies import CopiesCell, merged_copies

    cell = Cell(
        network="fcn5", framework="null", mode="eager", precision="fp32", device="cpu",
        threads=1, batch_size=10,
    )  # fmt: skip
    docs = [_copy_doc([1.0, 1.0, 1.2], [100.0, 110.0]), _copy_doc([2.0, 2.0, 2.0], [101.0, 111.0])]
    doc = merged_copies(docs, CopiesCell(cell=cell, copies=2), [[0], [1]])
    extra = doc["benchmarks"][0]["extra_info"]
    assert extra["aggregate_samples_per_s"] == pytest.approx(10 / 1.0 + 10 / 2.0)
    assert extra["copy_medians_s"] == [1.0, 2.0] and extra["copy_cpus"] == [[0], [1]]
    assert extra["copies_spread"] == pytest.approx(1.0 / 1.5)
    # copy 0's rounds ran 9 of their 10 s with copy 1 running too; copy 1's all 10
    assert extra["copies_overlap"] == pytest.approx(0.9)
    assert doc["benchmarks"][0]["stats"]["data"] == [1.0, 1.0, 1.2, 2.0, 2.0, 2.0]
    assert doc["benchmarks"][0]["param"].endswith("-x2") and "copy_index" not in extra
    assert extra["samples_per_kj"] is None  # package counters see every copy: not split


@pytest.mark.parametrize(
    "args, words",
    [
        (["--copies", "0"], "--copies takes a count of 1 or more, or auto, not '0'"),
        (["--copies", "two"], "--copies takes a count of 1 or more"),
        (["--copies", str(CPUS + 1), "--threads", "1"], f"need {CPUS + 1} CPUs"),
        (["--copies", "2", "--suite", "scaling"], "--copies does not apply to --suite scaling"),
    ],
)
def test_bad_copies_are_one_line(tmp_path, capsys, args, words):
    results = tmp_path / "r"
    assert cli.main(NULL + ["--results", str(results)] + args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    assert not results.exists()


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
@pytest.mark.skipif(CPUS < 2, reason="two copies of one thread need two CPUs")
def test_two_copies_of_one_thread_run_at_once_each_on_its_own_cpu(tmp_path):
    """`xfbench run --copies 2 --threads 1`: two pinned processes per cell, timed together,
    one record with both copies' rounds and their aggregate samples/s; the report shows
    them and the machine score may take them."""
    folder = RunFolder(tmp_path / "r")
    argv = NULL + ["--model", "fcn_r", "--threads", "1", "--copies", "2"]
    assert cli.main(argv + ["--results", str(folder.root)]) == 0  # with its report
    [doc] = folder.results()
    extra = doc["benchmarks"][0]["extra_info"]
    assert extra["copies"] == 2 and len(extra["copy_cpus"]) == 2
    assert sorted(c for cpus in extra["copy_cpus"] for c in cpus) == allowed_cpus()[:2]
    assert extra["copies_together"] is True and 0 <= extra["copies_overlap"] <= 1
    # they left the meeting together: their timed rounds start within a poll or two
    # (a null step is microseconds, so these windows need not overlap; a real cell's do)
    starts = [w[0] for w in extra["copy_windows_s"]]
    assert max(starts) - min(starts) < 0.5
    batch = extra["batch_size"]
    assert extra["aggregate_samples_per_s"] == pytest.approx(
        sum(batch / m for m in extra["copy_medians_s"])
    )
    # each copy ran in its own process, pinned to its own CPU
    own = [
        json.loads(p.read_text())["benchmarks"][0]["extra_info"]
        for p in sorted((folder.root / "copies").glob("*/copy*/cells/*.json"))
    ]
    assert len(own) == 2 and own[0]["pid"] != own[1]["pid"]
    assert [o["threads_config"]["cpus_allowed"] for o in own] == [1, 1]
    md = (folder.root / "report.md").read_text()
    assert "## Throughput past one process" in md and "2 x 1t" in md
    merged = json.loads(folder.merged.read_text())
    assert merged["xfbench"]["machine"]["topology"]["physical_cores"] >= 1
    assert " socket" in md.split("## Machines")[1] and "NUMA node" in md.split("## Machines")[1]
    # run again into the same folder: finished, nothing runs
    assert cli.main(argv + ["--results", str(folder.root), "--quiet"]) == 0


def test_the_machine_score_takes_copies_where_they_beat_one_process(tmp_path):
    from test_report import entry, runner_folder

    from xfbench.report import score

    ref = runner_folder(tmp_path, "ref", [entry("fcn5", [2.0] * 3, threads=2)])
    two = entry("fcn5", [1.5] * 3, threads=1)  # each copy slower than one process ...
    two["extra_info"].update(
        copies=2, copy_rounds=[[1.5] * 3, [1.5] * 3], copies_together=True, copies_overlap=0.95
    )
    ours = runner_folder(tmp_path, "ours", [entry("fcn5", [1.0] * 3, threads=2), two])
    s = score.score(score.load_run(ours), score.load_run(ref))
    # ... but together 2 x 16 / 1.5 samples/s against 16 / 1.0: 2 / 1.5 x the reference's 2
    assert s.machine.value == pytest.approx(2.0 / 0.75)
    assert s.machine.winners[0].here.endswith("2 copies x 1 thread, batch 16")
    assert s.per_core.value == pytest.approx(2.0)  # the one-process cell at 2 threads


def test_copies_timed_apart_are_left_out_of_the_scores_and_named(tmp_path):
    from test_report import entry, runner_folder

    from xfbench.report import score

    ref = runner_folder(tmp_path, "ref", [entry("fcn5", [2.0] * 3, threads=2)])
    apart = entry("fcn5", [1.0] * 3, threads=1)  # would be 4x: but the copies never met
    apart["extra_info"].update(
        copies=2, copy_rounds=[[1.0] * 3] * 2, copies_together=False, copies_overlap=0.0
    )
    ours = runner_folder(tmp_path, "ours", [entry("fcn5", [1.0] * 3, threads=2), apart])
    s = score.score(score.load_run(ours), score.load_run(ref))
    assert s.machine.value == pytest.approx(2.0) and len(s.apart) == 1
    assert "left out: 1 multi-copy cells whose copies were not timed together" in (
        score.describe(s)
    )


def test_runs_without_rounds_get_no_interval_rather_than_a_point(tmp_path):
    from test_report import entry, runner_folder

    from xfbench.report import score

    def bare(seconds):
        e = entry("fcn5", [seconds] * 3)
        del e["stats"]["data"]  # a file from before rounds were kept
        return e

    s = score.score(
        score.load_run(runner_folder(tmp_path, "a", [bare(1.0)])),
        score.load_run(runner_folder(tmp_path, "b", [bare(2.0)])),
    )
    assert s.machine.low is None and s.machine.unrounded == 2
    assert score.value_text(s.machine) == "2 (no interval: the runs recorded no rounds)"


def test_two_copies_only_runs_of_one_host_stay_two_machines(tmp_path):
    from test_report import entry, runner_folder

    from xfbench.networks.report.cells import machine_cells
    from xfbench.report import load, model

    def copies_run(name, seconds):
        e = entry("fcn5", [seconds] * 3)
        e["extra_info"].update(copies=2, copy_rounds=[[seconds] * 3] * 2)
        return load.load(runner_folder(tmp_path, name, [e]))

    machines = model.group_machines([copies_run("one", 1.0), copies_run("two", 2.0)])
    assert [len(machine_cells(m).copies) for m in machines] == [1, 1]


def test_an_interrupted_group_of_copies_keeps_the_cells_every_copy_finished(tmp_path):
    """combine() writes a cell whose copies all wrote a new record in this run; without
    them it writes a failure only when asked (not after an interrupt), and an old record
    left by an earlier run is not taken for a new one."""
    from xfbench.adapters import Cell
    from xfbench.runner.copies import CopiesCell, _copy_folder, combine
    from xfbench.runner.group import Group, Job, key

    def cell(network):
        return Cell(
            network=network, framework="null", mode="eager", precision="fp32", device="cpu",
            threads=1, batch_size=10,
        )  # fmt: skip

    done, left = CopiesCell(cell=cell("fcn5"), copies=2), CopiesCell(cell=cell("fcn8"), copies=2)
    job = Job(Group("null", "cpu", 1, part="x2"), [done, left], {}, [[0], [1]])
    folder = RunFolder(tmp_path / "r")
    subs = [_copy_folder(folder, job, i) for i in range(2)]
    subs[0].write_result(key(left.cell), _copy_doc([1.0] * 3, [0.0, 1.0]))  # an old record
    before = {c.id: [s.stamps(key(c.cell)) for s in subs] for c in (done, left)}
    for s in subs:
        s.write_result(key(done.cell), _copy_doc([1.0] * 3, [0.0, 1.0]))
    for c in (done, left):
        combine(c, job, folder, before[c.id], failures=False)
    assert folder.has_result(key(done)) and not folder.has_result(key(left))
    assert folder.failure(key(left)) is None  # interrupted: runs again, not a failure
    combine(left, job, folder, before[left.id])
    assert "copy 0 of 2 (CPUs 0)" in folder.failure(key(left))["reason"]


@pytest.mark.skipif(CPUS < 2, reason="two copies of one thread need two CPUs")
def test_copies_without_threads_run_the_thread_counts_where_they_fit():
    from xfbench.plugin import declared
    from xfbench.runner.plan import make_plan

    plan = make_plan(
        declared()["single"],
        dict(framework="null", preset="smoke", device="cpu", task="train", copies="2"),
    )
    assert plan.selection["threads"] and plan.jobs
    assert all(len(job.copies) == 2 and 2 * job.group.threads <= CPUS for job in plan.jobs)


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
@pytest.mark.skipif(CPUS < 2, reason="two copies of one thread need two CPUs")
def test_ctrl_c_stops_every_copy_and_keeps_the_cells_they_finished(tmp_path):
    """The first Ctrl-C during a group of copies stops both copies' children, keeps the cell
    they had both finished (written as it finished), records no failure for the cell in
    flight, and exits 130."""
    import os
    import signal
    import subprocess
    import sys

    import psutil

    from xfbench.plugin import declared
    from xfbench.runner.plan import make_plan

    plan = make_plan(declared()["single"], dict(
        framework="null", preset="smoke", device="cpu", task="train", model="fcn5,fcn8",
        threads="1", copies="2",
    ))  # fmt: skip
    first, hung = plan.jobs[0].cells
    results = tmp_path / "r"
    env = {**os.environ, "XFBENCH_FAULT": f"train-{hung.cell.id}:sleep"}
    argv = [sys.executable, "-m", "xfbench.harness.cli", "run", *NULL, "--model", "fcn5,fcn8"]
    argv += ["--threads", "1", "--copies", "2", "--results", str(results), "--quiet"]
    # Ctrl-C as a terminal delivers it: a shell that starts this suite in the background
    # (`... &`, no job control) hands it SIGINT ignored, and the runner would inherit that.
    proc = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    done = results / "cells" / f"train-{first.id}.json"
    deadline = time.monotonic() + 120
    while not done.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert done.exists(), proc.communicate(timeout=5)
    time.sleep(1)  # both copies are now in the hung cell
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()[-2000:]
    assert not (results / "failed" / f"train-{hung.id}.json").exists()
    left = [
        p
        for p in psutil.process_iter(["environ"])
        if str(results) in ((p.info.get("environ") or {}).get("XFBENCH_CELL_DIR") or "")
    ]
    assert not left, left
