"""The GPU window's script (gpu/window.sh) and its first part: the steps in the order of
what they prove, their caps within one window, what comes back within the device tool's
rule, and the script itself rehearsed on the CPU and on a machine whose only GPU is the
fake NVML one (tests/fake_gpu), so that its step list and device are the GPU's."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from xfbench.acceptance import returns
from xfbench.acceptance.run import RESERVE_S
from xfbench.acceptance.steps import BUDGET_S, PARTS, chosen, steps
from xfbench.report.score import references as checked_in

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "gpu" / "window.sh"
ORDER = [
    "probe",
    "first-roofs",
    "first-gemm",
    "first-resnet50",
    "first-transformers",
    "first-generation-torch",
    "first-generation-jax",
    "first-table7",
    "first-jax",
    "first-gpu-tests",
    "first-equivalence",
]


def test_the_first_part_proves_things_in_order_within_nine_minutes(tmp_path):
    first = chosen(steps("cuda:0", "quick", tmp_path), ["first"], None)
    assert [s.name for s in first] == ORDER
    assert sum(s.cap_s for s in first) + RESERVE_S <= BUDGET_S <= 540
    argv = {s.name: " ".join(s.argv) for s in first}
    assert (
        "--precision=bf16" in argv["first-resnet50"]
        and "--batch-size=256" in argv["first-resnet50"]
    )
    assert "gpt2,bert_base" in argv["first-transformers"]
    for framework, mode in (("torch", "cudagraph"), ("jax", "loop")):
        generation = argv[f"first-generation-{framework}"]
        assert "--suite=generation" in generation and "--batch-size=1 " in generation
        assert f"--framework={framework} --mode={mode}" in generation
    # the roofs first, into the folder the report reads; the sweeps leave them be
    assert all("--skip-roofs" in argv[n] for n in ORDER[3:9])
    # the raw GEMM, the design's own figure, in the first window (docs/gpus.md)
    assert "--gemm-impl=cupy,torch,jax --gemm-sizes=8192" in argv["first-gemm"]
    assert argv["first-roofs"].endswith(
        "--device cuda:0 --into " + str(tmp_path / "results" / "roofs.json")
    )


def test_every_later_part_fits_one_call(tmp_path):
    """A window holds one call of the acceptance run's default budget (the device's 15
    minutes less its start and transfers): the generation part's caps had come to 710 s,
    Table 7's to 1,440 and the checks' to 1,110, so no window could have run them."""
    every = steps("cuda:0", "quick", tmp_path)
    probe = next(s.cap_s for s in every if s.part == "probe")
    for part in PARTS[1:]:
        caps = sum(s.cap_s for s in every if s.part == part)
        assert caps and probe + caps + RESERVE_S <= BUDGET_S, part


def test_the_rule_for_what_comes_back_is_checked(tmp_path):
    fine = tmp_path / "fine"
    (fine / "a" / "b").mkdir(parents=True)
    (fine / "a" / "b" / "deep-enough.txt").write_text("x")
    assert returns.violations(fine) == []
    bad = tmp_path / "bad"
    (bad / "a" / "b" / "c").mkdir(parents=True)
    (bad / "a" / "b" / "c" / "too-deep.txt").write_text("x")
    (bad / "odd name.txt").write_text("x")
    for i in range(8):
        (bad / f"f{i}").write_text("x")
    with open(bad / "big", "wb") as f:
        f.truncate(returns.FILE_BYTES + 1)
    found = "\n".join(returns.violations(bad))
    assert "11 files, more than 8" in found and "more than 2 folders down" in found
    assert "'odd name.txt' has characters" in found and f"{returns.FILE_BYTES + 1} bytes" in found


def test_a_pack_too_large_leaves_out_its_largest_files_and_says_so(tmp_path, monkeypatch):
    out, into = tmp_path / "out", tmp_path / "back"
    (out / "logs").mkdir(parents=True)
    (out / "steps.json").write_text("[]")
    (out / "logs" / "huge.log").write_bytes(os.urandom(200_000))  # random: no compression
    monkeypatch.setattr(returns, "FILE_BYTES", 100_000)
    left = returns.pack(out, into, "## Steps")
    assert left == [out / "logs" / "huge.log"]
    names = tarfile.open(into / returns.ARCHIVE).getnames()
    assert "out/steps.json" in names and "out/logs/huge.log" not in names
    assert "out/left-out.txt" in names
    assert "logs/huge.log" in (into / returns.SUMMARY).read_text()
    assert returns.violations(into) == []


def _window(tmp_path: Path, *args: str, fake_gpu: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # the script runs `python3`: this interpreter, as the GPU machine's python3 is its own
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["OUT"] = str(tmp_path / "back")
    env.pop("PYTHONPATH", None)
    if fake_gpu:
        env["PYTHONPATH"] = str(ROOT / "tests" / "fake_gpu")
    # --out only keeps the rehearsal out of the checkout's results/
    return subprocess.run(
        ["bash", str(SCRIPT), *args, "--out", str(tmp_path / "work")],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def _statuses(summary: str) -> dict[str, str]:
    """The summary's Steps table: step -> status."""
    rows = summary.split("## Steps")[1].split("\n\n")[1].splitlines()[2:]
    return {cells[1].strip(): cells[2].strip() for cells in (r.split("|") for r in rows)}


