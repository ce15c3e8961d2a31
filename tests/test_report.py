"""The report renderer: numbers reproduced from the JSON, bad input, machines side by
side, procurement, HTML escaping, the paper's numbers."""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from pathlib import Path

import pytest

from xfbench.networks.report.model import table7_content
from xfbench.report import render, render_folder
from xfbench.report.cli import main
from xfbench.report.procurement import PricesError, figures, load_prices

DATA = Path(__file__).parent / "data"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"


# ------------------------------------------------------------------ fixtures


def machine_info(host: str, cpu: str = "Test CPU 9000", gpus=()) -> dict:
    return {
        "node": host,
        "cpu": {"brand_raw": cpu},
        "xfbench": {
            "cpu_model": cpu,
            "cores_physical": 8,
            "cores_logical": 16,
            "memory_bytes": 64 * 2**30,
            "gpus": [{"index": i, "name": g} for i, g in enumerate(gpus)],
        },
    }


def entry(
    network: str,
    times: list[float],
    *,
    framework="torch",
    mode="eager",
    threads=1,
    device="cpu",
    device_name=None,
    task="train",
    batch=16,
    precision="fp32",
) -> dict:
    """A benchmark entry as pytest-benchmark and the harness write it."""
    median = statistics.median(times)
    flops = 1_000_000_000
    cell = {
        "network": network,
        "framework": framework,
        "mode": mode,
        "precision": precision,
        "device": device,
        "threads": threads,
        "batch_size": batch,
        "task": task,
        "data": "resident",
        "scale": "full",
    }
    extra = {
        **cell,
        "status": "ok",
        "seconds_per_batch": median,
        "samples_per_s": batch / median,
        "flops_per_step": flops,
        "achieved_tflops": flops / median / 1e12,
        "compile_s": 1.5,
        "rounds": len(times),
        "peak_host_rss_bytes": 500 * 2**20,
        "peak_device_bytes": 2**30 if device != "cpu" else None,
        "threads_used": threads,
        "device_name": device_name or device,
    }
    cid = f"{framework}-{network}-{mode}-{precision}-{device.replace(':', '')}-t{threads}-b{batch}"
    return {
        "group": f"{task} {network}",
        "name": f"test_{task}[{cid}]",
        "param": cid,
        "extra_info": extra,
        "stats": {
            "min": min(times),
            "max": max(times),
            "mean": statistics.fmean(times),
            "median": median,
            "rounds": len(times),
            "iterations": 1,
            "data": times,
        },
    }


def failure(network: str, status: str, reason: str, **cell) -> dict:
    base = {
        "network": network,
        "framework": "torch",
        "mode": "eager",
        "precision": "fp32",
        "device": "cpu",
        "threads": 1,
        "batch_size": 16,
        "task": "train",
        "data": "resident",
        "scale": "full",
    }
    return {
        "cell": {**base, **cell},
        "status": status,
        "reason": reason,
        "output_tail": "Traceback ...\nRuntimeError: boom",
    }


def document(host: str, benchmarks: list, failures=(), gpus=(), **top) -> dict:
    return {
        "machine_info": machine_info(host, gpus=gpus),
        "commit_info": {},
        "datetime": "2026-01-01",
        "version": "5.3.1",
        "benchmarks": benchmarks,
        "xfbench": {"failures": list(failures), "selection": {}, **top},
    }


def runner_folder(
    root: Path, name: str, benchmarks: list, failures=(), gpus=(), merged=True, **top
) -> Path:
    folder = root / name
    (folder / "cells").mkdir(parents=True)
    (folder / "failed").mkdir()
    for i, b in enumerate(benchmarks):
        one = document(name, [b], gpus=gpus)
        del one["xfbench"]
        (folder / "cells" / f"cell{i}.json").write_text(json.dumps(one))
    for i, f in enumerate(failures):
        (folder / "failed" / f"fail{i}.json").write_text(json.dumps(f))
    if merged:
        (folder / "merged.json").write_text(
            json.dumps(document(name, benchmarks, failures, gpus, **top))
        )
    return folder


def standard(factor: float = 1.0) -> list:
    """Two networks at 1 and 2 threads and on a GPU, two frameworks; times scaled by factor."""
    out = []
    for net, base in (("resnet56", 2.0), ("fcn5", 0.1)):
        for fw, slow in (("torch", 1.0), ("tensorflow", 1.5)):
            for t in (1, 2):
                out.append(
                    entry(
                        net,
                        [
                            x * factor
                            for x in (
                                base * slow / t * 0.98,
                                base * slow / t,
                                base * slow / t * 1.1,
                            )
                        ],
                        framework=fw,
                        threads=t,
                        batch=128 if net == "resnet56" else 64,
                    )
                )
        out.append(
            entry(
                net,
                [base * factor / 50] * 3,
                device="cuda:0",
                device_name=H100,
                threads=8,
                batch=128 if net == "resnet56" else 64,
            )
        )
    return out


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def cli(*argv) -> int:
    return main([str(a) for a in argv])


# ------------------------------------------------------------------ numbers


def _check_csv_against(doc: dict, rows: list[dict]) -> int:
    ours = {
        (r["task"], r["network"], r["framework"], r["mode"], r["device"], r["threads"]): r
        for r in rows
        if r["source"] == "xfbench" and r["status"] == "ok"
    }
    checked = 0
    for b in doc["benchmarks"]:
        e = b["extra_info"]
        row = ours[
            (e["task"], e["network"], e["framework"], e["mode"], e["device"], str(e["threads"]))
        ]
        median = statistics.median(b["stats"]["data"])  # recomputed from the raw rounds
        assert float(row["seconds_per_batch"]) == pytest.approx(median, rel=1e-12)
        assert float(row["samples_per_s"]) == pytest.approx(e["batch_size"] / median, rel=1e-12)
        assert float(row["achieved_tflops"]) == pytest.approx(
            e["flops_per_step"] / median / 1e12, rel=1e-12
        )
        assert float(row["compile_s"]) == pytest.approx(e["compile_s"])
        assert int(row["peak_host_rss_bytes"]) == e["peak_host_rss_bytes"]
        checked += 1
    return checked


def test_csv_reproduces_every_median_of_a_runner_folder(tmp_path):
    folder = runner_folder(tmp_path, "2026-01-01-alpha", standard())
    render([folder], tmp_path / "out", ["csv"])
    rows = read_csv(tmp_path / "out" / "report.csv")
    doc = json.loads((folder / "merged.json").read_text())
    assert _check_csv_against(doc, rows) == len(doc["benchmarks"]) == 10
    # speedup and parallel efficiency over one thread
    r2 = next(
        r
        for r in rows
        if r["network"] == "resnet56"
        and r["framework"] == "torch"
        and r["threads"] == "2"
        and r["device"] == "cpu"
    )
    assert float(r2["speedup_vs_1t"]) == pytest.approx(2.0)
    assert float(r2["parallel_efficiency"]) == pytest.approx(1.0)


def test_csv_reproduces_a_real_pytest_benchmark_file(tmp_path):
    render([DATA / "torch_smoke_t1.json"], tmp_path, ["csv"])
    doc = json.loads((DATA / "torch_smoke_t1.json").read_text())
    assert _check_csv_against(doc, read_csv(tmp_path / "report.csv")) == len(doc["benchmarks"])


