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

from xfbench import records

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


# The network suite's record kinds are named after the tasks a network runs at in the layers
# beneath the suites (Spec.flops(task), Cell.task, each framework's `tasks`), which every
# suite's package that runs a network speaks too, and so does `xfbench profile --task` (a
# spec's task): there `train` and `infer` are those tasks, not the suite.
TASK_WORDS = {"train", "infer"}
SPEAK_TASKS = (
    "models/", "exchange/", "data/", "adapters/", "harness/", "frameworks.py", "suites/",
    "roofline/profile.py", "roofline/layers.py", "roofline/cli.py",
)  # fmt: skip
# A suite built on others (its layer above theirs, tests/test_layering.py) names them:
# token serving runs generation's decoders under serving's LoadGen.
BUILT_ON = {"token_serving/": ("generation", "serving")}
# Where a module outside a suite's package says a word of it by right: (module, or folder
# ending in /, word) -> why. Any other mention is a leak.
ALLOWED = {
    ("token_serving/", "single"): "LoadGen's SingleStream scenario, by its short name",
    ("serving/", "single"): "LoadGen's SingleStream scenario, by its short name",
    ("generation/plugin.py", "tokenserving"): "--lengths, its option: what token serving takes",
    ("serving/plugin.py", "tokenserving"): "--scenario, its option: what token serving takes",
    ("generation/gpu_steps.py", "serving"): "the GPU plan's part it shares with token serving",
    ("allreduce/gpu_steps.py", "gemm"): "its GPU step runs in the GEMM's part (the device's own)",
    ("networks/report/table7_csv.py", "gemm"): "Table 7's CSV column gemm_peak_tflops",
    ("scaling/", "allreduce"): "data parallelism's gradient all-reduce",
    ("gemm/fields.py", "scaling"): "fp8's scaling factors",
    ("adapters/jax/workload.py", "scaling"): "mixed precision's loss scaling",
    ("adapters/", "generation"): "a framework's token generation (Generator), which suites use",
    ("adapters/base.py", "serve"): "a workload serves samples (infer_samples), which suites use",
    ("adapters/torch/", "gemm"): "BLAS's and PyTorch Inductor's name for a matrix product",
    ("generation/fields.py", "gemm"): "PyTorch Inductor's max_autotune_gemm_backends",
    ("exchange/graph.py", "gemm"): "ONNX's Gemm operator",
    ("roofline/", "gemm"): "its peak probe: NumPy's GEMM",
    ("roofline/cli.py", "generate"): "xfbench profile --task generate: a decoder's decode step",
}


def _parts(text: str) -> list[str]:
    """The words of an identifier or a string, in lower case: split on anything not a
    letter or digit (`_`, `-`, `.`, `/`, spaces) and on camel case (GEMM_PEAK, gemmPeak and
    "gemm peak" are all gemm, peak)."""
    found = []
    for token in re.split(r"[^0-9A-Za-z]+", text):
        found += re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", token)
    return [w.lower() for w in found]


def _texts(source: str):
    """(line, text) of every identifier and string of a module's code, docstrings (and
    comments) aside: what it defines (functions, classes, arguments), the keywords it
    passes, the names and attributes it reads, the modules and names it imports and their
    aliases (`from a import b` also as a.b), its string constants. pytest's hook names
    (pytest_generate_tests) are pytest's."""
    import ast

    tree = ast.parse(source)
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str) and id(node) not in docstrings:
                yield node.lineno, node.value
            continue
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield node.lineno, f"{node.module or ''}.{alias.name}"
        line = getattr(node, "lineno", 0)
        for field, value in ast.iter_fields(node):
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and field != "type_comment":
                    if not item.startswith("pytest_"):
                        yield line, item


def suite_words(suites) -> dict[str, dict[str, str]]:
    """What names each suite: suite -> {word: how it counts}. Its record kinds, tasks and
    older kinds, also as a run of a longer name's words (gemm in GEMM_PEAK, all-reduce in
    "the all-reduce"), as does its package's path (xfbench.gemm in `import
    xfbench.gemm.report`); its name only as a whole name or string ("single", "GEMM", not
    the word of a sentence). Each word written as its parts run together (token_serving:
    tokenserving)."""
    words: dict[str, dict[str, str]] = {}
    for s in suites:
        package = s.report.split(".")[1]
        aliases = [a for a, kind in records.ALIASES.items() if kind in s.kinds]
        part = (*s.kinds, *s.tasks, *aliases, f"xfbench.{package}")
        words[s.name] = {"".join(_parts(w)): "part" for w in part}
        words[s.name].setdefault("".join(_parts(s.name)), "whole")
    return words


