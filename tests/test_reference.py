"""`xfbench reference`: what a GPU window brought back becomes a checked-in reference in
one command, true to its cells, the same again when run twice, and a second window of the
same part beside the first. Planted on the H200's first window as it came back
(gpu/returns/), cut down where a window is cut at a cap."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from xfbench.acceptance.reference import main
from xfbench.report.score import REFERENCES

ROOT = Path(__file__).resolve().parents[1]
WINDOW = ROOT / "gpu" / "returns" / "2026-11-28-h200-window-1"


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _planted(tmp_path: Path, name: str, cut: str, step: str, unmerged=lambda info: False) -> Path:
    """The window again, as if its step had been cut at its cap before cell `cut` ended
    (and, where unmerged says so of a record, before its runner merged it)."""
    back = tmp_path / name
    back.mkdir()
    shutil.copy(WINDOW / "console.log", back / "console.log")
    with (
        tarfile.open(WINDOW / "acceptance.tar.gz") as src,
        tarfile.open(back / "acceptance.tar.gz", "w:gz") as dst,
    ):
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if cut in m.name:
                continue
            if m.name.endswith("/steps.json"):
                outcomes = json.loads(data)
                for o in outcomes:
                    o["seconds"] += 1.0  # another window's times
                    if o["step"] == step:
                        o.update(status="timeout", reason="no result within 40 s")
                data = json.dumps(outcomes).encode()
                m.size = len(data)
            if m.name.endswith("/results/merged.json"):
                doc = json.loads(data)
                doc["benchmarks"] = [b for b in doc["benchmarks"] if not unmerged(b["extra_info"])]
                data = json.dumps(doc).encode()
                m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    return back


def test_a_window_becomes_a_reference_in_one_command_and_twice_changes_nothing(tmp_path):
    into = tmp_path / "references"
    assert main([str(WINDOW), "--into", str(into), "--commit", "d1cfac2"]) == 0
    folder = into / "2026-11-28-h200-sxm"
    part = folder / "first"
    assert sorted(p.name for p in part.iterdir()) == [
        "gpu-tests.xml", "merged.json", "roofs.json", "selection.json", "steps.json",
        "window.json",
    ]  # fmt: skip
    merged = json.loads((part / "merged.json").read_text())
    kinds = {b["extra_info"]["kind"] for b in merged["benchmarks"]}
    assert {"train", "generation", "gemm", "equivalence"} <= kinds
    assert merged["commit_info"]["id"] == "d1cfac2"
    assert merged["commit_info"]["recorded_id"].startswith("3fc590f")  # the device's git
    # the selection is the sweeps' as planned: one a sweep, each naming what its cells are
    selections = json.loads((part / "selection.json").read_text())
    assert len(selections) == 6
    generation = [s for s in selections if s.get("suite") == "generation"]
    assert sorted(s["batch_sizes"] == [1] for s in generation) == [True, True]
    readme = (folder / "README.md").read_text()
    assert "# NVIDIA H200, 2026-11-28" in readme and "xfbench at d1cfac2" in readme
    assert "| first-gemm | passed | 56 |  |" in readme
    before = _tree(into)
    assert main([str(WINDOW), "--into", str(into), "--commit", "d1cfac2"]) == 0
    assert _tree(into) == before


def test_a_second_window_of_a_part_adds_its_runs_and_says_what_it_lost(tmp_path, capsys):
    """A second window of the same part, whose JAX step was cut at its cap before its
    ResNet-56 cell ended, goes beside the first: the cut cell is a failure naming its
    step, and the cells it shares with the first's folder (the same measurements, a
    resumed folder) are not added twice."""
    into = tmp_path / "references"
    assert main([str(WINDOW), "--into", str(into), "--commit", "d1cfac2"]) == 0
    cut = "cells/train-jax-resnet56-jit-fp32-cuda0-t16-b128.json"
    second = _planted(tmp_path, "second", cut, "first-jax")
    assert main([str(second), "--into", str(into), "--commit", "d1cfac2"]) == 0
    part = into / "2026-11-28-h200-sxm" / "first-2"
    merged = json.loads((part / "merged.json").read_text())
    assert merged["benchmarks"] == []  # every measurement it holds is the first's
    [lost] = merged["xfbench"]["failures"]
    assert lost["cell"]["network"] == "resnet56" and lost["status"] == "timeout"
    assert "its step first-jax timeout" in lost["reason"]
    readme = (into / "2026-11-28-h200-sxm" / "README.md").read_text()
    assert "## `first-2`" in readme and "timeout: train jax resnet56" in readme


def test_what_cannot_be_read_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty"), "--into", str(tmp_path / "refs")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("xfbench reference: ") and "not a window's archive" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "refs").exists()


def test_a_sweep_cut_before_its_runner_merged_keeps_every_cell_it_wrote(tmp_path):
    """A window whose JAX sweep was cut at its cap before its runner merged: merged.json
    lacks both its cells, cells/ holds FCN-5's and not ResNet-56's (in flight when cut).
    The reference holds FCN-5's record, ResNet-56 as a failure naming the step's outcome at
    the thread count the window's cells recorded, and a selection of those two cells."""
    cut = "cells/train-jax-resnet56-jit-fp32-cuda0-t16-b128.json"
    back = _planted(tmp_path, "cut", cut, "first-jax",
                    unmerged=lambda info: info.get("task") == "train" and info["framework"] == "jax")  # fmt: skip
    into = tmp_path / "references"
    assert main([str(back), "--into", str(into), "--commit", "d1cfac2"]) == 0
    part = into / "2026-11-28-h200-sxm" / "first"
    merged = json.loads((part / "merged.json").read_text())
    jax = [b["extra_info"] for b in merged["benchmarks"] if b["extra_info"].get("task") == "train"
           and b["extra_info"]["framework"] == "jax"]  # fmt: skip
    assert [r["network"] for r in jax] == ["fcn5"]
    [lost] = merged["xfbench"]["failures"]
    assert lost["cell"]["network"] == "resnet56" and lost["cell"]["threads"] == 16
    assert lost["reason"] == "not finished: its step first-jax timeout: no result within 40 s"
    [selection] = [s for s in json.loads((part / "selection.json").read_text())
                   if s["frameworks"] == ["jax"] and "tasks" in s]  # fmt: skip
    assert selection["networks"] == ["fcn5", "resnet56"] and selection["threads"] == [16]
    assert merged["xfbench"]["selections"] == json.loads((part / "selection.json").read_text())