def test_table7_layout_best_marks_and_failures(tmp_path):
    fails = [
        failure(
            "resnet56",
            "oom",
            "CUDA out of memory",
            device="cuda:0",
            threads=8,
            framework="tensorflow",
            batch_size=128,
        )
    ]
    folder = runner_folder(tmp_path, "run", standard(), fails, gpus=[H100])
    written = render_folder(folder)
    assert folder / "report.md" in written and folder / "report.html" in written
    md = (folder / "report.md").read_text()
    block = md.split("### ResNet-56")[1].split("###")[0]
    assert "| 1t" in block and "| 2t" in block and H100 in block
    torch_row = next(line for line in block.splitlines() if line.startswith("| PyTorch eager"))
    assert "**2**" in torch_row and "**1**" in torch_row  # best of the 1t and 2t columns
    tf_row = next(line for line in block.splitlines() if line.startswith("| TensorFlow eager"))
    assert "oom [1]" in tf_row  # never blank
    assert "[1] " in md and "CUDA out of memory" in md
    assert any(p.suffix == ".png" for p in written)
    assert (folder / "plots").is_dir()


def test_folder_without_merged_reads_cells_and_failed(tmp_path):
    fails = [failure("fcn5", "timeout", "ran past 600 s", threads=4, batch_size=64)]
    folder = runner_folder(tmp_path, "run", standard()[:3], fails, merged=False)
    render([folder], tmp_path / "out", ["csv"])
    rows = read_csv(tmp_path / "out" / "report.csv")
    assert sum(r["status"] == "ok" for r in rows) == 3
    assert [r["reason"] for r in rows if r["status"] == "timeout"] == ["ran past 600 s"]


# ------------------------------------------------------------------ bad input


def test_truncated_file_is_one_clear_line(tmp_path, capsys):
    bad = tmp_path / "cut.json"
    bad.write_text((DATA / "torch_smoke_t1.json").read_text()[:500])
    assert cli(bad, "--out", tmp_path / "o") == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "malformed or truncated JSON" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "content, words",
    [
        ("[1, 2, 3]", "not a pytest-benchmark JSON file"),
        ('{"hello": "world"}', "no 'benchmarks' list"),
        ("", "empty file"),
        ('{"benchmarks": [{"name": "x", "stats": {"median": 1}}]}', "no xfbench results"),
    ],
)
def test_foreign_files_name_the_file(tmp_path, capsys, content, words):
    bad = tmp_path / "foreign.json"
    bad.write_text(content)
    assert cli(bad, "--out", tmp_path / "o") == 1
    err = capsys.readouterr().err
    assert str(bad) in err and words in err and len(err.strip().splitlines()) == 1


def test_folder_with_some_bad_files_reports_the_rest(tmp_path):
    folder = runner_folder(tmp_path, "run", standard()[:2], merged=False)
    (folder / "cells" / "train-broken.json").write_text('{"benchmarks": [')
    (folder / "cells" / "train-foreign.json").write_text('{"something": "else"}')
    render([folder], folder, ["md", "csv"])
    md = (folder / "report.md").read_text()
    assert "## Left out" in md and "train-broken.json" in md and "train-foreign.json" in md
    assert sum(r["status"] == "ok" for r in read_csv(folder / "report.csv")) == 2


def test_merged_json_truncated_falls_back_to_cells(tmp_path):
    folder = runner_folder(tmp_path, "run", standard()[:2])
    (folder / "merged.json").write_text((folder / "merged.json").read_text()[:100])
    render([folder], folder, ["csv", "md"])
    assert sum(r["status"] == "ok" for r in read_csv(folder / "report.csv")) == 2
    assert "merged.json" in (folder / "report.md").read_text().split("## Left out")[1]


@pytest.mark.parametrize(
    "argv, rc, words",
    [
        (["--format", "pdf", "."], 2, "unknown format pdf"),
        (["/nonexistent/results"], 2, "no such file or folder"),
        (["--bogus", "."], 2, "unrecognized arguments"),
        ([], 2, "required"),
    ],
)
def test_bad_command_line(capsys, argv, rc, words):
    assert cli(*argv) == rc
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_empty_folder(tmp_path, capsys):
    assert cli(tmp_path) == 1
    assert "no usable results" in capsys.readouterr().err


# ------------------------------------------------------------------ machines side by side


def test_two_machines_side_by_side_with_geometric_mean(tmp_path, capsys):
    a = runner_folder(tmp_path, "2026-01-01-alpha", standard(1.0))
    fast = standard(0.5)
    fast[0] = entry("resnet56", [2.0 / 8] * 3, threads=1, batch=128)  # 8x on one cell
    b = runner_folder(tmp_path, "2026-01-02-beta", fast[:-1])  # one cell fewer
    out = tmp_path / "side"
    assert cli(a, b, "--out", out, "--format", "md,csv") == 0
    md = (out / "report.md").read_text()
    assert "## Against 2026-01-01-alpha: Test CPU 9000" in md
    # 9 shared cells: eight at 2x, one at 8x
    expected = math.exp((8 * math.log(2) + math.log(8)) / 9)
    assert f"{expected:.3g}x (9 cells)" in md
    block = md.split("### ResNet-56")[1].split("###")[0]
    assert "| A: 1t" in block and "| B: 1t" in block and f"B: {H100}" in block
    assert "| A     | 2026-01-01-alpha: Test CPU 9000" in md  # the tags' legend
    rows = read_csv(out / "report.csv")
    assert {r["host"] for r in rows} == {"2026-01-01-alpha", "2026-01-02-beta"}
    # the other machine as the base inverts the ratio
    assert cli(a, b, "--out", out, "--format", "md", "--base", "2026-01-02-beta") == 0
    assert f"{1 / expected:.3g}x (9 cells)" in (out / "report.md").read_text()
    assert cli(a, b, "--out", out, "--base", "nowhere") == 1
    assert "names no single machine" in capsys.readouterr().err


def test_two_runs_of_one_machine_stay_apart_and_thread_files_merge(tmp_path):
    docs = []
    for name, t in (("t1", 1), ("t2", 2), ("again", 1)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(document("same", [entry("fcn5", [0.1 / t] * 3, threads=t)])))
        docs.append(path)
    render(docs, tmp_path / "out", ["csv"])
    rows = read_csv(tmp_path / "out" / "report.csv")
    machines = {r["machine"] for r in rows}
    assert len(machines) == 2  # t1+t2 merged into one group; "again" repeats t1
    merged = next(m for m in machines if "t1, t2" in m)
    assert {r["threads"] for r in rows if r["machine"] == merged} == {"1", "2"}


# ------------------------------------------------------------------ procurement


