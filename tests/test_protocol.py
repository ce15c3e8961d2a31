"""The suites' protocol: what a suite declares (xfbench.plugin.Suite) and what its report
module declares (xfbench.report.suites.Hooks). Every hook has its shape declared, and mypy
(configured in pyproject.toml, run by .ci/run) holds every declaration to it: a hook of the
wrong shape fails there, before any run. The extension points are few: the fields of the
two, counted as docs/architecture.md counts them."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from xfbench.plugin import Suite
from xfbench.report.suites import Hooks

ROOT = Path(__file__).resolve().parents[1]
# a suite's identity and the plugin's own stash keys are not points a suite extends by
NOT_EXTENSION_POINTS = {"name", "key", "records_key"}
MOST_EXTENSION_POINTS = 30

PLANTED = """
from xfbench.plugin import GpuPart, Suite, Summary
from xfbench.report.suites import Hooks

WRONG_CELLS = Suite(name="planted", param="cell", cells=lambda: [])  # takes no metafunc
WRONG_TABLE = Suite(
    name="planted", param="cell", cells=lambda metafunc: [],
    summary=Summary(title="t", table=lambda records, more: ""),  # two arguments
)
WRONG_STEPS = Suite(name="planted", param="cell", cells=lambda metafunc: [],
                    gpu=GpuPart(steps=3))  # not callable


def scored(run, reference):  # the scores give it one run
    return []


WRONG_SCORED = Hooks(scored=scored)
WRONG_SECTIONS = Hooks(sections={"suites": lambda report: []})  # and its plots
"""


def extension_points() -> list[str]:
    return [
        f"{cls.__name__}.{f.name}"
        for cls in (Suite, Hooks)
        for f in dataclasses.fields(cls)
        if f.name not in NOT_EXTENSION_POINTS
    ]


def test_the_protocol_has_at_most_30_extension_points():
    found = extension_points()
    assert len(found) <= MOST_EXTENSION_POINTS, found


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_mypy_passes_the_declarations_and_fails_a_hook_of_the_wrong_shape(tmp_path, monkeypatch):
    """One mypy run over the configured modules (what .ci/run runs) and a planted module:
    every error is the planted module's (the real declarations pass), one for each wrong
    hook."""
    api = pytest.importorskip("mypy.api", reason="mypy, pinned in requirements.lock")
    planted = tmp_path / "planted_suite.py"
    planted.write_text(PLANTED)
    files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    monkeypatch.chdir(ROOT)
    out, err, status = api.run(
        ["--config-file", "pyproject.toml", "--cache-dir", str(tmp_path / "cache"),
         *files, str(planted)]
    )  # fmt: skip
    assert status == 1, out + err
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert errors and all(line.startswith(str(planted)) for line in errors), out
    wrong = {int(line.split(":")[1]) for line in errors}
    lines = PLANTED.splitlines()
    for name in ("WRONG_CELLS", "WRONG_TABLE", "WRONG_STEPS", "WRONG_SCORED", "WRONG_SECTIONS"):
        start = next(i for i, line in enumerate(lines, 1) if line.startswith(name))
        end = next((i for i, line in enumerate(lines, 1) if i > start and not line.strip()), 99)
        assert any(start <= n <= end for n in wrong), (name, out)


def test_a_run_holds_its_records_by_kind_and_nothing_else():
    """Every declared kind is read into Run.of(kind), Table 7's cells and the equivalence
    checks as any other's (an H200 window: training cells, GEMM products, generation
    records, equivalence checks; a Zen 4 run: inference, training, serving, generation)."""
    from xfbench.report.load import Run, load_many
    from xfbench.report.suites import by_kind

    references = ROOT / "xfbench" / "report" / "references"
    [h200] = [r for r in load_many(references / "2026-11-28-h200-sxm") if r.name == "first"]
    zen4 = load_many(references / "2026-11-26-amd-epyc-zen4-2c")[0]
    fields = {f.name for f in dataclasses.fields(Run)}
    assert "records" in fields and not fields & {"results", "equivalence"}
    for run, kinds in ((h200, {"train", "gemm", "generation", "equivalence"}),
                       (zen4, {"train", "infer", "serving", "generation"})):  # fmt: skip
        assert set(run.records) == kinds
        assert kinds - {"equivalence"} <= set(by_kind())
        for kind in kinds & {"train", "infer"}:
            assert run.of(kind) and all(r.task == kind for r in run.of(kind))
        assert len(run.of(*kinds)) == sum(len(found) for found in run.records.values())


def test_a_machine_holds_its_runs_records_by_kind_and_table_7_reads_them():
    """A Machine keeps its runs' records by kind, Table 7's as any suite's; the network
    suite builds its view of them (its timed cells by block, row and column) where it reads
    them; and a run joins its machine's group unless it measured one of the same cells of
    any suite again (here serving's)."""
    from dataclasses import replace

    from xfbench.networks.report.cells import machine_cells
    from xfbench.report.load import load_many
    from xfbench.report.model import Machine, group_machines

    fields = {f.name for f in dataclasses.fields(Machine)}
    assert "records" in fields and not fields & {"results", "failures", "copies", "equivalence"}
    run = load_many(ROOT / "xfbench" / "report" / "references" / "2026-11-26-amd-epyc-zen4-2c")[0]
    cells = {k: v for k, v in run.records.items() if k in ("train", "infer")}
    others = {k: v for k, v in run.records.items() if k not in cells}
    assert "serving" in others
    parts = [
        replace(run, name="cells", records=cells),
        replace(run, name="others", records=others),
        replace(run, name="serving again", records={"serving": others["serving"]}),
    ]
    machines = group_machines(parts)
    assert [m.names for m in machines] == [["cells", "others"], ["serving again"]]
    assert machines[0].records == {**cells, **others}
    view = machine_cells(machines[0])
    timed = [r for r in run.of("train", "infer") if r.ok and r.copies == 1]
    assert view.results and {id(r) for r in view.results.values()} <= {id(r) for r in timed}
    assert not machine_cells(machines[1]).results
