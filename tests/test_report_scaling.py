"""The report's data-parallel scaling and all-reduce sections, from fabricated
pytest-benchmark records of the shape the scaling and all-reduce suites write: tables,
speedup and efficiency (the suite's, or computed from the 1-worker cell, or n/a), plots,
CSV rows, failures, and no trace of them in Table 7."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from xfbench.networks.report.model import table7_content
from xfbench.report import render
from xfbench.report.load import load
from xfbench.report.model import build

H100 = "NVIDIA H100 80GB HBM3"


def machine_info(host: str = "alpha") -> dict:
    return {
        "node": host,
        "cpu": {"brand_raw": "Test CPU 9000"},
        "xfbench": {
            "cpu_model": "Test CPU 9000",
            "cores_physical": 8,
            "cores_logical": 16,
            "memory_bytes": 64 * 2**30,
            "gpus": [],
        },
    }


def stats(times: list[float]) -> dict:
    return {
        "min": min(times),
        "max": max(times),
        "mean": statistics.fmean(times),
        "median": statistics.median(times),
        "rounds": len(times),
        "iterations": 1,
        "data": times,
    }


def scaling_entry(
    network: str,
    framework: str,
    workers: int,
    times: list[float],
    *,
    scaling="strong",
    batch=16,
    device="cpu",
    speedup=None,
    efficiency=None,
    comm_share=None,
    backend=None,
    threads_per_worker=2,
    status="ok",
    reason=None,
) -> dict:
    """A scaling cell as the contract's record: ScalingCell fields, kind "scaling"."""
    global_batch = batch if scaling == "strong" else batch * workers
    per_worker = batch // workers if scaling == "strong" else batch
    median = statistics.median(times)
    cid = f"{network}-{framework}-{device}-w{workers}-{scaling}-b{batch}"
    extra = {
        "kind": "scaling",
        "network": network,
        "framework": framework,
        "device": device,
        "workers": workers,
        "scaling": scaling,
        "batch": batch,
        "threads_per_worker": threads_per_worker,
        "precision": "fp32",
        "scale": "smoke",
        "global_batch": global_batch,
        "per_worker_batch": per_worker,
        "preset": "smoke",
        "status": status,
        "seconds_per_batch": median,
        "samples_per_s": global_batch / median,
        "speedup": speedup,
        "efficiency": efficiency,
        "speedup_baseline": None,
        "backend": backend or ("gloo" if framework == "torch" else "XLA all-reduce"),
        "comm_share": comm_share,
        "comm_share_how": "1 - median(no_sync step) / median(step)"
        if comm_share is not None
        else "not exposed",
        "compile_s": 0.5,
        "rounds": len(times),
        "replicas_agree": True,
        "replicas_max_diff": 0.0,
        "threads_used": 1.9,
        "device_name": H100 if device == "cuda" else "cpu",
        "versions": {},
    }
    if reason:
        extra["reason"] = reason
    return {
        "group": f"scaling {network} {scaling}",
        "name": f"test_scaling[{cid}]",
        "param": cid,
        "extra_info": extra,
        "stats": stats(times),
    }


PATTERNS = {
    "torch": ("allreduce", "reduce_broadcast", "parameter_server"),
    "jax": ("allreduce", "parameter_server"),
}


def allreduce_entry(
    framework: str,
    world_size: int,
    sizes=(1024, 2**20),
    *,
    backend="gloo",
    device="cpu",
    slow_reduce=2.0,
    wrong=(),
    patterns=None,
) -> dict:
    """One all-reduce sweep: a row per (pattern, size); algbw and busbw per nccl-tests.
    patterns: those the framework's worker measures (torch three, jax two)."""
    rows = []
    slowness = {
        "allreduce": 1.0,
        "reduce_broadcast": slow_reduce,
        "parameter_server": slow_reduce * world_size,
    }
    for size in sizes:
        for pattern in patterns or PATTERNS[framework]:
            slow = slowness[pattern]
            seconds = (1e-5 + size / 1e9) * slow * world_size
            algbw = size / seconds / 1e9
            rows.append(
                {
                    "kind": "allreduce",
                    "framework": framework,
                    "backend": backend,
                    "device": device,
                    "device_name": "cpu",
                    "world_size": world_size,
                    "pattern": pattern,
                    "dtype": "fp32",
                    "bytes": size,
                    "count": size // 4,
                    "status": "ok",
                    "seconds": seconds,
                    "algbw_gbps": algbw,
                    "busbw_gbps": algbw * 2 * (world_size - 1) / world_size,
                    "correct": (size, pattern) not in wrong,
                    "max_abs_err": 1.0 if (size, pattern) in wrong else 0.0,
                    "rounds": 5,
                    "versions": {},
                }
            )
    biggest = max(r["seconds"] for r in rows if r["pattern"] == "allreduce")
    tid = f"{framework}-{device}-n{world_size}"
    return {
        "group": f"allreduce {framework} {backend} n{world_size}",
        "name": f"test_allreduce[{tid}]",
        "param": tid,
        "extra_info": {
            "kind": "allreduce_sweep",
            "framework": framework,
            "backend": backend,
            "device": device,
            "world_size": world_size,
            "rows": rows,
        },
        "stats": stats([biggest] * 3),
    }


