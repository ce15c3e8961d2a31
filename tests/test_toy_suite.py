"""Adding a suite: the toy suite (tests/toy_suite/, its own package: cells, record kind,
table, plot, CSV file, estimate) is declared in one line, PYTEST_PLUGINS=toy_suite.plugin,
and reaches the plan, the children, the results folder, `xfbench report` (Markdown, HTML,
CSV and its plot), `xfbench compare` and the dry run's estimate, with no file of xfbench
naming it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def _xfbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
        "PYTEST_PLUGINS": "toy_suite.plugin",  # the one line that declares it
    }
    command = [sys.executable, "-m", "xfbench.harness.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_suite_in_its_own_package_reaches_every_command(tmp_path):
    dry = _xfbench("run", "--suite", "toy", "--dry-run", "--results", "r", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "2 cells in 1 process groups, ~1 s in all" in dry.stdout  # its own estimate

    done = _xfbench("run", "--suite", "toy", "--results", "r", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = tmp_path / "r"
    job = json.loads((folder / "jobs" / "toy-null-cpu-t1.json").read_text())
    assert job["suite"] == "toy" and [c["size"] for c in job["cells"]] == [1000, 10000]
    cell = json.loads((folder / "cells" / "toy-sum-1000.json").read_text())
    [entry] = cell["benchmarks"]
    assert entry["extra_info"]["kind"] == "toy" and entry["extra_info"]["seconds"] > 0

    out = tmp_path / "out"
    report = _xfbench("report", str(folder), "--out", str(out), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "## Toy suite" in (out / "report.md").read_text()
    assert "Toy sums" in (out / "report.html").read_text()
    csv = (out / "report-toy.csv").read_text().splitlines()
    assert csv[0] == "machine,size,status,seconds" and len(csv) == 3
    assert (out / "plots" / "toy.png").stat().st_size > 0

    # one run a side of a kind with no history: "cannot tell" (exit 3) is allowed by choice
    compared = _xfbench("compare", str(folder), str(folder), "--cannot-tell-ok", cwd=tmp_path)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "toy-sum" in compared.stdout and "2 cells: 0 regression" in compared.stdout

    named = [p for p in (ROOT / "xfbench").rglob("*.py") if re.search(r"\btoy", p.read_text())]
    assert named == []  # nothing of xfbench was changed for it


# harness/ and frameworks.py run every suite's cells through the adapter protocol, whose
# tasks are the network suite's (train, infer: every framework's `tasks`; scaling trains,
# serving infers): the network suite's tasks and kinds are not counted there (its name is).
ADAPTER_PROTOCOL_FILES = ("harness/", "frameworks.py")


def _words(path: Path):
    """The words of a module's code (docstrings and comments aside): its string constants,
    names, attributes and imports, each with its parts split on `_` (pytest's hook names
    aside: pytest_benchmark_generate_json is pytest-benchmark's, not a suite's) and whether
    it is a whole name or string constant (not a word of a sentence)."""
    import ast

    tree = ast.parse(path.read_text())
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
    }
    for n in ast.walk(tree):
        whole = True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
            words = re.findall(r"[\w-]+", n.value)
            whole = words == [n.value]
        elif isinstance(n, ast.Name | ast.Attribute):
            words = [n.id if isinstance(n, ast.Name) else n.attr]
        elif isinstance(n, ast.ImportFrom):
            words = (n.module or "").split(".") + [a.name for a in n.names]
        else:
            continue
        for word in words:
            parts = [] if word.startswith("pytest_") else word.split("_")
            yield n.lineno, word, parts, whole


def test_code_outside_a_suite_names_no_suite_that_declares_its_report():
    """What a suite's declaration carries is read from it: no code (docstrings aside) of
    records.py, options.py, environment.py, frameworks.py, published.py, harness/, runner/,
    acceptance/ or report/ spells a record kind or task of a suite with a report of its own (all seven,
    Table 7's network suite among them, but in ADAPTER_PROTOCOL_FILES), whole or as a part
    of a name split on `_` (gemm_peak_tflops), or its name as a name or a string of its own
    (`"single"`, not the word in a sentence). Where one must (Table 7's CSV column
    `gemm_peak_tflops`, the paper's rows being training), the suite's package says it."""
    from xfbench.plugin import declared
    from xfbench.report.suites import declared as reports

    names = {s.name for s in reports()}
    words = {w for s in reports() for w in (*s.kinds, *s.tasks)}
    protocol = {w for s in reports() if s.hooks.table7 for w in (*s.kinds, *s.tasks)}
    package = ROOT / "xfbench"
    files = [
        package / f
        for f in ("records.py", "options.py", "environment.py", "frameworks.py", "published.py")
    ]
    for folder in ("harness", "runner", "acceptance", "report"):
        files += sorted((package / folder).rglob("*.py"))
    named: dict[str, list[str]] = {}
    for path in files:
        rel = str(path.relative_to(package))
        counted = words - protocol if rel.startswith(ADAPTER_PROTOCOL_FILES) else words
        for line, word, parts, whole in _words(path):
            if word in counted or any(p in counted for p in parts) or (whole and word in names):
                named.setdefault(rel, []).append(f"{line} {word}")
    assert {s.name for s in reports()} == {n for n, s in declared().items() if s.report}
    assert len(reports()) == 7 and protocol == {"train", "infer"} and "single" in names
    assert words >= {"generation", "serving", "token_serving", "scaling", "allreduce", "gemm"}
    assert named == {}


def test_a_misspelt_hook_fails_where_it_is_declared_or_read():
    """A suite's part of the report is one typed declaration (REPORT = Hooks(...)): a hook
    or a place for its sections that does not exist is refused where a suite declares it,
    and a hook where the report reads it."""
    from xfbench.report.api import Hooks
    from xfbench.report.suites import hooks_of

    with pytest.raises(TypeError, match="sectoins"):
        Hooks(sectoins=lambda report, plots: [])
    with pytest.raises(AttributeError):
        Hooks().sectoins  # noqa: B018
    with pytest.raises(TypeError, match="declares no REPORT"):
        hooks_of("xfbench.report.table")  # a module that declares none
    with pytest.raises(TypeError, match="no place after_score; places: after_scores"):
        Hooks(sections={"after_score": lambda report, plots: []})  # a place that does not exist


@pytest.mark.slow  # copies the package and runs four commands (7 s on a 2-core Zen 3)
def test_a_real_suite_moves_out_by_deleting_its_package_and_its_line(tmp_path):
    """The scaling suite leaves xfbench with its package (xfbench/scaling/), its test file
    (suites/test_scaling.py) and the one line of plugin.py that declares it: what is left
    imports, parses and reports as before (the all-reduce suite keeps --workers, a common
    option), and the reference's report is the same file."""
    import shutil

    without = tmp_path / "without"
    copy = without / "xfbench"
    shutil.copytree(ROOT / "xfbench", copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(copy / "scaling")
    (copy / "suites" / "test_scaling.py").unlink()
    plugin = (copy / "plugin.py").read_text().splitlines(keepends=True)
    line = [n for n, text in enumerate(plugin) if "xfbench.scaling" in text]
    assert len(line) == 1, line
    del plugin[line[0]]
    (copy / "plugin.py").write_text("".join(plugin))
    left = [p for p in copy.rglob("*.py") if re.search(r"xfbench[./]scaling\b", p.read_text())]
    assert left == []

    runs = tmp_path / "runs"  # a folder of neither: `python -m` puts its own first on sys.path
    runs.mkdir()

    def xfbench(root: Path, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(root)}
        command = [sys.executable, "-m", "xfbench.harness.cli", *args]
        return subprocess.run(
            command, cwd=runs, env=env, capture_output=True, text=True, timeout=300
        )

    helped = {root: xfbench(root, "run", "--help") for root in (without, ROOT)}
    words = {root: " ".join(done.stdout.split()) for root, done in helped.items()}
    assert "--scaling" in words[ROOT]  # each side runs its own package
    assert "--scaling" not in words[without], helped[without].stderr
    assert "allreduce: in xfbench run, the same as --world-sizes" in words[without]
    dry = xfbench(without, "run", "--suite", "allreduce", "--dry-run", "--results", "r")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    reports = {}
    for root, name in ((without, "without"), (ROOT, "with")):
        # each side's own copy of the reference: a checked-in reference is scored against
        # the others, not against itself
        reference = root / "xfbench" / "report" / "references" / "2026-11-24-amd-epyc-zen5-2c"
        done = xfbench(root, "report", str(reference), "--out", name)
        assert done.returncode == 0, done.stdout + done.stderr
        text = (runs / name / "report.md").read_text()
        reports[name] = re.sub(r"Generated [^\n]*", "", text)
    assert reports["without"] == reports["with"]
