"""Frameworks are declared once, in xfbench/frameworks.py: a framework registered there
(and nowhere else) is selectable, planned by the runner and shown by the report; and no
other module spells out a list of frameworks."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

from xfbench import frameworks
from xfbench.frameworks import FRAMEWORKS, Framework

ROOT = Path(__file__).resolve().parents[1]

THROWAWAY_ADAPTER = """
from xfbench.adapters.null import NullAdapter


class ThrowawayAdapter(NullAdapter):
    name = "throwaway"


ADAPTER = ThrowawayAdapter()
"""


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """A framework that behaves like null, registered in the one table."""
    (tmp_path / "throwaway_adapter.py").write_text(textwrap.dedent(THROWAWAY_ADAPTER))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(
        FRAMEWORKS,
        "throwaway",
        Framework(
            name="throwaway",
            display="Throwaway Framework",
            package="numpy",
            install_hint="nothing to install",
            adapter="throwaway_adapter",
            modes=("none",),
        ),
    )
    return "throwaway"


def test_a_registered_framework_is_selectable(throwaway):
    from xfbench.harness.selection import cells, parse

    sel = parse(framework=throwaway, model="fcn_r", preset="smoke", threads="1", device="cpu")
    train = cells(sel, "train")
    assert [c.framework for c in train] == [throwaway] and train[0].mode == "none"
    # a run that names no framework includes it: it is installed and in the default set
    assert throwaway in parse(model="fcn_r", preset="smoke", threads="1").frameworks


def test_the_runner_plans_its_groups(throwaway):
    from xfbench.plugin import declared
    from xfbench.runner.plan import make_plan

    plan = make_plan(
        declared()["single"],
        dict(framework=throwaway, model="fcn_r", preset="smoke", threads="1", device="cpu"),
    )
    assert [job.group.framework for job in plan.jobs] == [throwaway]
    assert {c.task for c in plan.cells} == {"train", "infer"}


def test_the_report_shows_its_display_name(throwaway, tmp_path):
    from xfbench.report import render

    doc = json.loads((ROOT / "tests" / "data" / "torch_smoke_t1.json").read_text())
    for entry in doc["benchmarks"]:
        entry["extra_info"]["framework"] = throwaway
        entry["extra_info"]["mode"] = "none"
    path = tmp_path / "throwaway.json"
    path.write_text(json.dumps(doc))
    render([path], tmp_path / "out", ["md"])
    assert "Throwaway Framework none" in (tmp_path / "out" / "report.md").read_text()


def test_every_framework_entry_names_real_modules():
    import importlib.util

    from xfbench import allreduce
    from xfbench.gemm import IMPLS, OWN_IMPL
    from xfbench.generation.cell import BF16_TOO, MODES
    from xfbench.scaling.cell import WORKERS

    for f in FRAMEWORKS.values():
        assert importlib.util.find_spec(f.adapter) is not None, f.adapter
        assert f.table7_mode is None or f.table7_mode in f.modes
    # the suites' own tables of frameworks: real frameworks, real modules
    for table in (OWN_IMPL, WORKERS, allreduce.WORKERS, MODES, BF16_TOO):
        assert set(table) <= set(FRAMEWORKS), table
    for module in (*WORKERS.values(), *allreduce.WORKERS.values()):
        assert importlib.util.find_spec(module) is not None, module
    assert set(OWN_IMPL.values()) <= set(IMPLS)


# Where a list of framework names is not a list of frameworks: the distributions whose
# versions a machine record names (keras, jaxlib and tensorflow-cpu among them).
NOT_FRAMEWORK_LISTS = {("xfbench/machine.py", "PACKAGES")}
FRAMEWORK_NAMES = {"torch", "tensorflow", "jax", "onnxruntime"}


def test_no_other_module_spells_out_the_frameworks():
    found = []
    for path in sorted((ROOT / "xfbench").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel == "xfbench/frameworks.py":
            continue
        tree = ast.parse(path.read_text())
        targets = {
            id(node.value): [t.id for t in node.targets if isinstance(t, ast.Name)]
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
        }
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                continue
            named = {e.value for e in node.elts if isinstance(e, ast.Constant)} & FRAMEWORK_NAMES
            names = targets.get(id(node), [])
            if len(named) >= 2 and not any((rel, n) in NOT_FRAMEWORK_LISTS for n in names):
                found.append(f"{rel}:{node.lineno} {sorted(named)}")
    assert not found, "framework lists outside xfbench/frameworks.py:\n" + "\n".join(found)


def test_names_filters_the_table():
    assert "null" not in frameworks.names(default=True)
    assert frameworks.training() == ("torch", "jax", "tensorflow")


class FakeNVML:
    """NVML with three GPUs, by index and by UUID."""

    uuids = ["GPU-aaa", "GPU-bbb", "GPU-ccc"]

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < 3:
            raise ValueError("NotFound")
        return ("gpu", i)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return ("gpu", self.uuids.index(uuid))


@pytest.mark.parametrize(
    "visible, device, handle",
    [
        (None, "cuda:2", ("gpu", 2)),  # every GPU visible: CUDA's index is NVML's
        ("2,0", "cuda:0", ("gpu", 2)),  # the first visible GPU is NVML's 2
        ("2,0", "cuda:1", ("gpu", 0)),
        ("GPU-ccc,GPU-aaa", "cuda:0", ("gpu", 2)),  # by UUID
        ("2", "cuda:1", None),  # only one visible
        ("", "cuda:0", None),  # none visible
    ],
)
def test_nvml_reads_the_gpu_cuda_means_under_cuda_visible_devices(visible, device, handle):
    from xfbench.machine import nvml_handle

    assert nvml_handle(device, FakeNVML(), visible) == handle


@pytest.mark.parametrize(
    "visible, count",
    [(None, 3), ("2,0", 2), ("GPU-ccc", 1), ("", 0), ("0,7,1", 1), ("GPU-zzz", 0)],
)
def test_default_gpus_are_the_ones_cuda_shows(visible, count):
    """Default devices count what CUDA will number, not every GPU NVML sees: with
    CUDA_VISIBLE_DEVICES=0 on a three-GPU machine, cuda:1 and cuda:2 do not exist."""
    from xfbench.machine import gpu_count

    class ThreeGPUs(FakeNVML):
        def nvmlDeviceGetCount(self):
            return 3

        def nvmlDeviceGetHandleByUUID(self, uuid):
            if uuid not in self.uuids:
                raise ValueError("NotFound")
            return super().nvmlDeviceGetHandleByUUID(uuid)

    assert gpu_count(ThreeGPUs(), visible) == count
