"""The suite's own tests hold on a machine with an NVIDIA GPU.

There NVML reports the GPU and default devices gain cuda:0, so a test that meant the CPU
cells and left --device to its default would see cells it did not expect. tests/fake_gpu
holds an NVML that reports one GPU no framework here can use; these tests run a fast part
of the suite under it (.ci/run runs the files that once failed there, whole).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "fake_gpu"


def under_fake_gpu(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(FAKE), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_fake_nvml_gives_default_devices_a_gpu():
    code = "from xfbench.harness.selection import parse; print(parse(preset='smoke').devices)"
    proc = under_fake_gpu("-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "'cuda:0'" in proc.stdout


@pytest.mark.slow
def test_the_tests_hold_where_nvml_sees_a_gpu():
    proc = under_fake_gpu(
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "",  # the two sweeps below are slow tests
        "tests/test_frameworks.py",
        "tests/test_runner_suites.py::test_bad_suite_options_are_one_line_before_anything_runs",
        "tests/test_runner.py::test_failures_are_recorded_the_sweep_goes_on_and_resumes",
        "tests/test_runner.py::test_a_sweep_resumes_the_newest_unfinished_folder_of_its_selection",
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_the_equivalence_suite_checks_each_device_and_records_tf32_apart():
    """Where a GPU is present the equivalence suite checks it too (here none of the
    frameworks can use the fake one, so those checks skip with the framework's reason and
    never run on the CPU instead); TF32, asked for, is a check of its own, skipped on the
    CPU."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip(
            "a real GPU is here: the equivalence suite checks it (tests/test_gpu.py's machine)"
        )
    proc = under_fake_gpu(
        "-m", "pytest", "xfbench/suites/test_equivalence.py", "-q", "-rs", "-p", "no:cacheprovider",
        "--preset", "smoke", "--framework", "torch", "--model", "fcn5", "--precision", "fp32,tf32",
        "-k", "inference or training",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "2 passed" in out  # infer and train, fp32 on the CPU
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert any("cuda" in line.lower() for line in skips), out[-3000:]
    assert any("tf32" in line.lower() for line in skips), out[-3000:]
    assert "6 skipped" in out  # cuda:0 fp32 and tf32, cpu tf32; infer and train each


ENERGY_TESTS = """
import pathlib, threading, time
import pynvml
from xfbench.harness.energy import EnergyMeter

pynvml.nvmlDeviceGetPowerUsage = lambda handle: 300_000  # mW: this GPU reads its power

def test_a_cell_samples_the_gpus_power():
    with EnergyMeter("cuda:0") as meter:  # no energy counter: its sampling thread runs
        time.sleep(0.3)
    assert meter.method == "nvml-power-sampling" and len(meter._samples) > 2
    if {hold}:  # a stand-in for whatever held the H100's GPU-test step past its cap
        threading.Thread(target=time.sleep, args=(600,), name="stand-in holder").start()
    pathlib.Path({done!r}).write_text(repr(time.time()))
"""


@pytest.mark.parametrize("hold", [False, True])
@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_pytest_run_whose_cells_sampled_energy_exits_within_seconds(tmp_path, hold):
    """On an H100 the GPU tests' step wrote its results and ran past its cap. A session of
    xfbench's exits within seconds of its last test: at once when nothing holds it, else
    EXIT_GRACE_S later, naming the holder, with the session's own status."""
    import time

    from xfbench.harness.processes import EXIT_GRACE_S

    done = tmp_path / "last-test-ended"
    test = tmp_path / "test_energy_exit.py"
    test.write_text(ENERGY_TESTS.format(hold=hold, done=str(done)))
    proc = under_fake_gpu(
        "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={ROOT}", str(test),
        timeout=120,
    )  # fmt: skip
    exited = time.time()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    after = exited - float(done.read_text())
    if hold:
        assert EXIT_GRACE_S <= after < EXIT_GRACE_S + 5, after
        assert "held by thread 'stand-in holder'" in proc.stderr
    else:
        assert after < 3, after
        assert "held by" not in proc.stderr