def test_procurement_math(tmp_path):
    f = figures(1000.0, {"price_usd": 20000.0, "price_per_hour_usd": 3.6, "watts": 500.0})
    assert f["samples_per_s_per_usd"] == pytest.approx(0.05)
    assert f["samples_per_s_per_watt_typed"] == pytest.approx(2.0)
    # a million samples take 1000 s = 1/3.6 h at $3.6/h -> $1
    assert f["usd_per_million_samples"] == pytest.approx(1.0)
    # 500 W for 1000 s = 500 kJ = 0.1389 kWh
    assert f["kwh_per_million_samples_typed"] == pytest.approx(500 * 1000 / 3.6e6)
    assert figures(10.0, {"watts": 10.0})["usd_per_million_samples"] is None

    bench = standard()
    for b in bench:  # the GPU cells measured their energy; the CPU cells could not
        on_gpu = b["extra_info"]["device"] != "cpu"
        b["extra_info"].update(
            energy_method="nvml-energy" if on_gpu else "none",
            joules_per_sample=0.25 if on_gpu else None,
            samples_per_kj=4000.0 if on_gpu else None,
        )
    folder = runner_folder(tmp_path, "alpha", bench)
    prices = tmp_path / "prices.toml"
    prices.write_text(
        "[machines.alpha]\nprice_usd = 30000\nprice_per_hour_usd = 2.5\nwatts = 700\n"
        'price_date = "2026-11-01"\nprice_source = "a quote"\n'
        '[machines."nobody"]\nwatts = 1\n'
    )
    render([folder], tmp_path / "out", ["md", "csv"], prices=prices)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Procurement" in md and "'nobody' match no machine" in md
    rows = read_csv(tmp_path / "out" / "report.csv")
    gpu = next(r for r in rows if r["network"] == "fcn5" and r["device"] == "cuda:0")
    sps = 64 / (0.1 / 50)
    assert float(gpu["samples_per_s_per_usd"]) == pytest.approx(sps / 30000)
    assert float(gpu["usd_per_million_samples"]) == pytest.approx(2.5 * 1e6 / sps / 3600)
    section = md.split("## Procurement\n")[1]
    fcn_line = next(line for line in section.splitlines() if "fcn5" in line)
    assert H100 in fcn_line and f"{sps / 700:.3g}" in fcn_line  # the fastest cell, per watt
    assert "$30,000, $2.5/h (2026-11-01, a quote)" in fcn_line
    assert "0.25 (nvml-energy)" in fcn_line and "4000 (nvml-energy)" in fcn_line
    assert "samples/s per W (typed power)" in section and "not measurements" in section
    # the summary comes first, before the fastest-per-network table
    assert md.index("## Procurement summary") < md.index("## Fastest per network")
    summary = md.split("## Procurement summary")[1].split("\n## ")[0]
    assert "4000 samples per kJ, nvml-energy" in summary and "samples/s per $" in summary


@pytest.mark.parametrize(
    "text, words",
    [
        ("machines = 3", "'machines' table"),
        ("[machines.a]\nprice_usd = -1\nprice_date = 'x'\nprice_source = 'y'", "positive number"),
        ("[machines.a]\nprice_usd = 100", "a price needs price_date and price_source"),
        ("[machines.a]\nwatts = 5\nprice_source = ''", "must be a non-empty string"),
        ("[machines.a]\ncost = 1", "unknown field"),
        ("[machines.a\n", "not valid TOML"),
    ],
)
def test_bad_prices_file(tmp_path, text, words):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PricesError, match=words):
        load_prices(path)


def test_prices_as_json_and_the_example_file():
    from xfbench.report.procurement import load_prices as lp

    example = Path(__file__).parents[1] / "xfbench" / "report" / "data" / "prices.example.toml"
    assert lp(example)["gpu-box"]["watts"] == 900


# ------------------------------------------------------------------ escaping, paper, peaks


def test_strings_from_json_are_escaped(tmp_path):
    evil = "<script>alert(1)</script>"
    fails = [failure("fcn5", "failed", f"RuntimeError: {evil}", threads=2)]
    bench = [entry(evil, [0.1] * 3), entry("fcn5", [0.1] * 3)]
    bench[0]["extra_info"]["framework"] = "x<img src=y onerror=alert(2)>"
    folder = runner_folder(tmp_path, "run", bench, fails)
    render([folder], folder, ["html", "md"])
    html = (folder / "report.html").read_text()
    assert "<script>" not in html and "<img src=y" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    md = (folder / "report.md").read_text()
    assert "\\<script>" in md and not re.search(r"(?<!\\)<", md)  # every < escaped


def test_paper_numbers_beside_ours(tmp_path):
    folder = runner_folder(tmp_path, "run", standard())
    render([folder], tmp_path / "plain", ["md", "csv"])
    assert "Shi et al." not in (tmp_path / "plain" / "report.md").read_text()
    render([folder], tmp_path / "paper", ["md", "csv"], with_paper=True)
    md = (tmp_path / "paper" / "report.md").read_text()
    assert "Shi et al. 2016, ResNet-56" in md and "Shi et al. 2016, FCN-S" in md
    fcn = md.split("Shi et al. 2016, FCN-S")[1].split("###")[0]
    assert "| Caffe" in fcn and "1.324" in fcn and "GTX 1080" in fcn
    paper_rows = [r for r in read_csv(tmp_path / "paper" / "report.csv") if r["source"] == "paper"]
    caffe = next(
        r
        for r in paper_rows
        if r["network"] == "FCN-S" and r["framework"] == "Caffe" and r["device_name"] == "GTX 1080"
    )
    assert float(caffe["seconds_per_batch"]) == 0.030


