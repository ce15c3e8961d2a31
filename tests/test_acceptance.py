"""The GPU acceptance run (xfbench acceptance): its steps under one budget and their own
time-outs, nothing stopping on a failure, the summary and the archive; and its real steps
at smoke sizes on the CPU, where the GPU-only cells skip with their reason."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from xfbench.acceptance.cli import main
from xfbench.acceptance.run import Outcome, run_steps
from xfbench.acceptance.steps import PARTS, Step, chosen, steps
from xfbench.acceptance.summary import summary


def _py(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def test_a_failing_or_slow_step_never_stops_the_others(tmp_path):
    said = []
    todo = [
        Step(
            name="fails",
            part="x",
            cap_s=30,
            argv=_py("import sys; print('broken here'); sys.exit(3)"),
            what="fails",
        ),
        Step(
            name="slow",
            part="x",
            cap_s=1,
            argv=_py("import time; time.sleep(30)"),
            what="runs past its time-out",
        ),
        Step(
            name="absent",
            part="x",
            cap_s=30,
            argv=_py("pass"),
            what="needs a file",
            needs=(tmp_path / "nope.py",),
        ),
        Step(name="fine", part="x", cap_s=30, argv=_py("print('ok')"), what="passes"),
    ]
    outcomes = run_steps(todo, budget_s=120, out=tmp_path, say=said.append)
    got = {o.step: o for o in outcomes}
    assert got["fails"].status == "failed" and "code 3" in got["fails"].reason
    assert "broken here" in got["fails"].log_tail
    assert got["slow"].status == "timeout" and got["slow"].seconds < 15
    assert got["absent"].status == "skipped" and "nope.py" in got["absent"].reason
    assert got["fine"].status == "passed"
    assert (tmp_path / "logs" / "fine.log").read_text().strip() == "ok"
    assert [o["step"] for o in json.loads((tmp_path / "steps.json").read_text())] == list(got)


def test_a_step_gets_what_is_left_of_the_budget_and_is_skipped_when_too_little_is(tmp_path):
    now = [0.0]
    todo = [
        Step(name="first", part="x", cap_s=500, argv=_py("pass"), what=""),
        Step(name="second", part="x", cap_s=500, argv=_py("pass"), what=""),
    ]

    def clock():  # the first step takes 100 s of a 140 s budget
        now[0] += 50.0
        return now[0]

    outcomes = run_steps(todo, budget_s=140, out=tmp_path, say=lambda _: None, clock=clock)
    assert outcomes[0].status == "passed" and outcomes[0].timeout_s == pytest.approx(60)
    assert outcomes[1].status == "skipped" and "of the budget left" in outcomes[1].reason


def test_every_part_starts_with_the_probe_and_names_choose_steps(tmp_path):
    every = steps("cuda:0", "quick", tmp_path)
    assert {s.part for s in every} == {"probe", *PARTS}
    for part in PARTS:
        picked = chosen(every, [part], None)
        assert picked[0].name == "probe" and {s.part for s in picked[1:]} == {part}
    assert [s.name for s in chosen(every, list(PARTS), ["ddp", "gemm"])] == ["probe", "gemm", "ddp"]
    gemm = next(s for s in every if s.name == "first-gemm")
    assert "--gemm-sizes=8192" in gemm.argv and "--device=cuda:0" in gemm.argv
    sweep = next(s for s in every if s.name == "gemm")  # the preset's shapes, every type
    assert not any(a.startswith("--gemm-sizes") for a in sweep.argv)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--part", "gemm,nope"], "unknown --part 'nope'"),
        (["--part", "next,gemm"], "--part next chooses the parts itself"),
        (["--steps", "gemm,warp"], "unknown step 'warp'"),
        (["--device", "cuda:7"], "device cuda:7 is not present"),
        (["--device", "abacus"], "unknown device 'abacus'"),
        (["--preset", "huge"], "unknown --preset 'huge'"),
        (["--budget", "0"], "--budget must be a number of seconds above 0"),
        (["--budget", "nan"], "--budget must be a number of seconds above 0"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(argv, says, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_the_summary_names_failed_cells_and_gpu_tests(tmp_path):
    (tmp_path / "results" / "failed").mkdir(parents=True)
    (tmp_path / "results" / "failed" / "train-x.json").write_text(
        json.dumps(
            {
                "kind": "failure",
                "status": "timeout",
                "reason": "no result within 900 s",
                "cell": {
                    "task": "train",
                    "framework": "jax",
                    "network": "lstm32",
                    "mode": "jit",
                    "precision": "bf16",
                    "device": "cuda:0",
                    "batch_size": 128,
                },
            }
        )
    )
    (tmp_path / "gpu-tests.xml").write_text(
        '<testsuites><testsuite tests="3" failures="1" errors="0" skipped="1">'
        '<testcase name="test_one"/><testcase name="test_two"><failure message="bf16 ran as float32"/>'
        '</testcase><testcase name="test_three"><skipped/></testcase></testsuite></testsuites>'
    )
    checks = [
        {
            "network": "fcn5",
            "precision": "fp32",
            "check": "infer",
            "verified": True,
            "asserted": True,
        },
        {
            "network": "fcn5",
            "precision": "tf32",
            "check": "infer",
            "verified": False,
            "asserted": False,
        },
        {
            "network": "fcn8",
            "precision": "fp32",
            "check": "train",
            "verified": False,
            "asserted": True,
        },
    ]
    (tmp_path / "equivalence.json").write_text(
        json.dumps({"benchmarks": [{"extra_info": {"equivalence": c}} for c in checks]})
    )
    text = summary([Outcome("probe", "passed", 3.0)], tmp_path)
    rows = text.split("## Equivalence")[1].splitlines()
    assert [r.split("|")[-2].strip() for r in rows if "| fcn" in r] == [
        "verified",
        "recorded",  # TF32: its error is kept, not held to fp32's rule
        "NOT verified",
    ]
    assert "0 cells measured, 1 failed, 0 skipped" in text
    assert "- timeout: train jax lstm32 jit bf16 cuda:0 128: no result within 900 s" in text
    assert "1 passed, 1 failed, 1 skipped" in text and "test_two: bf16 ran as float32" in text


@pytest.mark.slow
@pytest.mark.rehearsal
def test_its_real_steps_run_on_the_cpu_at_smoke_sizes(tmp_path):
    out, archive = tmp_path / "acc", tmp_path / "acc.tar.gz"
    done = subprocess.run(
        [sys.executable, "-m", "xfbench.harness.cli", "acceptance", "--device", "cpu",
         "--preset", "smoke", "--steps", "gemm,allreduce", "--budget", "400",
         "--out", str(out), "--archive", str(archive)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    outcomes = {o["step"]: o["status"] for o in json.loads((out / "steps.json").read_text())}
    assert outcomes == {"probe": "passed", "gemm": "passed", "allreduce": "passed"}
    probe = json.loads((out / "probe.json").read_text())
    assert probe["machine"]["cpu_model"] and "torch" in probe["frameworks"]
    text = (out / "summary.md").read_text()
    gemm = text.split("## GEMM")[1]
    assert all(w in gemm for w in ("| torch ", "| jax ", "| fp32 ", "| bf16 ", " 256 "))
    names = tarfile.open(archive).getnames()
    assert "acc/summary.md" in names and "acc/gemm.json" in names and "acc/logs/gemm.log" in names


def test_an_interrupt_ends_the_step_in_flight_and_keeps_what_ran(tmp_path, monkeypatch):
    import xfbench.acceptance.run as run

    def interrupted(step, *args):
        if step.name == "second":
            raise KeyboardInterrupt
        return Outcome(step.name, "passed", 1.0)

    monkeypatch.setattr(run, "_run", interrupted)
    todo = [
        Step(name=n, part="x", cap_s=30, argv=_py("pass"), what="")
        for n in ("first", "second", "third")
    ]
    outcomes = run_steps(todo, budget_s=120, out=tmp_path, say=lambda _: None)
    assert [(o.step, o.status) for o in outcomes] == [
        ("first", "passed"),
        ("second", "interrupted"),
    ]
    assert len(json.loads((tmp_path / "steps.json").read_text())) == 2


def test_a_resnet50_cell_on_an_a100_stands_beside_the_published_figure(tmp_path):
    """The summary's ResNet-50 rows take their published figure from the report's anchors
    (report/anchors.py), matched on the GPU's name, the precision and the batch."""
    ROOT = Path(__file__).resolve().parents[1]
    merged = next((ROOT / "xfbench" / "report" / "references").glob("*/merged.json"))
    doc = json.loads(merged.read_text())
    [entry] = [
        b
        for b in doc["benchmarks"]
        if b["extra_info"]["framework"] == "torch"
        and b["extra_info"]["network"] == "resnet50"
        and b["extra_info"]["threads"] == 1
    ]
    doc["benchmarks"] = [entry]
    entry["extra_info"].update(
        device="cuda:0", device_name="NVIDIA A100-SXM4-80GB", precision="tf32", batch_size=256
    )
    entry["stats"]["median"] = 0.1  # 2560 images/s
    (tmp_path / "results" / "cells").mkdir(parents=True)
    (tmp_path / "results" / "cells" / "train-resnet50.json").write_text(json.dumps(doc))
    text = summary([], tmp_path)
    row = next(
        line for line in text.split("## ResNet-50 training")[1].splitlines() if "A100" in line
    )
    assert "| 2560 " in row and "938 images/s" in row and "2.73x" in row