def mentions(source: str, words: dict[str, dict[str, str]]):
    """(line, suite, word, text) of each mention of a suite in a module's code. Where
    runs of words overlap, the longest counts (token_serving is token serving's, not
    serving's)."""
    for line, text in _texts(source):
        parts = _parts(text)
        found = []
        for i in range(len(parts)):
            for j in range(i + 1, len(parts) + 1):
                run = "".join(parts[i:j])
                for suite, own in words.items():
                    whole = (i, j) == (0, len(parts))
                    if run in own and (own[run] == "part" or whole):
                        found.append((i, j, suite, run))
        for i, j, suite, run in found:
            if not any(a <= i and j <= b and b - a > j - i for a, b, _, _ in found):
                yield line, suite, run, text


def _allowed(rel: str, suite: str, word: str, packages: tuple[str, ...]) -> bool:
    if word in TASK_WORDS and rel.startswith((*SPEAK_TASKS, *packages)):
        return True
    if any(rel.startswith(where) and suite in on for where, on in BUILT_ON.items()):
        return True
    return any(rel.startswith(where) and word == w for where, w in ALLOWED)


def leaks(package: Path, suites) -> dict[str, list[str]]:
    """Every mention of a suite in every module of the package outside the suite's own:
    its package, its pytest files in suites/ (test_PACKAGE.py, or those it declares) and
    its one line in plugin.py (its plugin module in pytest_plugins); rel -> ["line suite:
    text"]."""
    words = suite_words(suites)
    own, lines = {}, {}
    for s in suites:
        name = s.report.split(".")[1]
        files = {f"suites/test_{name}.py", *(f"suites/{f}" for f in s.files if f)}
        own[s.name] = (f"{name}/", *files)
        lines[s.name] = f"xfbench.{name}.plugin"
    packages = tuple(own[s.name][0] for s in suites)
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        for line, suite, word, text in mentions(path.read_text(), words):
            if rel.startswith(own[suite]) or (rel == "plugin.py" and text == lines[suite]):
                continue
            if not _allowed(rel, suite, word, packages):
                found.setdefault(rel, []).append(f"{line} {suite}: {text[:80]!r}")
    return found


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_code_outside_a_suite_names_no_suite_that_declares_its_report():
    """What a suite's declaration carries is read from it: no module of xfbench/ outside a
    suite's own (its package, its pytest files, its line in pytest_plugins), docstrings
    and comments aside, names a suite with a report of its own (all seven, Table 7's
    network suite among them), in any identifier or string (suite_words), but where
    ALLOWED or TASK_WORDS say why. Where one must (Table 7's CSV column
    `gemm_peak_tflops`), the suite's package says it."""
    from xfbench.plugin import declared

    suites = [s for s in declared().values() if s.report]
    words = suite_words(suites)
    assert len(suites) == 7 and "single" in words and "train" in words["single"]
    assert {"gemm", "serving", "generation", "allreduce", "scaling", "tokenserving"} <= {
        w for own in words.values() for w in own
    }
    assert leaks(ROOT / "xfbench", suites) == {}


@pytest.mark.parametrize(
    "planted",
    [
        "def gemm_peak(device):\n    return 0\n",
        "class ServingTable:\n    pass\n",
        "f(generation=3)\n",
        "import xfbench.gemm.report as g\n",
        "from xfbench import networks\n",
        "PEAK = GEMM_PEAK\n",
        "x = gemmPeak\n",
        'KIND = "all-reduce"\n',
        "def f(*, token_serving=None):\n    pass\n",
        'WHAT = "single"\n',
        "ok = kind == 'train'\n",
    ],
)
def test_the_guard_finds_a_suite_however_it_is_named(planted, tmp_path):
    """A module planted among those the guard reads names a suite each way code can:
    each is found (where the guard read only string constants, names, attributes and
    `from` imports of a fixed list of modules, all but the last two passed)."""
    from xfbench.plugin import declared

    suites = [s for s in declared().values() if s.report]
    package = tmp_path / "xfbench"
    (package / "machine_room").mkdir(parents=True)  # a module no list names
    (package / "machine_room" / "planted.py").write_text(planted)
    assert list(leaks(package, suites)) == ["machine_room/planted.py"]
    (package / "machine_room" / "planted.py").write_text('"""gemm, serving: a docstring."""\n')
    assert leaks(package, suites) == {}


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