# A selection's lists, each by the cell field it lists; the tasks of the sweeps' cells
LISTS = {"frameworks": "framework", "networks": "network", "modes": "mode",
         "precisions": "precision", "devices": "device", "threads": "threads",
         "tasks": "task", "batch_sizes": "batch_size"}  # fmt: skip
SWEPT = ("train", "infer", "generate")


def _in(selection: dict, cell: dict) -> bool:
    """The cell is one the selection names (a generation selection's cells generate)."""
    if (selection.get("suite") == "generation") != (cell.get("task") == "generate"):
        return False
    if (
        selection.get("batch_size") is not None
        and cell.get("batch_size") != selection["batch_size"]
    ):
        return False
    return all(cell.get(field) in selection[k] for k, field in LISTS.items() if k in selection)


@pytest.mark.parametrize(
    "part",
    sorted(
        p.parent
        for name in ("2026-11-27-h100-sxm", "2026-11-28-h200-sxm")
        for p in (REFERENCES / name).glob("*/selection.json")
    ),  # fmt: skip
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_a_gpu_references_selections_name_its_folders_cells_and_no_other(part):
    """Each selection of a checked-in GPU reference is its folder's cells (a record or a
    failure there): its lists are lists of its cells' values (batch sizes numbers, threads
    as they recorded them), every cell its lists name is in the folder, and every sweep's
    cell of the folder is in one."""
    merged = json.loads((part / "merged.json").read_text())
    cells = [b["extra_info"] for b in merged["benchmarks"]]
    cells += [f["cell"] for f in merged["xfbench"]["failures"]]
    cells = [c for c in cells if c.get("task") in SWEPT]
    selections = json.loads((part / "selection.json").read_text())
    for s in selections:
        lists = {k: s[k] for k in LISTS if k in s}
        assert all(isinstance(v, list) and v for v in lists.values()), s
        assert all(isinstance(b, int) for b in s.get("batch_sizes", [])), s
        mine = [c for c in cells if _in(s, c)]
        assert {c["threads"] for c in mine} == set(s["threads"]), s
        for values in itertools.product(*lists.values()):
            named = dict(zip([LISTS[k] for k in lists], values))
            assert any(all(c.get(k) == v for k, v in named.items()) for c in mine), (s, named)
    assert all(any(_in(s, c) for s in selections) for c in cells)
    if (part / "window.json").is_file():  # made by xfbench reference: its merged.json says so
        assert merged["xfbench"]["selections"] == selections