def table7_entry(network="resnet56", threads=1, median=2.0) -> dict:
    cell = {
        "network": network,
        "framework": "torch",
        "mode": "eager",
        "precision": "fp32",
        "device": "cpu",
        "threads": threads,
        "batch_size": 16,
        "task": "train",
        "data": "resident",
        "scale": "full",
    }
    return {
        "group": f"train {network}",
        "name": "test_train[x]",
        "param": "x",
        "extra_info": {
            **cell,
            "status": "ok",
            "seconds_per_batch": median,
            "samples_per_s": 16 / median,
            "device_name": "cpu",
        },
        "stats": stats([median] * 3),
    }


def document(benchmarks: list, failures=()) -> dict:
    return {
        "machine_info": machine_info(),
        "commit_info": {},
        "datetime": "2026-01-01",
        "version": "5.3.1",
        "benchmarks": benchmarks,
        "xfbench": {"failures": list(failures), "selection": {}},
    }


def write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def standard() -> list:
    """resnet56 and fcn_r on torch and jax, 1 and 2 workers, strong scaling; torch's
    records carry the suite's speedup, jax's do not (the report computes them)."""
    out = []
    for net, t1 in (("resnet56", 0.4), ("fcn_r", 0.1)):
        out.append(scaling_entry(net, "torch", 1, [t1] * 3, speedup=1.0, efficiency=1.0))
        out.append(
            scaling_entry(
                net, "torch", 2, [t1 / 1.6] * 3, speedup=1.6, efficiency=0.8, comm_share=0.25
            )
        )
        out.append(scaling_entry(net, "jax", 1, [t1 * 1.2, t1, t1 * 0.9]))
        out.append(scaling_entry(net, "jax", 2, [t1 / 1.5] * 3))
    return out


# ------------------------------------------------------------------ tests


def test_scaling_entries_never_become_table7_rows(tmp_path):
    path = write(
        tmp_path / "mixed.json",
        document(standard() + [allreduce_entry("torch", 2), table7_entry()]),
    )
    run = load(path)
    cells = run.of("train", "infer")
    assert len(cells) == 1 and cells[0].network == "resnet56"  # the Table 7 cell only
    assert len(run.of("scaling")) == 8 and len(run.of("allreduce")) == 1
    assert run.problems == []
    rep = build([run])
    assert [b.key[1] for b in table7_content(rep).blocks] == ["resnet56"]
    assert [row.label for row in table7_content(rep).blocks[0].rows] == ["PyTorch eager"]
    assert len(table7_content(rep).details) == 1
    render([path], tmp_path / "out", ["csv"])
    rows = read_csv(tmp_path / "out" / "report.csv")
    assert [(r["network"], r["framework"]) for r in rows] == [("resnet56", "torch")]


