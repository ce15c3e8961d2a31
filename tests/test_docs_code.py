"""What README.md and docs/ say that drifts with the code, held to the code: each command's
exit codes (docs/reliability.md), the precisions an adapter runs (adding-a-framework.md),
the generation suite's defaults (generation.md), the CPU's peak probe (measurement.md), the
published figures held (reports.md) and what a GPU window runs next on each GPU model with
a checked-in reference (gpus.md). A failure prints what the page should say."""

from __future__ import annotations

import ast
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _page(name: str) -> str:
    return (DOCS / name).read_text()


def _and(values) -> str:
    """a, b and c"""
    words = [str(v) for v in values]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


# --- exit codes -------------------------------------------------------------------------


def _exit_codes(module: str) -> set[int]:
    """The whole numbers a command's main() returns: its `return N` and `return A if c else
    B`, and those of the module's functions whose result it returns (`return sweep(...)`,
    or `status = sweep(...)` ... `return status`), read from the source."""
    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    codes: set[int] = set()
    seen: set[str] = set()

    def constant(node) -> int | None:
        ok = isinstance(node, ast.Constant) and type(node.value) is int
        return node.value if ok else None

    def read(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        nodes = list(ast.walk(functions[name]))
        returned = [n.value for n in nodes if isinstance(n, ast.Return) and n.value is not None]
        names = {v.id for v in returned if isinstance(v, ast.Name)}
        for node in nodes:  # a returned name's value
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in names for t in node.targets
            ):
                returned.append(node.value)
        for value in returned:
            branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            codes.update(c for c in map(constant, branches) if c is not None)
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                if value.func.id in functions:
                    read(value.func.id)

    read("main")
    return codes


def _command_module(name: str) -> str:
    from xfbench.harness.cli import SUBCOMMANDS

    return SUBCOMMANDS[name][0]


def test_the_exit_codes_table_is_what_the_commands_return():
    page = _page("reliability.md")
    table = page.split("<!-- exit codes: held to the commands' code -->")[1].split("\n\n")[0]
    rows = dict(re.findall(r"^\| (.+?) \| (.+) \|$", table, re.M)[1:])  # its header
    documented = {
        row: {int(c) for c in re.findall(r"`(\d+)`", codes)} for row, codes in rows.items()
    }
    expected = {
        "every `xfbench` command": _exit_codes("xfbench.harness.cli") - {0},  # 0: --help
        **{
            f"`xfbench {c}`": _exit_codes(_command_module(c))
            for c in ("run", "report", "score", "compare")
        },
        "`xfbench data check`": _exit_codes(_command_module("data")),
    }
    assert documented == expected


def test_running_md_gives_xfbench_runs_exit_codes():
    codes = sorted(_exit_codes(_command_module("run")))
    said = re.search(r"The exit\nstatus is (.+?)\(\[reliability", _page("running.md"), re.S)
    assert said and [int(c) for c in re.findall(r"\b(\d+) (?:when|for)\b", said[1])] == codes


# --- precisions -------------------------------------------------------------------------

