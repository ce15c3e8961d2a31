"""xfbench installs as one package and runs outside a checkout.

The wheel is built from this checkout and installed into a fresh virtual environment
that sees this environment's frameworks (a .pth line) but not the checkout; there the
console script runs a smoke sweep and pytest runs a suite by --pyargs. Stand-ins for
other projects' top-level `adapters`, `models` and `report` packages, which fail on
import, sit in that environment too: xfbench must never import them.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OTHERS = ("adapters", "models", "report")  # top-level names of unrelated packages


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # From a copy of what the wheel is made of: setuptools writes build/ beside its source.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "xfbench", source / "xfbench", ignore=shutil.ignore_patterns("__pycache__")
    )
    # No build isolation: the build needs no network, only the setuptools installed here.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [path] = out.glob("xfbench-*.whl")
    return path


def test_the_wheel_holds_one_top_level_name_a_pytest_plugin_and_the_suites(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"xfbench"}
    assert (
        "xfbench/suites/test_train.py" in names
        and "xfbench/report/templates/report.html.j2" in names
    )
    [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[pytest11]" in text and "xfbench.plugin = xfbench.plugin" in text


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, dict]:
    """A fresh environment with the wheel, this one's packages visible, and the stand-ins."""
    home = tmp_path_factory.mktemp("elsewhere")
    env_dir = home / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    for name in OTHERS:
        (purelib / name).mkdir()
        (purelib / name / "__init__.py").write_text(
            f"raise ImportError('the unrelated top-level package {name!r} was imported')\n"
        )
    # After the stand-ins (a .pth line is appended to sys.path): this environment's
    # frameworks, so the test installs nothing from the network.
    (purelib / "outer.pth").write_text(sysconfig.get_path("purelib") + "\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    return home, env


def _run(args, home, env, timeout=300):
    return subprocess.run(args, cwd=home, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_installed_package_is_the_wheel_not_the_checkout(installed):
    home, env = installed
    proc = _run(
        [
            "python",
            "-c",
            "import xfbench.plugin, xfbench.runner.cli, xfbench.report.cli; "
            "print(xfbench.__file__)",
        ],
        home,
        env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    where = Path(proc.stdout.strip())
    assert home in where.parents and ROOT not in where.parents


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_the_console_script_runs_a_smoke_sweep_outside_the_checkout(installed):
    home, env = installed
    results = home / "results-null"
    proc = _run(
        [
            "xfbench",
            "run",
            "--preset",
            "smoke",
            "--framework",
            "null",
            "--model",
            "fcn_r",
            "--threads",
            "1",
            "--results",
            str(results),
            "--quiet",
        ],
        home,
        env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    merged = json.loads((results / "merged.json").read_text())
    assert {b["extra_info"]["framework"] for b in merged["benchmarks"]} == {"null"}
    assert len(merged["benchmarks"]) == 2  # train and infer


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_the_installed_score_finds_the_references_in_the_wheel(installed):
    """`xfbench score` outside any checkout: the reference result sets are package data."""
    from xfbench.report import score

    home, env = installed
    [ref] = [p for p in score.references() if p.name.startswith("2026-11-24-amd-epyc")]
    proc = _run(["xfbench", "score", str(ref / "merged.json")], home, env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (
        proc.stdout.startswith("machine score 1 (95 % CI of its rounds") and ref.name in proc.stdout
    )
    # a reference of several runs: its runs' files are package data too
    [several] = [p for p in score.references() if p.name.startswith("2026-11-26-amd-epyc")]
    proc = _run(["xfbench", "score", str(several / "run-1")], home, env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"against {several.name}" in proc.stdout


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_pytest_pyargs_runs_a_suite_with_the_plugins_options(installed):
    home, env = installed
    out = home / "cell.json"
    proc = _run(
        [
            "python",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--pyargs",
            "xfbench.suites.test_train",
            "--framework",
            "null",
            "--model",
            "fcn_r",
            "--preset",
            "smoke",
            "--threads",
            "1",
            f"--benchmark-json={out}",
        ],
        home,
        env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [entry] = json.loads(out.read_text())["benchmarks"]
    assert entry["extra_info"]["network"] == "fcn_r"


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_another_projects_pytest_is_left_alone(installed):
    """The plugin loads into every pytest of the environment, but pins no threads and
    parses no selection in a session that does not run xfbench's suites."""
    home, env = installed
    project = home / "other"
    project.mkdir()
    (project / "test_other.py").write_text(
        "import os\n\ndef test_affinity():\n"
        "    assert len(os.sched_getaffinity(0)) == int(os.environ['EXPECTED'])\n"
        "    assert 'OMP_NUM_THREADS' not in os.environ\n"
    )
    env = {k: v for k, v in env.items() if k != "OMP_NUM_THREADS"}
    env["EXPECTED"] = str(len(os.sched_getaffinity(0)))
    proc = _run(
        ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_other.py"], project, env
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_another_projects_pytest_here_warns_of_nothing(tmp_path):
    """In this environment (xfbench installed editable, as the README's commands install
    it) another project's session warns of nothing: the plugin imports no plugin module
    before pytest does (that left 7 modules' asserts unrewritten, with a warning each), and
    takes a name in PYTEST_PLUGINS that is pytest's own (pytester) as pytest's."""
    (tmp_path / "test_other.py").write_text("def test_one():\n    assert True\n")
    env = {**os.environ, "PYTEST_PLUGINS": "pytester"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_other.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "warning" not in (proc.stdout + proc.stderr).lower(), proc.stdout[-3000:]


# -- the GPU extras ---------------------------------------------------------------------------
GPU_DOC = ROOT / "docs" / "gpus.md"
# GPU packages whose CUDA major their name does not say, from their wheels: TensorFlow
# 2.21's and-cuda extra requires nvidia-*-cu12 libraries; PyPI's onnxruntime-gpu 1.31.1
# links libcublas.so.13 and its cuda extra requires nvidia-cuda-runtime~=13.0.
CUDA_OF = {"tensorflow": 12, "onnxruntime-gpu": 13}


def extras() -> dict[str, list[str]]:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def gpu_install_lines() -> list[list[str]]:
    lines = re.findall(r"pip install -e '\.\[([^\]]+)\]'", GPU_DOC.read_text())
    assert lines, "docs/gpus.md shows no GPU install line"
    return [line.split(",") for line in lines]


def cuda_major(requirement: str) -> int | None:
    from packaging.requirements import Requirement

    req = Requirement(requirement)
    named = re.findall(r"cuda(\d\d)", " ".join([req.name, *req.extras]))
    if named:
        return int(named[0])
    if req.name in CUDA_OF and (req.name != "tensorflow" or "and-cuda" in req.extras):
        return CUDA_OF[req.name]
    return None


def test_each_cuda_extra_holds_packages_of_one_cuda_major():
    for major in (12, 13):
        found = {r: cuda_major(r) for r in extras()[f"cuda{major}"]}
        assert {m for m in found.values() if m is not None} == {major}, found
    tf = importlib.metadata.distributions(name="tensorflow-cpu")
    for dist in tf:  # this machine's TensorFlow says what its and-cuda extra pulls
        cuda = [r for r in dist.requires or [] if 'extra == "and-cuda"' in r]
        assert cuda and all("-cu12" in r for r in cuda), cuda


def test_no_gpu_install_puts_onnxruntime_beside_onnxruntime_gpu():
    """Both install the module onnxruntime; whichever installs last wins. Requirements of
    the packages installed here are followed one level (jax2onnx requires onnxruntime)."""
    from packaging.requirements import Requirement

    table = extras()
    for line in gpu_install_lines():
        names = set()
        for extra in line:
            for requirement in table[extra]:
                name = Requirement(requirement).name
                names.add(name)
                try:
                    needs = importlib.metadata.requires(name) or []
                except importlib.metadata.PackageNotFoundError:
                    needs = []
                names |= {Requirement(r).name for r in needs if "extra ==" not in r}
        both = {"onnxruntime", "onnxruntime-gpu"} <= names
        assert not both, f"'.[{','.join(line)}]' installs onnxruntime and onnxruntime-gpu"
        majors = {cuda_major(r) for extra in line for r in table[extra]} - {None}
        assert len(majors) == 1, f"'.[{','.join(line)}]' mixes CUDA majors {majors}"


def test_ci_rehearses_the_gpu_window_under_the_gpu_machines_versions():
    """The GPU machines run pytest-benchmark 5.2.3, whose --benchmark-json differs from
    5.3's (the first window's GEMM step died of it): CI builds an environment of
    gpu/image.txt, every package pinned to the image's version (JAX and numpy, which need
    Python 3.12 there, to the newest here, by marker), and runs the window's rehearsal in it."""
    from packaging.requirements import Requirement

    lines = [
        line.split("#")[0].strip()
        for line in (ROOT / "gpu" / "image.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    pins = {}
    for line in lines:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate():
            assert req.name not in pins, req.name
            pins[req.name] = str(req.specifier)
    assert pins["pytest-benchmark"] == "==5.2.3" and pins["torch"] == "==2.11.0"
    assert pins["pytest"] == "==9.1.1" and pins["onnxruntime"] == "==1.30.0"
    assert "tensorflow" not in " ".join(pins) and "mlcommons-loadgen" not in pins
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -q -r gpu/image.txt" in ci
    assert re.search(
        r"PYTHONPATH=\. \.venv-gpu-image/bin/python -m pytest[^\n]*\\\n\s+tests/test_gpu_window\.py",
        ci,
    )