def test_scaling_table_speedup_efficiency_and_comm(tmp_path):
    path = write(tmp_path / "scaling.json", document(standard()))
    written = render([path], tmp_path / "out", ["md", "html", "csv"])
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Data-parallel scaling" in md and "### Strong scaling" in md
    assert "## Table 7" not in md and "## Plots" not in md  # nothing single-device to show
    # headers: per worker count, seconds, samples/s, speedup, efficiency, comm share
    assert "1w s/step" in md and "2w speedup" in md and "2w eff." in md and "2w comm" in md
    line = next(x for x in md.splitlines() if x.startswith("| ResNet-56") and "| torch" in x)
    assert "1.60x" in line and "80%" in line and "25%" in line and "gloo" in line
    jax = next(x for x in md.splitlines() if x.startswith("| ResNet-56") and "| jax" in x)
    assert "1.50x" in jax and "75%" in jax  # computed here: 0.4 / (0.4 / 1.5)

    rows = read_csv(tmp_path / "out" / "report-scaling.csv")
    assert len(rows) == 8
    by = {(r["network"], r["framework"], r["workers"]): r for r in rows}
    torch2 = by[("resnet56", "torch", "2")]
    assert float(torch2["seconds_per_step"]) == pytest.approx(0.4 / 1.6, rel=1e-12)
    assert float(torch2["samples_per_s"]) == pytest.approx(16 / (0.4 / 1.6), rel=1e-12)
    assert float(torch2["speedup"]) == 1.6 and torch2["speedup_from"] == "record"
    assert float(torch2["comm_share"]) == 0.25 and torch2["backend"] == "gloo"
    jax2 = by[("fcn_r", "jax", "2")]
    assert float(jax2["speedup"]) == pytest.approx(1.5, rel=1e-12)
    assert float(jax2["efficiency"]) == pytest.approx(0.75, rel=1e-12)
    assert jax2["speedup_from"] == "report"
    # the 1-worker jax cell's time is its stats.median, not the mean
    assert float(by[("fcn_r", "jax", "1")]["seconds_per_step"]) == pytest.approx(0.1)

    # one efficiency plot per network and kind, in the md and inline in the html
    plots = sorted(p.name for p in written if p.suffix == ".png")
    assert plots == ["efficiency-strong-fcn_r-smoke.png", "efficiency-strong-resnet56-smoke.png"]
    assert all(p.stat().st_size > 1000 for p in written if p.suffix == ".png")
    assert "plots/efficiency-strong-resnet56-smoke.png" in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Data-parallel scaling" in html and html.count("data:image/png;base64,") == 2
    # a group header per worker count; comm only where there is communication
    assert '<th colspan="4" class="group">1 worker</th>' in html
    assert '<th colspan="5" class="group">2 workers</th>' in html
    assert "1w comm" not in md


def test_missing_one_worker_baseline_is_not_available_not_a_number(tmp_path):
    # weak scaling at 2 and 4 workers, no 1-worker cell and no speedup in the records
    entries = [
        scaling_entry("resnet56", "torch", w, [0.5] * 3, scaling="weak", batch=8) for w in (2, 4)
    ]
    path = write(tmp_path / "weak.json", document(entries))
    render([path], tmp_path / "out", ["md", "csv"])
    md = (tmp_path / "out" / "report.md").read_text()
    assert "### Weak scaling" in md
    line = next(x for x in md.splitlines() if x.startswith("| ResNet-56"))
    assert line.count("n/a") == 4  # speedup and efficiency, at 2 and at 4 workers
    assert "1.00x" not in line and "2.00x" not in line
    rows = read_csv(tmp_path / "out" / "report-scaling.csv")
    assert [r["speedup"] for r in rows] == ["", ""]
    assert [r["efficiency"] for r in rows] == ["", ""]
    # weak scaling: samples/s of the global batch = per-worker batch x workers / step
    assert [float(r["samples_per_s"]) for r in rows] == pytest.approx([16 / 0.5, 32 / 0.5])


def test_weak_speedup_from_samples_per_second(tmp_path):
    entries = [
        scaling_entry("fcn_r", "torch", 1, [0.10] * 3, scaling="weak", batch=8),
        scaling_entry("fcn_r", "torch", 2, [0.125] * 3, scaling="weak", batch=8),
    ]
    path = write(tmp_path / "weak.json", document(entries))
    render([path], tmp_path / "out", ["csv"])
    rows = {r["workers"]: r for r in read_csv(tmp_path / "out" / "report-scaling.csv")}
    # 16 samples in 0.125 s against 8 in 0.1 s
    assert float(rows["2"]["speedup"]) == pytest.approx(1.6)
    assert float(rows["2"]["efficiency"]) == pytest.approx(0.8)
    assert float(rows["1"]["speedup"]) == 1.0