# -- every output of every step, missing, empty, cut short or malformed ---------------
DATA = Path(__file__).resolve().parent / "data"


def _whole_outputs(out: Path) -> None:
    """Each output an acceptance run's steps write, whole: the files a CPU run wrote
    (tests/data/acceptance, the GPU tests' JUnit XML and roofs from an H100's window)."""
    results = out / "results"
    (results / "cells").mkdir(parents=True)
    for name in ("probe.json", "gemm.json", "equivalence.json", "gpu-tests.xml"):
        (out / name).write_bytes((DATA / "acceptance" / name).read_bytes())
    (results / "roofs.json").write_bytes((DATA / "acceptance" / "roofs.json").read_bytes())
    merged = (DATA / "torch_smoke_t1.json").read_bytes()
    (results / "merged.json").write_bytes(merged)
    doc = json.loads(merged)
    for i, entry in enumerate(doc["benchmarks"]):  # a runner's cells: one file each
        one = {**doc, "benchmarks": [entry]}
        (results / "cells" / f"cell-{i}.json").write_text(json.dumps(one))


def _files_written(out: Path) -> list[Path]:
    """Every file under the outputs the steps declare (a sweep's folder: each file in it)."""
    found = set()
    for step in steps("cuda:0", "quick", out):
        for path in step.outputs:
            found |= {p for p in path.rglob("*") if p.is_file()} if path.is_dir() else {path}
    return sorted(p for p in found if p.exists())