@pytest.mark.slow
@pytest.mark.rehearsal
def test_the_script_rehearsed_on_the_cpu_runs_every_step_and_returns_within_the_rule(tmp_path):
    done = _window(tmp_path, "--device", "cpu", "--preset", "smoke")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    back = tmp_path / "back"
    assert returns.violations(back) == []
    assert sorted(p.name for p in back.iterdir()) == [
        "acceptance.tar.gz",
        "console.log",
        "summary.md",
    ]
    summary = (back / "summary.md").read_text()
    # the output ends with the summary, as plain text
    assert done.stdout.rstrip().endswith(summary.rstrip().splitlines()[-1])
    assert _statuses(summary) == dict.fromkeys(ORDER, "passed")
    names = tarfile.open(back / returns.ARCHIVE).getnames()
    for kept in ("steps.json", "equivalence.json", "results/merged.json",
                 "results/roofs.json", "logs/first-jax.log"):  # fmt: skip
        assert f"work/{kept}" in names
    assert "8 cells measured, 0 failed" in summary  # training; and the decoding:
    generation = summary.split("## xfbench generation:")[1]
    assert generation.count("jax          loop") == 1
    # PyTorch's step decodes eagerly there (CUDA graphs replay only on a GPU), checked
    assert re.search(r"torch +eager +fp32", generation) and "DIVERGED" not in generation


@pytest.mark.slow
@pytest.mark.rehearsal
def test_the_decoders_part_rehearsed_on_the_cpu_makes_decodes_and_checks_its_network(tmp_path):
    """The 6.7B decoder's first part as a window runs it, at smoke size on the CPU: its
    weights made by PyTorch and JAX themselves, its tokens checked, both steps passed."""
    done = _window(tmp_path, "--device", "cpu", "--preset", "smoke", "--part", "decode-6.7b")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = (tmp_path / "back" / "summary.md").read_text()
    assert _statuses(summary) == dict.fromkeys(
        ["probe", "decode-6.7b-torch-b1", "decode-6.7b-jax"], "passed"
    )
    generation = summary.split("## xfbench generation:")[1]
    assert re.search(r"torch +eager +bf16", generation) and "DIVERGED" not in generation
    assert len(re.findall(r"jax +loop +bf16", generation)) == 2  # smoke's batch 1 and 2