def test_failed_scaling_cells_are_listed_with_their_reasons(tmp_path):
    # as the runner writes it for a crash: it does not know the suite's threads per worker
    crashed = {
        "cell": {
            "kind": "scaling",
            "network": "resnet56",
            "framework": "torch",
            "device": "cpu",
            "workers": 2,
            "scaling": "strong",
            "batch": 16,
            "threads_per_worker": None,
            "precision": "fp32",
            "scale": "smoke",
        },
        "status": "timeout",
        "reason": "no result within 120 s (--cell-timeout); process killed",
        "output_tail": "...",
    }
    disagree = scaling_entry(
        "fcn_r", "jax", 2, [0.1], status="failed", reason="replicas disagree: max diff 0.3"
    )
    ok = scaling_entry("resnet56", "torch", 1, [0.4] * 3)
    folder = tmp_path / "2026-01-01-alpha"
    (folder / "cells").mkdir(parents=True)
    (folder / "failed").mkdir()
    write(folder / "cells" / "scaling-a.json", document([ok, disagree]))
    write(folder / "failed" / "scaling-resnet56-torch-cpu-w2-strong-b16.json", crashed)
    render([folder], folder, ["md", "html", "csv"])
    md = (folder / "report.md").read_text()
    assert "### Failed scaling cells" in md
    assert "timeout: no result within 120 s" in md and "failed: replicas disagree" in md
    [line] = [x for x in md.splitlines() if x.startswith("| ResNet-56")]  # one row, both cells
    assert "timeout [" in line and "| 0.4 " in line
    rows = read_csv(folder / "report-scaling.csv")
    statuses = sorted((r["network"], r["workers"], r["status"]) for r in rows)
    assert statuses == [
        ("fcn_r", "2", "failed"),
        ("resnet56", "1", "ok"),
        ("resnet56", "2", "timeout"),
    ]
    assert not read_csv(folder / "report.csv")  # no Table 7 rows from these failures
    html = (folder / "report.html").read_text()
    assert "replicas disagree" in html and 'id="fn1"' in html


def test_allreduce_tables_plot_and_csv(tmp_path):
    entries = [
        allreduce_entry("torch", n, wrong={(2**20, "reduce_broadcast")} if n == 4 else ())
        for n in (1, 2, 4)
    ]
    path = write(tmp_path / "allreduce.json", document(entries))
    written = render([path], tmp_path / "out", ["md", "html", "csv"])
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## All-reduce bandwidth" in md
    for n in ("1 worker", "2 workers", "4 workers"):
        assert f"### All-reduce, torch gloo on cpu, {n}" in md
    assert "all-reduce busbw GB/s" in md and "reduce + broadcast busbw GB/s" in md
    assert "| 1 KiB" in md and "| 1 MiB" in md
    assert "NO [1]" in md and "incorrect: wrong result" in md
    rows = read_csv(tmp_path / "out" / "report-allreduce.csv")
    assert len(rows) == 3 * 2 * 3  # world sizes x sizes x patterns
    r = next(
        r
        for r in rows
        if r["world_size"] == "4" and r["pattern"] == "allreduce" and r["bytes"] == "1048576"
    )
    seconds = float(r["seconds"])
    assert float(r["algbw_gbps"]) == pytest.approx(2**20 / seconds / 1e9, rel=1e-12)
    assert float(r["busbw_gbps"]) == pytest.approx(float(r["algbw_gbps"]) * 2 * 3 / 4, rel=1e-12)
    one = [r for r in rows if r["world_size"] == "1"]
    assert all(float(r["busbw_gbps"]) == 0.0 for r in one)
    assert [p.name for p in written if p.suffix == ".png"] == ["busbw-torch-gloo-cpu-0.png"]
    html = (tmp_path / "out" / "report.html").read_text()
    assert "All-reduce bandwidth" in html and "reduce + broadcast" in html


def _md_table(md: str, heading: str) -> list[list[str]]:
    """The cells of the Markdown table under a heading (header row first)."""
    lines = md.splitlines()
    start = lines.index(heading)
    table = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            table.append([c.strip() for c in line.strip("|").split("|")])
        elif table:
            break
    return [row for row in table if not set("".join(row)) <= set("-: ")]


