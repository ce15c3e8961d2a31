"""What may import what inside xfbench (docs/architecture.md): each package imports only
packages of the layers below it, read from the source with ast; and importing one
framework's adapter starts no other framework."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "xfbench"

# Bottom to top. A module may import the layers below its own; within the suites layer,
# only the root plugin (every suite's options and fixtures).
LAYERS = (
    # what is measured, by which frameworks; "cannot"; the CPUs' layout (sysfs only); published figures
    ("models", "frameworks", "errors", "topology", "published"),
    (
        "machine",
        "records",
        "options",
        "command_line",
        "environment",
    ),  # the machine and its CPUs' layout; what a record holds; the options; reading a
    # command line; the variables
    ("exchange",),  # ONNX files and graphs of the specs, and ONNX Runtime as reference
    ("data",),  # the real data sets: readers, sources, the shared sample order
    ("adapters",),  # how each framework runs a spec
    ("harness",),  # selection, threads, timing, the equivalence proof
    ("roofline",),  # the roofs, per-layer profiles (it builds cells), the MFU, the decode's
    # the pytest suites
    (
        "plugin",
        "suites",
        "networks",
        "gemm",
        "scaling",
        "allreduce",
        "serving",
        "generation",
    ),
    ("token_serving",),  # a suite built on two: generation's decoders under serving's LoadGen
    ("bundle",),  # a run's folder packed and checked; the results database
    ("runner",),  # xfbench run
    ("report",),  # xfbench report
    ("acceptance",),  # xfbench acceptance: runs the suites and the sweeps, reads their results
)
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}
# Entry points (`python -m ...`, the xfbench command) sit on top: nothing imports them.
ENTRY_POINTS = ("cli.py", "__main__.py")
# A suite's part of the report (xfbench/<suite>/report.py, or its package
# xfbench/<suite>/report/; report/suites.py) sits in the report's layer: it builds the
# report's tables from the report's model.
SUITE_REPORT = "report.py"


def _own_layer(rel: Path) -> str:
    """The layer a module of the package is in (rel: its path inside the package)."""
    if len(rel.parts) == 2 and rel.name == SUITE_REPORT:
        return "report"
    if len(rel.parts) == 3 and rel.parts[1] == "report":  # a suite's report package
        return "report"
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "xfbench" and len(parts) > 1 and parts[1] in LAYER:
                suite_report = len(parts) > 2 and f"{parts[2]}.py" == SUITE_REPORT
                yield "report" if suite_report else parts[1], node.lineno


def test_every_package_is_in_a_layer():
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert packages | modules == set(LAYER)


def test_no_module_imports_a_layer_above_its_own():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        own = _own_layer(rel)
        if own not in LAYER or path.name in ENTRY_POINTS:
            continue
        for target, line in _imports(path):
            if target == own:
                continue
            same_layer_ok = LAYER[target] == LAYER[own] and target == "plugin"
            if LAYER[target] > LAYER[own] or (LAYER[target] == LAYER[own] and not same_layer_ok):
                wrong.append(f"xfbench/{rel}:{line} imports xfbench.{target}")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def _module_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Every module of the package and the package's modules it imports, anywhere in its
    source (inside functions too): `from a import b` is an import of module a.b where that
    is a module, else of a (its __init__)."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names]
                found |= {t for t in subs if t in modules}
                if not all(t in modules for t in subs):
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {t for t in found if t in modules and t != name}
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of the graph, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_no_import_circles_even_through_imports_inside_functions():
    """An import inside a function still ties two modules together: a circle through one
    works only by the order modules happen to load in."""
    found = _circle(_module_graph())
    assert found is None, "import circle: " + " -> ".join(found)


def test_the_circle_check_finds_a_circle_inside_a_function(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import g\n")
    assert _circle(_module_graph(pkg)) == ["pkg.a", "pkg.b", "pkg.a"]
    (pkg / "b.py").write_text("def f():\n    pass\n")
    assert _circle(_module_graph(pkg)) is None


FRAMEWORKS = ("torch", "tensorflow", "jax", "onnxruntime")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_adapter_imports_no_other_framework(framework):
    """Building the adapter's module and its protocol objects imports no framework at all
    (the framework itself is imported only when a cell runs), and so no other one."""
    code = (
        f"import sys, xfbench.adapters.{framework} as a\n"
        "a.ADAPTER.import_error(); a.ADAPTER.modes\n"
        f"print([m for m in {FRAMEWORKS!r} if m in sys.modules])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_the_architecture_page_names_every_suite_plugin():
    """docs/architecture.md lists the plugins xfbench's pytest plugin loads by name."""
    from xfbench.plugin import pytest_plugins

    page = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    listed = page.split("`pytest_plugins` in `xfbench/plugin.py`")[1].split(";")[0]
    names = [m.split(".")[1] for m in pytest_plugins]
    assert names[0] == "runner" and "`runner/plugin.py`" in listed
    for name in names[1:]:
        assert f"`{name}`" in listed, name


def test_a_suite_takes_what_it_needs_of_the_report_through_its_one_door():
    """A suite's modules import from xfbench/report/ only xfbench.report.api, and nothing
    outside report/ imports a private name (a leading _) of it."""
    from xfbench.plugin import declared

    suite_packages = {s.report.rsplit(".", 1)[0] for s in declared().values() if s.report}
    paths = [p for p in PACKAGE.rglob("*.py") if "report" not in p.relative_to(PACKAGE).parts[:1]]
    paths += list((ROOT / "tests" / "toy_suite").glob("*.py"))
    wrong = []
    for path in sorted(paths):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        in_suite = any(module.startswith(f"{p}.") for p in suite_packages) or "toy_suite" in module
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("xfbench.report")
            ):
                continue
            private = [a.name for a in node.names if a.name.startswith("_")]
            if private or (in_suite and node.module != "xfbench.report.api"):
                wrong.append(
                    f"{path.relative_to(ROOT)}:{node.lineno} from {node.module} import ..."
                )
    assert len(suite_packages) >= 6 and not wrong, "\n".join(wrong)