@pytest.mark.slow
@pytest.mark.rehearsal
def test_the_script_rehearsed_with_a_fake_gpu_takes_the_gpus_steps_and_device(tmp_path):
    done = _window(tmp_path, "--preset", "smoke", fake_gpu=True)
    back = tmp_path / "back"
    assert returns.violations(back) == []
    # no reference holds this fake model: the next part is the first, said first
    first, second = done.stdout.splitlines()[:2]
    assert first.startswith("xfbench acceptance: part first, next in the plan for NVIDIA")
    assert second.startswith(f"xfbench acceptance: {len(ORDER)} steps on cuda:0")
    summary = (back / "summary.md").read_text()
    assert list(_statuses(summary)) == ORDER
    # the CPU builds here cannot use the fake GPU: its cells skip with the reason, never
    # running on the CPU instead
    assert "0 cells measured" in summary and "cuda:0 is not present to torch" in summary
    assert "roofs not measured: cuda:0" in summary


def test_what_comes_back_is_rewritten_after_every_step(tmp_path, monkeypatch):
    """A run cut off during a step still returns the steps before it: the second step
    finds the first already in the packed summary."""
    from xfbench.acceptance import cli
    from xfbench.acceptance.steps import Step

    back = tmp_path / "back"
    check = (
        "import pathlib, sys; "
        f"text = pathlib.Path({str(back / returns.SUMMARY)!r}).read_text(); "
        "sys.exit(0 if '| one ' in text and '| passed ' in text else 3)"
    )
    stand_ins = [
        Step(name="one", part="first", cap_s=30, argv=(sys.executable, "-c", "pass"), what=""),
        Step(name="two", part="first", cap_s=30, argv=(sys.executable, "-c", check), what=""),
    ]
    monkeypatch.setattr(cli, "steps", lambda device, preset, out: stand_ins)
    argv = ["--device", "cpu", "--out", str(tmp_path / "work"), "--pack", str(back)]
    assert cli.main(argv) == 0
    assert _statuses((back / returns.SUMMARY).read_text()) == {"one": "passed", "two": "passed"}
    assert cli.main([*argv[:-1], str(tmp_path / "work" / "inside")]) == 2  # would pack itself


def test_the_pages_first_part_table_gives_the_caps_the_code_sets(tmp_path):
    """docs/gpus.md's table of the first part: its steps in order, each with its cap."""
    import re

    page = (ROOT / "docs" / "gpus.md").read_text()
    section = page.split("### The first part")[1].split("###")[0]
    rows = re.findall(r"^\| `([a-z0-9.-]+)` \|.*\| (\d+) s \|$", section, re.MULTILINE)
    first = chosen(steps("cuda:0", "quick", tmp_path), ["first"], None)
    assert rows == [(s.name, str(s.cap_s)) for s in first]
    total = sum(s.cap_s for s in first)
    assert f"{total} s in all, with {RESERVE_S} s kept" in section


def test_the_pages_later_parts_table_gives_the_steps_and_caps_the_code_sets(tmp_path):
    """docs/gpus.md's table of the later parts: every part in PARTS's order, each with its
    steps and their caps (a window is planned from this table)."""
    import re

    page = (ROOT / "docs" / "gpus.md").read_text()
    section = page.split("### Later windows")[1].split("\n### ")[0]
    rows = re.findall(r"^\| `([a-z0-9.-]+)` \| ((?:`[a-z0-9.-]+` \d+ s(?:, )?)+) \|", section, re.M)
    every = steps("cuda:0", "quick", tmp_path)
    assert [part for part, _ in rows] == list(PARTS[1:])
    for part, listed in rows:
        planned = [f"`{s.name}` {s.cap_s} s" for s in every if s.part == part]
        assert listed.split(", ") == planned, part
    commands = re.findall(r"^bash gpu/window.sh --part ([a-z0-9.-]+)", section, re.M)
    assert commands == list(PARTS[1:])


def _next_for(model: str, monkeypatch, tmp_path, references=None):
    from xfbench.acceptance import plan

    monkeypatch.setattr(plan, "gpu_name", lambda device: model)
    everything = steps("cuda:0", "quick", tmp_path)
    return plan.choose(everything, "cuda:0", BUDGET_S, references or checked_in())