def test_allreduce_sweeps_with_three_and_with_two_patterns(tmp_path):
    """torch measures three patterns, jax two: each table has the columns of its own
    patterns and none empty; the plots and the CSV take both."""
    entries = [
        allreduce_entry("torch", 2),
        allreduce_entry("jax", 2, backend="xla", wrong={(1024, "parameter_server")}),
    ]
    path = write(tmp_path / "x.json", document(entries))
    written = render([path], tmp_path / "out", ["md", "html", "csv"])
    md = (tmp_path / "out" / "report.md").read_text()
    torch_table = _md_table(md, "### All-reduce, torch gloo on cpu, 2 workers")
    jax_table = _md_table(md, "### All-reduce, jax xla on cpu, 2 workers")
    assert [h for h in torch_table[0] if h.endswith("busbw GB/s")] == [
        "all-reduce busbw GB/s",
        "reduce + broadcast busbw GB/s",
        "parameter server busbw GB/s",
    ]
    assert [h for h in jax_table[0] if h.endswith("busbw GB/s")] == [
        "all-reduce busbw GB/s",
        "parameter server busbw GB/s",
    ]
    for table in (torch_table, jax_table):
        assert len(table) == 3  # header, 1 KiB, 1 MiB
        assert all(len(row) == len(table[0]) for row in table)
        for col in range(len(table[0])):  # no column without a value
            assert any(row[col] for row in table[1:]), table[0][col]
    # the parameter server is slower than all-reduce in the stand-in numbers
    ps = torch_table[0].index("parameter server busbw GB/s")
    ar = torch_table[0].index("all-reduce busbw GB/s")
    assert float(torch_table[2][ps]) < float(torch_table[2][ar])
    assert "parameter server of 1024 bytes: incorrect" in md
    rows = read_csv(tmp_path / "out" / "report-allreduce.csv")
    assert sorted((r["framework"], r["pattern"]) for r in rows if r["bytes"] == "1024") == [
        ("jax", "allreduce"),
        ("jax", "parameter_server"),
        ("torch", "allreduce"),
        ("torch", "parameter_server"),
        ("torch", "reduce_broadcast"),
    ]
    assert sorted(p.name for p in written if p.suffix == ".png") == [
        "busbw-jax-xla-cpu-0.png",
        "busbw-torch-gloo-cpu-0.png",
    ]
    assert "parameter server" in (tmp_path / "out" / "report.html").read_text()


def test_a_sweep_marked_failed_for_a_wrong_row_shows_that_row(tmp_path):
    sweep = allreduce_entry("torch", 2, wrong={(1024, "allreduce")})
    sweep["extra_info"]["status"] = "failed"  # as the suite marks it
    path = write(tmp_path / "x.json", document([sweep]))
    render([path], tmp_path / "out", ["md"])
    md = (tmp_path / "out" / "report.md").read_text()
    [line] = [x for x in md.splitlines() if x.startswith("- [")]
    assert "all-reduce of 1024 bytes: incorrect: wrong result" in line
    assert "| 1 MiB" in md  # the sweep's other rows are shown


def test_a_crashed_allreduce_sweep_is_a_failure_line(tmp_path):
    crashed = {
        "cell": {"kind": "allreduce_sweep", "framework": "jax", "device": "cpu", "world_size": 2},
        "status": "killed",
        "reason": "process died from SIGKILL",
        "output_tail": "",
    }
    path = write(tmp_path / "x.json", document([allreduce_entry("torch", 2)], failures=[crashed]))
    render([path], tmp_path / "out", ["md"])
    md = (tmp_path / "out" / "report.md").read_text()
    assert "all-reduce jax on cpu, world size 2: killed: process died from SIGKILL" in md
    assert "## Table 7" not in md


def test_bad_scaling_entries_are_left_out_with_a_reason(tmp_path):
    no_stats = scaling_entry("fcn_r", "torch", 2, [0.1])
    del no_stats["stats"]
    no_rows = allreduce_entry("torch", 2)
    del no_rows["extra_info"]["rows"]
    good = scaling_entry("fcn_r", "torch", 1, [0.1])
    path = write(tmp_path / "x.json", document([no_stats, no_rows, good]))
    run = load(path)
    assert len(run.of("scaling")) == 1 and run.of("allreduce") == []
    assert any("no stats" in p for p in run.problems)
    assert any("without a 'rows' list" in p for p in run.problems)