NUMBERS = {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


def test_adding_a_framework_names_every_precision_an_adapter_runs_by_default():
    from xfbench.adapters.base import PRECISIONS

    said = f"default all {NUMBERS[len(PRECISIONS)]} of `PRECISIONS`: "
    said += _and(f"`{p}`" for p in PRECISIONS)
    assert said in " ".join(_page("adding-a-framework.md").split()), said


# --- the generation suite's defaults ----------------------------------------------------


def test_generation_md_gives_the_suites_default_lengths_and_batches():
    from xfbench.generation.cell import ACCELERATOR_BATCHES, BATCHES, LENGTHS

    assert ACCELERATOR_BATCHES["smoke"] == BATCHES["smoke"]  # "on any device"
    full = ", ".join(f"{i}/{o}" for i, o in LENGTHS["full"])
    smoke = ", ".join(f"{i}/{o}" for i, o in LENGTHS["smoke"])
    said = (
        f"ISL/OSL {full} at batch {_and(BATCHES['full'])} on the CPU, at batch "
        f"{_and(ACCELERATOR_BATCHES['full'])} on an accelerator"
    )
    page = " ".join(_page("generation.md").split())
    assert said in page, said
    smoke_said = f"at {smoke}, batch {_and(BATCHES['smoke'])} on any device"
    assert smoke_said in page, smoke_said


def test_the_lengths_option_gives_token_servings_default_pairs():
    """generation's --lengths declares token-serving's defaults too (the option is
    generation's; its layer may not import token-serving's)."""
    from xfbench import options
    from xfbench.plugin import declared
    from xfbench.token_serving.cell import FULL_LENGTHS, LENGTHS

    declared()
    pair = "/".join(map(str, FULL_LENGTHS))
    presets = ", ".join(
        f"{p} {i}/{o} (on an accelerator {pair})" for p, (i, o) in LENGTHS.items() if p != "smoke"
    )
    said = f"token-serving, one pair: {presets}, smoke {'/'.join(map(str, LENGTHS['smoke']))}, "
    said += f"the others {pair}"
    assert said in options.by_name()["lengths"].default, said


# --- the CPU's peak probe ---------------------------------------------------------------


def test_measurement_md_gives_the_cpu_peaks_sizes_and_budget():
    from xfbench.roofline import roofs

    said = (
        f"its square doubled from 256 until one product takes {roofs.CALL_S} s or the square "
        f"is {roofs.PEAK_N}, then the best of up to {roofs.PEAK_REPEATS} more within "
        f"{roofs.PEAK_BUDGET_S:g} s"
    )
    assert said in " ".join(_page("measurement.md").split()), said


# --- the published figures held ---------------------------------------------------------


def published_by_kind() -> str:
    """Each kind of anchor in published.toml: the GPU models it is held for, each with its
    precisions."""
    data = tomllib.loads((ROOT / "xfbench" / "published.toml").read_text())
    names = {g["id"]: g["name"] for g in data["gpu"]}
    kinds: dict[str, dict[str, list[str]]] = {}
    for a in data["anchor"]:
        held = kinds.setdefault(a["kind"], {}).setdefault(names[a["gpu"]], [])
        if a["precision"] not in held:
            held.append(a["precision"])
    return "; ".join(
        f"{kind} on the "
        + _and(f"{gpu} ({', '.join(precisions)})" for gpu, precisions in gpus.items())
        for kind, gpus in kinds.items()
    )


def test_reports_md_names_the_published_figures_held():
    said = f"(`xfbench/published.toml`, by kind: {published_by_kind()})"
    assert said in " ".join(_page("reports.md").split()), said


# --- what a GPU window runs next --------------------------------------------------------


def next_window_table(tmp_path: Path, monkeypatch) -> str:
    """gpus.md's table: per GPU model with a checked-in reference, and for one without,
    the steps `--part next` plans after the probe, and their caps against the room."""
    from xfbench.acceptance import plan
    from xfbench.acceptance.run import RESERVE_S
    from xfbench.acceptance.steps import BUDGET_S, steps
    from xfbench.report import score

    references = score.references()
    kinds = {p.name: score.device_kind(score.load_reference(p)) for p in references}
    models = list(dict.fromkeys(k for k in kinds.values() if k != "cpu"))
    every = steps("cuda:0", "quick", tmp_path)
    lines = [
        "| GPU model (NVML's name) | its checked-in references | the window runs, after the "
        "probe | caps, of the room |",
        "|---|---|---|---|",
    ]
    for model in [*models, "NVIDIA H100 PCIe"]:
        monkeypatch.setattr(plan, "gpu_name", lambda device, m=model: m)
        probe, *todo = plan.choose(every, "cuda:0", BUDGET_S, references).steps
        room = BUDGET_S - RESERVE_S - probe.cap_s
        held = ", ".join(f"`{n}`" for n, k in kinds.items() if k == model) or "none"
        runs = ", ".join(f"`{s.name}`" for s in todo)
        caps = sum(s.cap_s for s in todo)
        lines.append(f"| `{model}` | {held} | {runs} | {caps} s of {room:g} |")
    return "\n".join(lines)


def test_gpus_md_gives_what_the_next_window_runs_on_each_gpu_model(tmp_path, monkeypatch):
    page = _page("gpus.md")
    marker = "<!-- next window per GPU model: held to xfbench/acceptance/plan.py -->\n"
    table = page.split(marker)[1].split("\n\n")[0].strip()
    expected = next_window_table(tmp_path, monkeypatch)
    assert table == expected, f"docs/gpus.md's table should read:\n{expected}"


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