def test_a_window_measures_todays_decode_first_then_the_next_part(monkeypatch, tmp_path):
    """With the checked-in references, both GPU models' PyTorch decode cells were measured
    before the decode step was rewritten (generation's TIMED): an H100 and an H200 run it
    first; then the H100 the first part's steps its folders lack (its GEMM's figures were
    lost, its GPU tests' and equivalence checks' outputs not kept), the H200, whose first
    part is held, the later steps that fit. A model with no reference gets the whole first
    part. Matched by the exact name, as scores are."""
    h100 = _next_for("NVIDIA H100 80GB HBM3", monkeypatch, tmp_path)
    names = [s.name for s in h100.steps]
    assert names == [
        "probe",
        "first-generation-torch",
        "decode-torch-b1",
        "first-gemm",
        "first-gpu-tests",
        "first-equivalence",
    ]
    assert h100.line.startswith("today's code first: first-generation-torch, decode-torch-b1")
    assert "2026-11-27-h100-sxm holds 6 of its 10 steps" in h100.line
    h200 = _next_for("NVIDIA H200", monkeypatch, tmp_path)
    names = [s.name for s in h200.steps]
    assert names[:3] == ["probe", "first-generation-torch", "decode-torch-b1"]
    assert "first-gemm" not in names and "2026-11-28-h200-sxm holds 9 of its 10" in h200.line
    # a step that does not fit (batch 8's) never stops the later ones that do
    assert "decode-torch-b8" not in names and "decode-jax-bf16" in names
    assert "left for later windows, past the budget: decode-torch-b8" in h200.line
    without_h200 = [p for p in checked_in() if not p.name.endswith("h200-sxm")]
    fresh = _next_for("NVIDIA H200", monkeypatch, tmp_path, without_h200)
    assert [s.name for s in fresh.steps] == ORDER
    assert "no checked-in reference was measured on NVIDIA H200" in fresh.line
    # a near name is another model: an H100 PCIe is not held by the SXM's reference
    assert [s.name for s in _next_for("NVIDIA H100 PCIe", monkeypatch, tmp_path).steps] == ORDER


@pytest.mark.parametrize("model", ["NVIDIA H100 80GB HBM3", "NVIDIA H200"])
def test_a_window_uses_at_least_four_fifths_of_its_budget(model, monkeypatch, tmp_path):
    """The steps' caps fill the budget left after the probe and the reserve to 80 % or
    more, or every step not held is planned; never past it."""
    from xfbench.acceptance import plan

    found = _next_for(model, monkeypatch, tmp_path)
    probe, *todo = found.steps
    room = BUDGET_S - RESERVE_S - probe.cap_s
    caps = sum(s.cap_s for s in todo)
    assert caps <= room
    h = plan.held(model, checked_in())
    every = [s for s in steps("cuda:0", "quick", tmp_path) if s.part != "probe"]
    unheld = [s for s in every if not plan.step_held(s, "cuda:0", h)]
    assert caps >= 0.8 * room or len(todo) == len(unheld), (caps, room)


def _jit_step(tmp_path):
    return next(s for s in steps("cuda:0", "quick", tmp_path) if s.name == "generation-jax-jit")


def _cells(step, **fields):
    from xfbench.acceptance import plan

    return [c for c in plan.planned_cells(step) if all(c[k] == v for k, v in fields.items())]