PLANTED = {
    "missing": None,
    "empty": lambda data: b"",
    "cut short": lambda data: data[: len(data) // 2],
    "malformed": lambda data: b"\x00{not what it should be" + data[-20:],
}


@pytest.mark.parametrize("fault", list(PLANTED))
def test_the_summary_and_archive_survive_any_output_missing_empty_cut_or_malformed(tmp_path, fault):
    """A step's empty gemm.json once ended a GPU window (the summary raised after the step,
    and no later step ran). Each output of each step, broken each way, leaves every other
    section whole and its own section one line."""
    from xfbench.acceptance import returns

    whole = tmp_path / "whole"
    _whole_outputs(whole)
    # every step ran and passed: an output missing is then one that a step did not write
    outcomes = [Outcome(s.name, "passed", 1.0) for s in steps("cuda:0", "quick", whole)]
    intact = summary(outcomes, whole)
    files = _files_written(whole)
    assert {p.name for p in files} >= {
        "probe.json", "gemm.json", "equivalence.json", "gpu-tests.xml", "merged.json",
        "roofs.json", "cell-0.json",
    }  # fmt: skip
    for planted in files:
        out = tmp_path / fault.replace(" ", "-") / planted.relative_to(whole).as_posix()
        _whole_outputs(out)
        target = out / planted.relative_to(whole)
        if target.parent.name == "cells":  # read only where merged.json is not (cut off)
            (out / "results" / "merged.json").unlink()
        if PLANTED[fault] is None:
            target.unlink()
        else:
            target.write_bytes(PLANTED[fault](target.read_bytes()))
        text = summary(outcomes, out)  # never raises
        headings = [line for line in text.splitlines() if line.startswith("## ")]
        unreadable = [line for line in text.splitlines() if line.startswith("unreadable: ")]
        # at most the planted file's own section is lost, and then said in one line
        assert len(unreadable) <= 1, (planted.name, unreadable)
        said = [line for line in text.splitlines() if planted.name in line]
        if fault != "missing":
            assert any(s.startswith(("unreadable: ", "- left out: ")) for s in said), (
                planted.name,
                text,
            )
        elif planted.parent == out:  # a step's own file: said missing, naming its step
            assert any(s.startswith(f"missing: {planted.name}: its step ") for s in said), text
        lost = {h for h in intact.splitlines() if h.startswith("## ")} - set(headings)
        assert len(lost) <= 1, (planted.name, lost)
        assert returns.pack(out, tmp_path / "back", text) == []


def test_what_runs_after_a_step_failing_never_stops_the_next_step(tmp_path):
    """The summary and the pack run after every step; their failure is said, and the
    steps go on (the GPU window's summary once raised there and ended the run)."""
    todo = [Step(name=n, part="x", cap_s=30, argv=_py("pass"), what=n) for n in ("one", "two")]
    said = []

    def broken(outcomes):
        raise ValueError("Expecting value: line 1 column 1 (char 0)")

    outcomes = run_steps(todo, 300, tmp_path, say=said.append, after=broken)
    assert [o.status for o in outcomes] == ["passed", "passed"]
    assert any("after one: ValueError" in line for line in said)


def test_a_sweep_with_gemm_scaling_and_allreduce_records_summarises_without_a_lost_section(
    tmp_path,
):
    """Suites whose report reads their records into a shape of its own (GEMM, scaling,
    all-reduce) are not handed to their terminal tables, which read records as written: in
    a sweep's results they once made the summary's section unreadable (a KeyError)."""
    from xfbench.gemm.measure import GemmCell
    from xfbench.gemm.shapes import square

    _whole_outputs(tmp_path)
    merged = tmp_path / "results" / "merged.json"
    doc = json.loads(merged.read_text())
    gemm = GemmCell(impl="numpy", shape=square(256), dtype="fp32", device="cpu", threads=1)
    scaling = {
        "kind": "scaling",
        "network": "fcn5",
        "framework": "torch",
        "device": "cpu",
        "workers": 1,
        "scaling": "strong",
        "batch": 16,
        "threads_per_worker": 1,
    }
    sweep = {"kind": "allreduce", "framework": "torch", "backend": "gloo", "device": "cpu",
             "world_size": 1, "rows": []}  # fmt: skip
    for name, extra in (
        ("gemm", {**gemm.as_dict(), "kind": "gemm", "tflops": 0.05}),
        ("scaling", scaling),
        ("allreduce", sweep),
    ):
        doc["benchmarks"].append(
            {
                "name": name,
                "group": name,
                "stats": {"median": 0.01, "data": [0.01]},
                "extra_info": extra,
            }  # fmt: skip
        )
    merged.write_text(json.dumps(doc))
    text = summary([Outcome("probe", "passed", 1.0)], tmp_path)
    assert "unreadable" not in text, text
    assert "## Sweeps" in text and "## GPU roofs" in text


def _first_test(step, out) -> str | None:
    """The name of the first test a pytest step's outputs hold, or None."""
    import xml.etree.ElementTree as ET

    for path in step.outputs:
        path = Path(path)
        if path.suffix == ".json" and path.is_file():
            names = [b["name"] for b in json.loads(path.read_text()).get("benchmarks", [])]
            failures = json.loads(path.read_text()).get("xfbench", {}).get("failures", [])
            if names or failures:
                return names[0] if names else str(failures[0]["cell"])
        if path.suffix == ".xml" and path.is_file():
            case = ET.parse(path).getroot().find(".//testcase")
            if case is not None:
                return case.get("name")
    return None


@pytest.mark.slow
@pytest.mark.rehearsal
def test_a_pytest_step_cut_after_its_first_test_keeps_that_test(tmp_path, monkeypatch):
    """Every pytest step of the plan (GEMM, all-reduce, DDP, the GPU tests, the equivalence
    checks) rewrites its outputs after each test: killed right after its first finished
    test, as a step cut at its time-out is, its output holds that test."""
    from xfbench.acceptance.run import run_steps

    monkeypatch.setenv("XFBENCH_FAULT", "written:kill")
    every = steps("cpu", "smoke", tmp_path)
    pytest_steps = [s for s in every if "pytest" in s.argv[:3]]
    assert {s.name for s in pytest_steps} >= {"first-gemm", "gemm", "allreduce", "ddp",
                                              "first-gpu-tests", "first-equivalence"}  # fmt: skip
    outcomes = run_steps(pytest_steps, 3000, tmp_path, say=lambda line: None)
    for step, outcome in zip(pytest_steps, outcomes):
        assert outcome.status == "killed" or "signal" in outcome.reason, (step.name, outcome)
        assert _first_test(step, tmp_path), step.name


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_pytest_step_cut_at_its_cap_keeps_its_finished_cells(tmp_path, monkeypatch):
    """The cap itself: NumPy's GEMM (fast everywhere) hangs at its second cell and is cut
    at a 30 s time-out (6 s left a 2-core Zen 3, beside CI's other worker, still starting
    pytest: no cell, an empty JSON); its JSON holds the first cell, and the summary counts it."""
    from xfbench.acceptance.run import run_steps
    from xfbench.acceptance.steps import Step
    from xfbench.acceptance.summary import summary
    from xfbench.harness.gpu_plan import SUITES

    monkeypatch.setenv("XFBENCH_FAULT", "test#2:sleep")
    out = tmp_path / "gemm.json"
    step = Step(
        name="first-gemm",
        part="first",
        cap_s=30,
        argv=(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
              str(SUITES / "test_gemm.py"), "--gemm-impl=numpy", "--gemm-sizes=128,256",
              "--precision=fp32", "--device=cpu", "--threads=1", f"--benchmark-json={out}"),
        what="",
    )  # fmt: skip
    [outcome] = run_steps([step], 120, tmp_path, say=lambda line: None)
    assert outcome.status == "timeout"
    assert [b["name"] for b in json.loads(out.read_text())["benchmarks"]] == [
        "test_gemm[numpy-128-fp32-cpu-t1]"
    ]
    assert "numpy" in summary([outcome], tmp_path).split("## Steps")[1]


RETURNS = Path(__file__).resolve().parents[1] / "gpu" / "returns"


def test_a_sweep_cut_at_its_cap_keeps_its_cells_in_the_summary(tmp_path):
    """The H200's second window as it came back: JAX's jit sweep was killed at its step's
    cap after writing its batch 1 and 8 cells to cells/, before its runner merged them into
    merged.json. The summary (and the report of that folder) reads them there, and names
    batch 64, planned and without a record, not finished."""
    from xfbench.report.load import load

    with tarfile.open(RETURNS / "2026-11-28-h200-window-2" / "acceptance.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    out = tmp_path / "acceptance"
    merged = json.loads((out / "results" / "merged.json").read_text())
    modes = {
        b["extra_info"].get("mode")
        for b in merged["benchmarks"]
        if b["extra_info"]["kind"] == "generation"
    }
    assert "jit" not in modes
    # each step's command, as steps.json keeps it now (that window's predates it)
    outcomes = json.loads((out / "steps.json").read_text())
    [cut] = [o for o in outcomes if o["step"] == "generation-jax-jit"]
    assert cut["status"] == "timeout"
    cut["argv"] = [sys.executable, "-m", "xfbench.harness.cli", "run", "--quiet",
                   "--suite=generation", "--framework=jax", "--mode=jit", "--precision=fp32",
                   "--device", "cuda:0", "--preset", "quick", "--results", str(out / "results")]  # fmt: skip
    (out / "steps.json").write_text(json.dumps(outcomes))
    text = summary([Outcome(**{k: v for k, v in o.items() if k != "argv"}) for o in outcomes], out)
    section = text.split("## xfbench generation")[1].split("\n## ")[0]
    rows = [line.split() for line in section.splitlines()]
    jit = {r[5]: " ".join(r) for r in rows if r[:2] == ["jax", "jit"]}
    assert sorted(jit, key=int) == ["1", "8", "64"]
    assert "not finished" not in jit["1"] + jit["8"]
    assert "timeout: not finished: its step generation-jax-jit timeout" in jit["64"]
    kept = [r for r in load(out / "results").of("generation") if r.get("mode") == "jit"]
    assert sorted(r["batch_size"] for r in kept) == [1, 8]