def test_paper_rows_sit_under_our_columns_of_the_same_thread_count(tmp_path):
    """--paper: each tool's seconds on the paper's desktop and server appear as rows of our
    own Table 7 block, 1t under 1t and 2t under 2t, the GPU column blank (the paper's GPUs
    are others); Lua Torch7 is named as such."""
    folder = runner_folder(tmp_path, "run", standard())
    render([folder], tmp_path / "paper", ["md"], with_paper=True)
    md = (tmp_path / "paper" / "report.md").read_text()
    block = md.split("### FCN-5 / FCN-S (fcn5): train")[1].split("Shi et al. 2016, FCN-S")[0]
    header = next(line for line in block.splitlines() if line.startswith("| framework"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    caffe = next(line for line in block.splitlines() if "Caffe, 2016, desktop" in line)
    cells = [c.strip() for c in caffe.strip("|").split("|")]
    by_col = dict(zip(cols, cells, strict=True))
    assert (by_col["1t"], by_col["2t"], by_col[H100]) == ("1.324", "0.790", "-")
    assert "Torch7 (Lua), 2016, server (2x E5-2630 v3)" in block


def test_a_block_whose_task_alone_would_mislead_says_what_it_is(tmp_path):
    """GPT-2's inference cell is one prefill pass, not generation: its block's title says
    so (the network suite's `block_tasks`), its training block's title does not."""
    bench = [entry("gpt2", [0.2] * 3, task="infer"), entry("gpt2", [0.4] * 3)]
    render([runner_folder(tmp_path, "run", bench)], tmp_path / "out", ["md"])
    titles = [
        t for t in (tmp_path / "out" / "report.md").read_text().splitlines() if t.startswith("### ")
    ]
    assert any(
        ": infer (prefill: one pass scoring every position, no cache), batch 16" in t
        for t in titles
    ), titles
    assert any(": train, batch 16" in t for t in titles), titles


def test_gemm_peak_share_and_equivalence_mark(tmp_path):
    bench = standard()
    gemm = [
        {
            "group": "gemm",
            "name": f"gemm{n}",
            "stats": {"median": 1.0},
            "extra_info": {
                "implementation": "cupy",
                "dtype": "float32",
                "tflops": tf,
                "device": "cuda:0",
                "device_name": H100,
                "size": n,
            },
        }
        for n, tf in ((1024, 20.0), (8192, 50.0))
    ]
    equiv = [
        {
            "group": "eq",
            "name": "eq",
            "stats": {"median": 1.0},
            "extra_info": {
                "equivalence": {
                    "framework": "torch",
                    "network": "fcn5",
                    "verified": True,
                    "max_rel_err": 2e-7,
                }
            },
        }
    ]
    folder = runner_folder(tmp_path, "run", bench + gemm + equiv, gpus=[H100])
    render([folder], folder, ["csv", "md"])
    rows = read_csv(folder / "report.csv")
    gpu = next(r for r in rows if r["network"] == "resnet56" and r["device"] == "cuda:0")
    assert float(gpu["gemm_peak_tflops"]) == 50.0
    assert float(gpu["peak_share"]) == pytest.approx(float(gpu["achieved_tflops"]) / 50.0)
    assert (
        next(r for r in rows if r["network"] == "fcn5" and r["framework"] == "torch")["verified"]
        == "True"
    )
    md = (folder / "report.md").read_text()
    assert "% of peak" in md and "## Measured GEMM peak" in md
    assert "yes (max rel err 2.0e-07)" in md.split("### FCN-5")[1].split("###")[0]
    assert (folder / "plots" / "gemm-fp32.png").is_file()


def test_seconds_per_batch_disagreeing_with_stats_is_reported(tmp_path):
    bad = entry("fcn5", [0.1, 0.2, 0.3])
    bad["extra_info"]["seconds_per_batch"] = 0.5
    path = tmp_path / "x.json"
    path.write_text(json.dumps(document("h", [bad])))
    render([path], tmp_path, ["csv", "md"])
    assert float(read_csv(tmp_path / "report.csv")[0]["seconds_per_batch"]) == 0.2
    assert "differs from stats.median" in (tmp_path / "report.md").read_text()


def test_the_gemm_and_equivalence_suites_own_records_are_read(tmp_path):
    """The exact extra_info the GEMM suite and the equivalence suite write."""
    from xfbench.gemm.measure import GemmCell
    from xfbench.gemm.shapes import square

    bench = standard()
    cell = GemmCell(impl="cupy", shape=square(8192), dtype="fp32", device="cuda:0", threads=8)
    gemm = [
        {
            "group": "gemm",
            "name": "gemm",
            "stats": {"median": 1.0},
            "extra_info": {
                **cell.as_dict(),
                "device_name": H100,
                "tflops": 50.0,
                "peak_share": None,
                "share_of_best": 1.0,
            },
        }
    ]
    equiv = [
        {
            "group": "eq",
            "name": "eq",
            "stats": {"median": 1.0},
            "extra_info": {
                "kind": "equivalence",
                "equivalence": {
                    "network": "fcn5",
                    "framework": "torch",
                    "mode": "eager",
                    "check": "train",
                    "verified": False,
                    "max_rel_err": 3e-3,
                    "reference": "onnxruntime",
                },
            },
        }
    ]
    folder = runner_folder(tmp_path, "run", bench + gemm + equiv, gpus=[H100])
    render([folder], folder, ["csv"])
    rows = read_csv(folder / "report.csv")
    gpu = next(r for r in rows if r["network"] == "resnet56" and r["device"] == "cuda:0")
    assert float(gpu["gemm_peak_tflops"]) == 50.0
    train = next(
        r
        for r in rows
        if r["network"] == "fcn5"
        and r["framework"] == "torch"
        and r["task"] == "train"
        and r["device"] == "cpu"
    )
    assert train["verified"] == "False"


def test_contended_and_thread_shortfall_cells_are_marked_with_a_legend(tmp_path):
    from xfbench.harness.threads import CONTENDED_MARK, SHORTFALL_MARK

    bench = standard()
    for b in bench:
        e = b["extra_info"]
        if e["network"] == "resnet56" and e["framework"] == "torch" and e["device"] == "cpu":
            # 1 thread: contended; 2 threads: one thread busy, a shortfall too
            e.update(other_cpu_share=0.4, steal_share=0.0, contended=True)
            e["thread_shortfall"] = e["threads"] == 2
    gemm = {
        "group": "gemm",
        "name": "gemm",
        "stats": {"median": 1.0},
        "extra_info": {
            "suite": "gemm",
            "impl": "numpy",
            "dtype": "fp32",
            "tflops": 0.1,
            "device": "cpu",
            "threads": 1,
            "n": 1024,
            "contended": True,
        },
    }
    folder = runner_folder(tmp_path, "run", bench + [gemm], gpus=[H100])
    render([folder], folder, ["csv", "md", "html"])
    md = (folder / "report.md").read_text()
    table7, details = md.split("### ResNet-56")[1:3]
    torch_row = next(line for line in table7.splitlines() if line.startswith("| PyTorch eager"))
    assert f"**2{CONTENDED_MARK}**" in torch_row  # the mark beside the number
    assert f"**1{CONTENDED_MARK}{SHORTFALL_MARK}**" in torch_row
    tf_row = next(line for line in table7.splitlines() if line.startswith("| TensorFlow eager"))
    assert CONTENDED_MARK not in tf_row and SHORTFALL_MARK not in tf_row
    for text in (table7, details):  # the legend under the table, one sentence per mark
        assert f"{CONTENDED_MARK} contended: other processes took more than 10%" in text
        assert f"{SHORTFALL_MARK} thread shortfall" in text
    # a block without marks has no legend
    assert "contended:" not in md.split("### FCN-5")[1].split("###")[0]
    gemm_part = md.split("## Measured GEMM peak")[1]
    assert f"0.1{CONTENDED_MARK}" in gemm_part and "contended:" in gemm_part
    html = (folder / "report.html").read_text()
    assert f"2{CONTENDED_MARK}" in html and f"{SHORTFALL_MARK} thread shortfall" in html
    rows = read_csv(folder / "report.csv")
    marked = [r for r in rows if r["contended"] == "True"]
    assert len(marked) == 2 and {r["other_cpu_share"] for r in marked} == {"0.4"}
    assert sum(r["thread_shortfall"] == "True" for r in rows) == 1


def test_console_tables_mark_contended_and_short_cells():
    from xfbench.gemm.table import gemm_table
    from xfbench.harness.table import cell_table
    from xfbench.harness.threads import CONTENDED_MARK, SHORTFALL_MARK

    base = {
        "task": "train",
        "network": "fcn5",
        "framework": "torch",
        "mode": "eager",
        "precision": "fp32",
        "device": "cpu",
        "threads": 2,
        "batch_size": 8,
        "status": "ok",
        "seconds_per_batch": 0.5,
        "samples_per_s": 16.0,
        "achieved_tflops": 0.001,
        "compile_s": 1.0,
        "threads_used": 1.0,
        "peak_host_rss_bytes": 2**20,
    }
    quiet = cell_table([dict(base, contended=False, thread_shortfall=False)])
    assert CONTENDED_MARK not in quiet and SHORTFALL_MARK not in quiet
    text = cell_table([dict(base, contended=True, thread_shortfall=True)])
    assert f"0.5{CONTENDED_MARK}{SHORTFALL_MARK}" in text
    assert text.splitlines()[-2].startswith(CONTENDED_MARK)
    assert text.splitlines()[-1].startswith(SHORTFALL_MARK)
    g = {
        "impl": "numpy",
        "m": 8,
        "n": 8,
        "k": 8,
        "dtype": "fp32",
        "device": "cpu",
        "threads": 1,
        "status": "ok",
        "tflops": 0.25,
        "threads_used": 1.0,
        "check_error": 1e-7,
        "timer": "perf_counter",
        "contended": True,
    }
    text = gemm_table([g])
    assert f"0.25{CONTENDED_MARK}" in text and text.splitlines()[-1].startswith(CONTENDED_MARK)


def test_machine_section_names_the_isa_and_the_backends_that_ran(tmp_path):
    torch_cell = entry("resnet56", [1.0, 1.1, 0.9])
    torch_cell["extra_info"]["backend"] = "ATen AVX512, oneDNN"
    tf_cells = [entry(n, [2.0], framework="tensorflow", mode="function") for n in ("fcn5", "fcn8")]
    for cell in tf_cells:
        cell["extra_info"]["backend"] = "Eigen (oneDNN off)"
    doc = document("box", [torch_cell, *tf_cells])
    doc["machine_info"]["xfbench"]["cpu"] = {"isa": ["avx2", "avx512f", "amx_tile"]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    render([path], tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "avx2 avx512f amx_tile" in md
    backends = md.split("Backends")[1].split("\n\n#")[0]
    assert "ATen AVX512, oneDNN (1 cell)" in backends
    assert "Eigen (oneDNN off) (2 cells)" in backends
    assert "Backends" in (tmp_path / "out" / "report.html").read_text()


def test_isa_of_files_from_before_is_read_from_pytest_benchmarks_cpu_flags(tmp_path):
    doc = document("old", [entry("fcn5", [1.0])])
    doc["machine_info"]["cpu"]["flags"] = ["fpu", "sse4_2", "avx2", "avx512vnni"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    render([path], tmp_path / "out")
    assert "sse4_2 avx2 avx512_vnni" in (tmp_path / "out" / "report.md").read_text()


def test_the_command_names_each_file_left_out_and_exits_non_zero(tmp_path, capsys):
    folder = runner_folder(tmp_path, "run", standard()[:2], merged=False)
    (folder / "cells" / "train-broken.json").write_text('{"benchmarks": [')
    assert cli(folder) == 1
    err = capsys.readouterr().err
    assert "xfbench report: left out: " in err and "train-broken.json" in err
    assert (folder / "report.md").stat().st_size > 0  # the rest is still reported


def test_a_report_that_fails_midway_leaves_no_empty_file(tmp_path, monkeypatch):
    """Each file is written beside its place and renamed over it: a disk that fills while
    writing leaves the previous report, not an empty or half file, and no temporary."""
    from xfbench.report import files

    folder = runner_folder(tmp_path, "run", standard()[:2])
    render_folder(folder)
    before = {p.name: p.read_bytes() for p in folder.glob("report.*")}

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", disk_full)
    with pytest.raises(OSError):
        render_folder(folder)
    assert {p.name: p.read_bytes() for p in folder.glob("report.*")} == before
    assert not [p for p in folder.rglob(".*") if ".tmp" in p.name]


def _with_ci(bench: dict, low: float, high: float) -> dict:
    bench["extra_info"].update({"ci_low_s": low, "ci_high_s": high, "ci_level": 0.95})
    return bench


def test_table7_shows_the_interval_and_the_report_opens_with_the_fastest(tmp_path):
    torch_cell = _with_ci(entry("resnet56", [1.0] * 3, batch=128), 0.98, 1.02)
    tf_cell = _with_ci(
        entry("resnet56", [2.0] * 3, framework="tensorflow", mode="function", batch=128), 1.9, 2.1
    )
    jax_cell = _with_ci(
        entry("resnet56", [1.01] * 3, framework="jax", mode="jit", batch=128), 0.97, 1.05
    )
    folder = runner_folder(tmp_path, "run", [torch_cell, tf_cell])
    render_folder(folder)
    md = (folder / "report.md").read_text()
    assert md.index("Fastest per network") < md.index("Machines")  # the answer first
    fastest = md.split("Fastest per network")[1].split("\n\n#")[0]
    assert "PyTorch eager" in fastest and "2x faster (2x, CI 1.86-2.14x)" in fastest
    block = md.split("### ResNet-56")[1].split("###")[0]
    assert "1 ±2%" in block and "2 ±5%" in block
    # two frameworks whose intervals overlap: within noise, not a winner by 1 %
    folder = runner_folder(tmp_path, "run2", [torch_cell, jax_cell])
    render_folder(folder)
    assert "within noise (1.01x" in (folder / "report.md").read_text()


def test_two_runs_of_a_machine_within_noise_are_called_so(tmp_path):
    a = runner_folder(
        tmp_path, "2026-01-01-alpha", [_with_ci(entry("fcn5", [1.0] * 3), 0.95, 1.05)]
    )
    b = runner_folder(
        tmp_path, "2026-01-02-beta", [_with_ci(entry("fcn5", [1.02] * 3), 0.97, 1.07)]
    )
    c = runner_folder(
        tmp_path, "2026-01-03-gamma", [_with_ci(entry("fcn5", [0.5] * 3), 0.49, 0.51)]
    )
    out = tmp_path / "side"
    assert cli(a, b, c, "--out", out, "--format", "md") == 0
    compared = (out / "report.md").read_text().split("Machines compared, cell by cell")[1]
    assert "A vs B" in compared and "A: within noise (1.02x" in compared
    assert "A vs C" in compared and "C: 2x faster" in compared


def test_the_machine_score_weighs_networks_equally_and_counts_failures(tmp_path, capsys):
    from xfbench.report.score import main as score_main

    ref = runner_folder(
        tmp_path,
        "ref",
        [entry("fcn5", [2.0] * 3, threads=t) for t in (1, 2)]
        + [entry("resnet56", [8.0] * 3, batch=128)],
    )
    # 2x faster on both fcn5 cells, 8x on resnet56: networks equal -> sqrt(2 * 8) = 4
    ours = runner_folder(
        tmp_path,
        "ours",
        [entry("fcn5", [1.0] * 3, threads=t) for t in (1, 2)]
        + [entry("resnet56", [1.0] * 3, batch=128)],
        [failure("alexnet", "oom", "out of memory")],
    )
    assert score_main([str(ours), "--reference", str(ref), "--winners"]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("machine score 4 (95 % CI of its rounds 4-4) against ref")
        and "2 workloads of 2" in out
    )
    assert (
        "per-core score 4 (95 % CI of its rounds 4-4): the same cells" in out
        and "3 cells of 2" in out
    )
    assert "1 of 4 cells of RESULTS failed (alexnet train torch (oom))" in out
    assert "fcn5 train, PyTorch, fp32" in out and "PyTorch eager fp32, 1 thread, batch 16" in out
    assert score_main([str(ours), "--reference", str(tmp_path / "nowhere")]) == 2


def _relabelled(tmp_path, name, relabel, factor):
    """The checked-in reference's 2-thread cells, relabelled and made factor x faster (its
    1-thread cells dropped): another machine at its best."""
    from xfbench.report import score

    [ref] = [p for p in score.references() if p.name.startswith("2026-11-24-amd-epyc")]
    doc = json.loads((ref / "merged.json").read_text())
    kept = []
    for b in doc["benchmarks"]:
        extra, stats = b["extra_info"], b["stats"]
        if extra["threads"] != 2:
            continue
        relabel(extra)
        stats["data"] = [x / factor for x in stats["data"]]
        for k in ("median", "min", "max", "mean"):
            stats[k] /= factor
        extra["seconds_per_batch"] = stats["median"]
        extra["ci_low_s"], extra["ci_high_s"] = min(stats["data"]), max(stats["data"])
        kept.append(b)
    doc["benchmarks"] = kept
    folder = tmp_path / name
    folder.mkdir()
    (folder / "merged.json").write_text(json.dumps(doc))
    return ref, folder


def test_a_bigger_cpu_and_a_gpu_machine_score_at_their_best_with_an_interval(tmp_path, capsys):
    """A machine whose cells share no column with the reference (16 threads, or cuda:0)
    still gets a machine score: each workload at each machine's best. 4x faster at 16
    threads scores about 4, 10x faster on a GPU about 10 (and is said to differ in kind),
    each with a 95 % interval around it; neither has a per-core score."""
    from xfbench.report import score

    def sixteen(extra):
        extra["threads"] = 16

    def gpu(extra):  # a GPU of which no reference is checked in
        extra["device"], extra["device_name"] = "cuda:0", "NVIDIA A100-SXM4-80GB"

    for name, relabel, factor in (("big", sixteen, 4.0), ("gpu", gpu, 10.0)):
        ref, folder = _relabelled(tmp_path, name, relabel, factor)
        s = score.score(score.load_run(folder), score.load_run(ref))
        m = s.machine
        assert m.workloads == 27 and m.networks == 9 and s.per_core.value is None
        assert m.value == pytest.approx(factor, rel=0.02)
        assert m.low < m.value < m.high and m.high / m.low < 1.2 and not m.within_noise
        assert m.differ_in_kind == (name == "gpu")
        if name == "gpu":  # a CPU reference is never chosen for a GPU run unasked
            assert score.main([str(folder)]) == 1
            err = capsys.readouterr().err
            assert "no checked-in reference was measured on the model of its " in err
            assert "accelerator (NVIDIA A100-SXM4-80GB)" in err
            assert "NVIDIA H100 80GB HBM3: " in err and "NVIDIA H200: " in err
            assert len(err.strip().splitlines()) == 1
        assert score.main([str(folder), *(["--reference", str(ref)] * (name == "gpu"))]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"machine score {score.value_text(m)} against {ref.name}")
        assert ("differ in kind" in out) == (name == "gpu")
        assert "per-core score: none" in out and "too few for the interval to say much" in out


def test_a_reference_is_chosen_only_among_those_of_the_runs_device_kind(tmp_path, monkeypatch):
    """A GPU reference is never the reference of a CPU run, nor a CPU reference of a GPU
    run, even where it shares more workloads; the report's scores follow the same rule."""
    from xfbench.report import score
    from xfbench.report.model import build

    def gpu(extra):
        extra["device"], extra["device_name"] = "cuda:0", "NVIDIA H100 80GB HBM3"

    cpu_ref, gpu_run = _relabelled(tmp_path, "gpu-run", gpu, 10.0)
    _, gpu_ref = _relabelled(tmp_path, "gpu-ref", gpu, 12.0)
    refs = tmp_path / "references"
    for folder, keep in ((cpu_ref, {"fcn5"}), (gpu_ref, None)):
        doc = json.loads((folder / "merged.json").read_text())
        doc["benchmarks"] = [
            b for b in doc["benchmarks"] if keep is None or b["extra_info"]["network"] in keep
        ]
        (refs / folder.name).mkdir(parents=True)
        (refs / folder.name / "merged.json").write_text(json.dumps(doc))
    # a CPU run sharing one workload with the CPU reference (which holds FCN-5 alone) and
    # two with the GPU reference
    cpu_run = runner_folder(
        tmp_path,
        "cpu-run",
        [entry("fcn5", [0.1] * 3, threads=2), entry("resnet56", [1.0] * 3, batch=128)],
    )
    monkeypatch.setattr(score, "REFERENCES", refs)
    assert score.best_reference(score.load_run(cpu_run)).reference == cpu_ref.name
    assert score.best_reference(score.load_run(gpu_run)).reference == "gpu-ref"
    report = build([score.load_run(gpu_run), score.load_run(cpu_run)])
    chosen = {m.short: s.reference for m, s in score.machine_scores(report)}
    assert sorted(chosen.values()) == sorted([cpu_ref.name, "gpu-ref"])


def test_table7_is_also_one_table_in_the_papers_order_with_ratios_to_the_fastest(tmp_path):
    cells = [
        entry("resnet56", [2.0], batch=128),
        entry("resnet56", [3.0], framework="tensorflow", mode="function", batch=128),
        entry("fcn5", [1.0]),
        entry("fcn5", [1.5], framework="tensorflow", mode="function"),
    ]
    folder = runner_folder(tmp_path, "run", cells)
    render_folder(folder)
    md = (folder / "report.md").read_text()
    table = md.split("Table 7, seconds per mini-batch (one table)")[1].split("\n\n")[1]
    lines = table.splitlines()
    assert "PyTorch eager, 1t" in lines[0] and "TensorFlow eager, 1t" not in lines[0]
    assert lines[2].startswith("| FCN-5") and lines[3].startswith("| ResNet-56")  # paper order
    assert "**1**" in lines[2] and "1.5 (1.5x)" in lines[2]


def test_published_anchors_stand_beside_our_cells_on_the_same_gpu(tmp_path):
    """ResNet-50 training at TF32 on an A100 and a bf16 GEMM of 8192 on an H100 appear
    beside the published numbers of xfbench/published.toml, with the ratio, setting and
    source; a CPU-only run shows no anchors section."""
    bench = standard() + [
        entry(
            "resnet50",
            [0.01] * 3,
            device="cuda:0",
            device_name=A100,
            precision="tf32",
            batch=16,
            mode="compile",
        ),
        {
            "group": "gemm",
            "name": "gemm8192",
            "stats": {"median": 1.0},
            "extra_info": {
                "implementation": "cupy",
                "dtype": "bf16",
                "tflops": 700.0,
                "device": "cuda:0",
                "device_name": H100,
                "size": 8192,
            },
        },
    ]
    folder = runner_folder(tmp_path, "run", bench, gpus=[H100, A100])
    render([folder], folder, ["md", "html"])
    md = (folder / "report.md").read_text()
    section = md.split("## Beside published numbers")[1].split("\n## ")[0]
    rn50 = next(line for line in section.splitlines() if "ResNet-50 training, tf32" in line)
    assert "1600 images/s (batch 16)" in rn50 and "938 images/s" in rn50
    assert "1.71x" in rn50  # 1600 over the published 938
    gemm = next(line for line in section.splitlines() if "GEMM, bf16" in line)
    assert "700 TFLOP/s (n 8192)" in gemm and "0.88x" in gemm and "Source:" in gemm
    assert "Beside published numbers" in (folder / "report.html").read_text()

    cpu_only = runner_folder(
        tmp_path, "cpu", [b for b in standard() if b["extra_info"]["device"] == "cpu"]
    )
    render([cpu_only], cpu_only, ["md"])
    assert "Beside published numbers" not in (cpu_only / "report.md").read_text()


def test_the_checked_in_reference_scores_itself_one_and_a_sweep_prints_its_score(
    tmp_path, capsys, monkeypatch
):
    """The package holds a whole command-1 run that loads and covers all nine networks;
    against itself both scores are 1 with an interval that holds 1 ("within noise"); a
    finished sweep prints its scores against the reference sharing the most workloads,
    and nothing when none shares one."""
    from xfbench.report import score
    from xfbench.runner.cli import _score
    from xfbench.runner.store import RunFolder

    [ref] = [p for p in score.references() if p.name.startswith("2026-11-24-amd-epyc")]
    s = score.score(score.load_run(ref), score.load_run(ref))
    for one in (s.machine, s.per_core):
        assert one.value == pytest.approx(1.0) and one.networks == 9 and one.within_noise
    assert s.failed == 0 and s.machine.workloads == 27 and s.per_core.workloads == 54
    _score(RunFolder(ref))
    out = capsys.readouterr().out
    assert out.startswith(
        f"machine score 1 (95 % CI of its rounds {s.machine.low:.3g}-{s.machine.high:.3g})"
    )
    assert f", within its rounds' noise against {ref.name} (above 1: faster)" in out
    monkeypatch.setattr(score, "REFERENCES", tmp_path / "none")
    _score(RunFolder(ref))
    assert capsys.readouterr().out == ""


def test_the_report_opens_with_the_scores_energy_and_what_the_numbers_are(tmp_path):
    """report.md and report.html start with the machine and per-core scores (interval,
    method, reference, winning configurations), the energy status and the preset and
    interval coverage of the numbers below; a cell whose interval is wider than its
    target is marked; the CSV carries every cell's interval."""
    _, folder = _relabelled(tmp_path, "big", lambda e: e.update(threads=16), 4.0)
    render([folder], folder, ["md", "html", "csv"])
    md = (folder / "report.md").read_text()
    first = md.split("\n## ")[1]
    assert first.startswith("Scores") and "machine score" in first and "(95 % CI" in first
    assert "2026-11-24-amd-epyc-zen5-2c" in first and "best configuration per workload" in first
    assert "| not measured " in first  # these records predate energy_reason
    assert "preset table7, 3 timed rounds per cell" in first and "75 % coverage" in first
    assert "PyTorch eager fp32, 16 threads, batch 16" in first
    assert "§ wide: the median's interval is wider than ±2%" in md
    html = (folder / "report.html").read_text()
    assert html.index('id="scores"') < html.index('id="machines"')
    rows = read_csv(folder / "report.csv")
    assert all(
        float(r["ci_low_s"]) <= float(r["seconds_per_batch"]) <= float(r["ci_high_s"]) for r in rows
    )
    assert {r["ci_level"] for r in rows} == {"0.75"}


def test_side_by_side_plots_give_each_machine_its_own_colour(tmp_path, monkeypatch):
    """Two machines in one threads plot: a colour per machine (a marker per row), so the
    machines never share a colour; error bars span each median's interval."""
    from xfbench.networks.report.plots import threads_plot
    from xfbench.report import load, model, plots

    a = runner_folder(tmp_path, "alpha", standard())
    b = runner_folder(tmp_path, "beta", standard(2.0))
    report = model.build([load.load(a), load.load(b)])
    figs = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: figs.append(fig) or path)
    block = next(bl for bl in table7_content(report).blocks if bl.key[1] == "fcn5")
    assert threads_plot(report, block, tmp_path / "x.png")
    by_machine: dict = {}
    for bars in figs[0].axes[0].containers:  # one errorbar container per line
        beta = bars.get_label().endswith("(beta)")
        by_machine.setdefault(beta, set()).add(bars.lines[0].get_color())
    assert len(by_machine) == 2 and all(len(c) == 1 for c in by_machine.values())
    assert by_machine[True] != by_machine[False]


def test_two_cpus_with_one_brand_string_get_two_labels_and_the_commit_is_shown(tmp_path):
    """A hypervisor may name Zen 3 and Zen 5 alike "AMD EPYC": the family and model numbers
    keep the two machines apart (they would otherwise merge as one); a brand string that
    names its model is left as it is. The machines table names the commit that measured."""
    from xfbench.machine import model_label

    assert model_label("AMD EPYC", 26, 2) == "AMD EPYC (family 26 model 2)"
    assert model_label("Intel(R) Xeon(R) Platinum 8488C", 6, 143) == (
        "Intel(R) Xeon(R) Platinum 8488C"
    )
    docs = []
    for name, family in (("zen3", 25), ("zen5", 26)):
        doc = document("vm", standard())
        doc["machine_info"]["xfbench"]["cpu_model"] = "AMD EPYC"
        doc["machine_info"]["xfbench"]["cpu"] = {"family": family, "model_number": 1}
        doc["commit_info"] = {"id": "0123456789abcdef", "dirty": name == "zen5"}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        docs.append(path)
    render(docs, tmp_path / "out", ["md"])
    md = (tmp_path / "out" / "report.md").read_text().split("## Machines")[1].split("\n## ")[0]
    assert "vm: AMD EPYC (family 25 model 1)" in md and "vm: AMD EPYC (family 26 model 1)" in md
    assert "0123456789" in md and "(uncommitted changes)" in md


def test_the_score_adds_energy_where_both_measured_it_and_a_price_per_1000(tmp_path, capsys):
    from xfbench.report.score import main as score_main

    def cells(seconds, spk):
        out = [entry("fcn5", [seconds], threads=t) for t in (1, 2)]
        for e in out:
            e["extra_info"]["samples_per_kj"] = spk
        return out

    ref = runner_folder(tmp_path, "ref", cells(2.0, 100.0))
    ours = runner_folder(tmp_path, "ours", cells(1.0, 300.0))
    prices = tmp_path / "p.toml"
    prices.write_text(
        '[machines.ours]\nprice_usd = 4000\nprice_date = "2026-11-01"\nprice_source = "quote"\n'
    )
    assert score_main([str(ours), "--reference", str(ref), "--prices", str(prices)]) == 0
    out = capsys.readouterr().out
    assert "energy score 3 (above 1: more samples per kJ)" in out and "2 cells measured" in out
    assert "machine score per $1,000: 0.5 (price $4,000, 2026-11-01, quote)" in out
    other = tmp_path / "q.toml"
    other.write_text("[machines.nobody]\nwatts = 1\n")
    assert score_main([str(ours), "--reference", str(ref), "--prices", str(other)]) == 1
    assert "has no entry for" in capsys.readouterr().err


def test_the_score_read_through_a_closed_pipe_is_no_traceback():
    """`xfbench score REF | true`: the reader left before the first line; no traceback,
    nor Python's "Exception ignored" at exit."""
    import subprocess
    import sys

    from xfbench.report import score

    [ref] = [p for p in score.references() if p.name.startswith("2026-11-24-amd-epyc")]
    proc = subprocess.run(
        f"{sys.executable} -m xfbench.harness.cli score {ref} | true",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_every_record_kind_of_a_gpu_run_is_scored_against_its_gpus_reference(tmp_path):
    """The H100's generation sweeps (generation records only) were scored against a CPU
    reference: the device kind read train and infer cells alone. Each kind of record the
    scores count now says where it ran, and a GPU run is scored against a reference of its
    own GPU model: an H100 SXM run against the H100's, an H200's against the H200's, an
    A100's against none (told so), a CPU run's generation records against a CPU
    reference."""
    import shutil

    from xfbench.report import score

    [h100] = [p for p in score.references() if p.name.endswith("h100-sxm")]
    [zen4] = [p for p in score.references() if p.name.endswith("zen4-2c")]
    gpu_generation = score.load_run(h100 / "generation-2")
    assert not gpu_generation.of("train", "infer") and gpu_generation.of("generation")
    assert score.device_kind(gpu_generation) == "NVIDIA H100 80GB HBM3"
    assert score.best_reference(gpu_generation).reference == h100.name
    for model, reference in (("NVIDIA H200", "2026-11-28-h200-sxm"), ("NVIDIA A100", None)):
        other = tmp_path / model
        shutil.copytree(h100 / "generation-2", other)
        text = (other / "merged.json").read_text().replace("NVIDIA H100 80GB HBM3", model)
        (other / "merged.json").write_text(text)
        run = score.load_run(other)
        found = score.best_reference(run)
        assert (found and found.reference) == reference
        assert reference or f"({model})" in score.no_reference_text(run)
    cpu_generation = score.load_run(zen4 / "run-1")
    cpu_generation.records = {"generation": cpu_generation.of("generation")}
    assert score.device_kind(cpu_generation) == "cpu"
    assert score.best_reference(cpu_generation).reference == zen4.name


def test_a_failed_gemm_cell_is_listed_by_the_gemm_section_not_as_a_table7_row(tmp_path):
    """A GEMM cell's failure record (its cell carries task "gemm") is the GEMM suite's: it
    once became a Table 7 block "?: gemm, batch 0" and a failed cell of the machine."""
    from xfbench.gemm.measure import GemmCell
    from xfbench.gemm.shapes import square

    cell = GemmCell(impl="jax", shape=square(8192), dtype="bf16", device="cuda:0", threads=8)
    failure = {"cell": cell.as_dict(), "status": "failed", "reason": "wrong product"}
    gemm = {
        "group": "gemm",
        "name": "gemm",
        "stats": {"median": 1.0},
        "extra_info": {**cell.as_dict(), "impl": "cupy", "device_name": H100, "tflops": 600.0},
    }
    folder = runner_folder(tmp_path, "run", standard() + [gemm], failures=[failure], gpus=[H100])
    render([folder], folder, ["csv", "md"])
    md = (folder / "report.md").read_text()
    assert "gemm, batch" not in md and "Failed cells" not in md
    gemm_part = md.split("## Measured GEMM peak")[1].split("\n## ")[0]
    assert "### GEMM cells that gave no number" in gemm_part
    assert "jax 8192 bf16 on cuda:0: failed: wrong product" in gemm_part
    assert all(r["task"] != "gemm" for r in read_csv(folder / "report.csv"))
    # every GEMM cell failed: no table, and the list keeps a heading of its own
    alone = runner_folder(tmp_path, "alone", standard(), failures=[failure], gpus=[H100])
    render([alone], alone, ["md"])
    md = (alone / "report.md").read_text()
    assert "## Measured GEMM peak\n\n### GEMM cells that gave no number" in md


def test_two_gpu_models_side_by_side_beside_what_the_hardware_predicts(tmp_path):
    """The buyer's view of an H200 against an H100: a synthetic H200 made from the H100's
    reference, its decode steps as much faster as its bandwidth (1.43x), its training as
    fast (the same peaks) but for ResNet-50, made twice as fast: each ratio stands beside
    its prediction, and only the ResNet-50 one, whose interval leaves it out, is noted."""
    import shutil

    from xfbench.report.gpu_models import gpu_models_table
    from xfbench.report.load import load_many
    from xfbench.report.model import build
    from xfbench.report.score import REFERENCES

    h100 = REFERENCES / "2026-11-27-h100-sxm"
    h200 = tmp_path / "h200"
    shutil.copytree(h100 / "generation-2", h200 / "generation-2")
    shutil.copytree(h100 / "first-part-2", h200 / "first-part-2")
    for merged in h200.glob("*/merged.json"):
        doc = json.loads(merged.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H200"))
        for b in doc["benchmarks"]:
            e, stats = b["extra_info"], b["stats"]
            factor = 2.0 if e.get("network") == "resnet50" and e.get("precision") == "bf16" else 1.0
            for key in [k for k in e if k.startswith("tpot")]:
                e[key] /= 4800 / 3350  # the decode step: bandwidth's ratio
            for key in ("ci_low_s", "ci_high_s"):
                if key in e:
                    e[key] /= factor
            stats["data"] = [x / factor for x in stats["data"]]
            for k in ("median", "min", "max", "mean"):
                stats[k] /= factor
        merged.write_text(json.dumps(doc))
    report = build([*load_many(h100), *load_many(h200)])
    table = gpu_models_table(report)
    rows = {r[1].text: r for r in table.rows}
    decode = rows["gpt2 decode step, torch cudagraph, fp32, batch 1, 128/128"]
    assert decode[4].text.startswith("1.43x") and decode[5].text == "1.43x (memory)"
    assert decode[7].text == ""  # as predicted
    # MLPerf's H200/H100 beside it: Inference v4.1's Llama-2-70B, Offline and Server
    assert decode[6].text == "1.28x, 1.35x"
    fcn5 = rows["fcn5 train, torch eager, fp32, batch 64"]
    assert fcn5[5].text == "1x (compute)" and fcn5[6].text == "1.1x, 1.14x"
    resnet = rows["resnet50 train, torch eager, bf16, batch 256"]
    assert resnet[4].text.startswith("2.0") and resnet[7].text.startswith("above the prediction")
    noted = [what for what, r in rows.items() if r[7].text]
    assert noted == ["resnet50 train, torch eager, bf16, batch 256"], noted
    assert rows["gpt2 prefill, torch cudagraph, fp32, batch 1, 128/128"][6].text == ""
    assert "1.28x, MLPerf Inference v4.1, Llama-2-70B Offline" in table.caption


def test_a_decode_ratio_below_its_prediction_names_what_the_profiles_show():
    """The checked-in H100 and H200: PyTorch's batch-1 cudagraph decode step gains 1.05x
    where bandwidth predicts 1.43x, and the note names the H200 profile's costliest kernel,
    SDPA's memory-efficient attention, at half the step's kernel time, not a fixed phrase;
    JAX's step, with no profile by kernel, says so."""
    from xfbench.report.gpu_models import gpu_models_table
    from xfbench.report.load import load_many
    from xfbench.report.model import build
    from xfbench.report.score import REFERENCES

    runs = [
        *load_many(REFERENCES / "2026-11-27-h100-sxm"),
        *load_many(REFERENCES / "2026-11-28-h200-sxm"),
    ]
    rows = {r[1].text: r for r in gpu_models_table(build(runs)).rows}
    torch = rows["gpt2 decode step, torch cudagraph, fp32, batch 1, 128/128"][7].text
    assert torch.startswith("below the prediction: not bound by memory bandwidth alone; ")
    assert (
        "NVIDIA H200: top kernel fmha_cutlassF_f32_aligned_64x64_rf_sm80, 12 calls, 50% of" in torch
    )
    jax = rows["gpt2 decode step, jax loop, fp32, batch 1, 128/128"][7].text
    assert jax.endswith("no profile of its step says what holds it")