def test_a_cut_step_runs_only_its_unfinished_cells_and_never_again_as_it_was(tmp_path):
    """JAX's jit step was cut at its 110 s cap on the H200 while at batch 64: its batch 1
    and 8 cells finished. The next window runs batch 64 alone under the same cap; had the
    cut run finished none, its cap doubles (the cells needed more than it)."""
    from xfbench.acceptance import plan

    step = _jit_step(tmp_path)
    finished = [{**c, "status": "ok"} for c in _cells(step) if c["batch_size"] != 64]
    unfinished = [{**c, "status": "timeout"} for c in _cells(step, batch_size=64)]
    records = (*finished, *unfinished)
    cut = (plan.Cut(step.name, 110, records),)
    h = plan.Held(("ref",), records, frozenset(), frozenset(), cuts=cut)
    todo = plan.to_run(step, "cuda:0", h, [])
    assert "--batch-size=64" in todo.step.argv and todo.step.cap_s == 110
    assert [c["batch_size"] for c in todo.cells] == [64]
    assert "only the cells it did not finish" in todo.note
    nothing = tuple({**c, "status": "timeout"} for c in _cells(step))
    cut = (plan.Cut(step.name, 110, nothing),)
    h = plan.Held(("ref",), nothing, frozenset(), frozenset(), cuts=cut)
    todo = plan.to_run(step, "cuda:0", h, [])
    assert todo.step.argv == step.argv and todo.step.cap_s == 220


def test_a_doubled_cap_stays_within_a_window_and_past_it_one_cell_runs_alone(tmp_path):
    """A cut that finished nothing doubles the cap up to what a window holds; cut again at
    that, the same cells are never planned again: the first runs alone under a whole
    window. The longest cut of a step is the one read, whatever its folder's name."""
    from xfbench.acceptance import plan

    step = _jit_step(tmp_path)
    nothing = tuple({**c, "status": "timeout"} for c in _cells(step))

    def after(*caps):
        cuts = tuple(plan.Cut(step.name, cap, nothing) for cap in caps)
        h = plan.Held(("ref",), nothing, frozenset(), frozenset(), cuts=cuts)
        return plan.to_run(step, "cuda:0", h, [], window_s=494)

    assert after(110).step.cap_s == 220
    assert after(220, 110).step.cap_s == after(110, 220).step.cap_s == 440
    alone = after(440, 494)
    assert alone.step.cap_s == 494 and "--batch-size=1" in alone.step.argv
    assert [c["batch_size"] for c in alone.cells] == [1] and "the first alone" in alone.note


def test_a_cut_pytest_step_is_not_planned_again_under_the_same_cap(tmp_path):
    from xfbench.acceptance import plan

    step = next(s for s in steps("cuda:0", "quick", tmp_path) if s.name == "first-gpu-tests")
    h = plan.Held(("ref",), (), frozenset(), frozenset(), cuts=(plan.Cut(step.name, 48, ()),))
    assert plan.to_run(step, "cuda:0", h, [], window_s=494).step.cap_s == 96


def test_a_partly_held_step_runs_the_missing_cells_under_their_share_of_the_cap(tmp_path):
    """A sweep two of whose three batch sizes are held runs the third alone, its cap a
    third of the step's and a process's start; cells planned by an earlier step of the
    window are left out of that count."""
    from xfbench.acceptance import plan

    step = _jit_step(tmp_path)
    held_cells = tuple({**c, "status": "ok"} for c in _cells(step) if c["batch_size"] != 8)
    h = plan.Held(("ref",), held_cells, frozenset(), frozenset())
    todo = plan.to_run(step, "cuda:0", h, [])
    assert "--batch-size=8" in todo.step.argv
    assert todo.step.cap_s == math.ceil(step.cap_s / 3) + 15
    whole = plan.to_run(step, "cuda:0", plan.Held((), (), frozenset(), frozenset()), [])
    assert whole.step.cap_s == step.cap_s and len(whole.cells) == 3
    earlier = _cells(step, batch_size=1)
    todo = plan.to_run(step, "cuda:0", plan.Held((), (), frozenset(), frozenset()), earlier)
    assert len(todo.cells) == 2 and todo.step.cap_s == math.ceil(step.cap_s * 2 / 3) + 15


