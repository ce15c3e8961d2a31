"""Calls say what they pass: cells, selections, plans and reports are keyword-only
dataclasses, and no call to a function or class of xfbench passes more than four arguments
by position (a command line's *args excepted), so that a field added or reordered cannot
silently shift the others."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MOST_BY_POSITION = 4


def _callables() -> set[str]:
    """Names of xfbench's functions, methods and classes that take a fixed list of
    arguments (those with *args take a list, such as a command line's)."""
    names, variadic = set(), set()
    for path in (ROOT / "xfbench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                (variadic if node.args.vararg else names).add(node.name)
            elif isinstance(node, ast.ClassDef):
                names.add(node.name)
    return names - variadic


def _outside_modules(tree: ast.Module) -> set[str]:
    """Names this file binds to other projects' modules (jax, lax, nn, tf, ...)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if not node.module.startswith("xfbench"):
                out |= {a.asname or a.name for a in node.names}
    return out - {"xfbench"}


def _root(func: ast.expr) -> str | None:
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else None


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_no_call_passes_more_than_four_arguments_by_position():
    ours = _callables()
    wide = []
    for folder in ("xfbench", "tests", "crosscheck"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            outside = _outside_modules(tree)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name not in ours or (isinstance(func, ast.Attribute) and _root(func) in outside):
                    continue
                by_position = [a for a in node.args if not isinstance(a, ast.Starred)]
                if len(by_position) > MOST_BY_POSITION:
                    wide.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert not wide, "pass these by keyword:\n" + "\n".join(wide)


@pytest.mark.parametrize(
    "where",
    [
        "xfbench.adapters.base:Cell",
        "xfbench.harness.selection:Selection",
        "xfbench.gemm.measure:GemmCell",
        "xfbench.gemm.plugin:GemmSelection",
        "xfbench.scaling.cell:ScalingCell",
        "xfbench.allreduce.plugin:AllreduceSelection",
        "xfbench.runner.plan:Plan",
        "xfbench.report.model:Report",
        "xfbench.report.score:Score",
    ],
)
def test_cells_selections_plans_and_reports_are_keyword_only(where):
    import importlib

    module, name = where.split(":")
    cls = getattr(importlib.import_module(module), name)
    assert all(f.kw_only for f in dataclasses.fields(cls)), f"{where} takes arguments by position"


MOST_LINES = 100


def test_no_function_is_over_a_hundred_lines():
    """A function that long does several things: each gets a name of its own."""
    long = []
    for path in sorted((ROOT / "xfbench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MOST_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert not long, "split these into named steps:\n" + "\n".join(long)