def test_a_cell_measured_by_older_code_is_not_held(tmp_path):
    """A PyTorch cudagraph cell recorded without timed_version (1) or with an older one is
    stale (generation's TIMED gives 2); with today's version it is held; a JAX loop cell's
    code has not changed, so its old record holds it."""
    from xfbench.acceptance import plan
    from xfbench.generation.cell import timed_version

    every = steps("cuda:0", "quick", tmp_path)
    first = next(s for s in every if s.name == "first-generation-torch")
    (cell,) = plan.planned_cells(first)
    assert timed_version(cell) == 2
    for record, held in (({}, False), ({"timed_version": 1}, False), ({"timed_version": 2}, True)):
        h = plan.Held(("ref",), ({**cell, **record, "status": "ok"},), frozenset(), frozenset())
        todo = plan.to_run(first, "cuda:0", h, [])
        assert (todo is None) is held and (held or todo.stale)
    jax = next(s for s in every if s.name == "first-generation-jax")
    (cell,) = plan.planned_cells(jax)
    h = plan.Held(("ref",), ({**cell, "status": "ok"},), frozenset(), frozenset())
    assert plan.to_run(jax, "cuda:0", h, []) is None


def test_the_list_says_the_caps_planned_against_the_budget(monkeypatch, tmp_path, capsys):
    from xfbench.acceptance import cli, plan

    monkeypatch.setattr(plan, "gpu_name", lambda device: "NVIDIA H200")
    assert cli.main(["--part", "next", "--list", "--device", "cuda:0", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("xfbench acceptance: today's code first: ")
    assert re.search(
        r"^caps: \d+ s planned against the budget's 540 s \(30 s of it kept", out, re.M
    )


def test_a_part_with_failed_cells_counts_only_the_cells_that_passed(monkeypatch, tmp_path):
    """A reference whose generation cells failed holds the first part's other steps, not
    the decoding step; a steps.json that says a pytest step passed holds it."""
    import json
    import shutil

    from xfbench.report.score import REFERENCES

    ref = tmp_path / "refs" / "2026-11-27-h100-sxm"
    shutil.copytree(REFERENCES / "2026-11-27-h100-sxm", ref)
    shutil.rmtree(ref / "generation-2")  # its cudagraph cells are first-part-2's failures
    passed = [{"step": n, "status": "passed"} for n in ("first-gemm", "first-gpu-tests")]
    (ref / "first-part-2" / "steps.json").write_text(json.dumps(passed))
    found = _next_for("NVIDIA H100 80GB HBM3", monkeypatch, tmp_path, [ref])
    names = [s.name for s in found.steps]
    assert names[:3] == ["probe", "first-generation-torch", "first-equivalence"]
    assert "first-gemm" not in names and "first-generation-jax" not in names


@pytest.mark.slow
@pytest.mark.rehearsal
def test_every_part_is_planned_and_collected_at_smoke_sizes(tmp_path):
    """Every step of every part, as the CPU rehearsal would run it (`--device cpu --preset
    smoke`) under the versions this runs with (CI: the GPU machines'): each sweep's command
    is planned by the runner into cells, each pytest step's command collects its tests. The
    first part runs whole above; the later parts are planned and collected, not run, to keep
    CI within its time on a 2-core CPU."""
    from xfbench.runner.plan import plan_of

    every = steps("cpu", "smoke", tmp_path)
    assert {s.part for s in every} == {"probe", *PARTS}
    for step in every:
        argv = list(step.argv)
        if argv[2:4] == ["xfbench.harness.cli", "run"]:
            assert plan_of(argv[4:]).cells, step.name
        elif "pytest" in argv[:3]:
            if any(not Path(p).exists() for p in step.needs):
                continue
            shown = [a for a in argv if not a.startswith(("--benchmark-json", "--junitxml"))]
            done = subprocess.run([*shown, "--collect-only", "-q"], capture_output=True,
                                  text=True, timeout=300)  # fmt: skip
            assert done.returncode == 0, (step.name, done.stdout[-2000:], done.stderr[-2000:])
            assert re.search(r": [1-9]\d*$", done.stdout.strip(), re.M), (
                step.name,
                done.stdout[-500:],
            )
