"""Before any test module imports TensorFlow (pytest.importorskip does, at collection):
TensorFlow reads its oneDNN switch once, when it starts, and the tests must see the
runtime the suite's cells run (xfbench.adapters.tensorflow sets it)."""

import os

import pytest

import xfbench.adapters.tensorflow  # noqa: F401


def pytest_configure(config):
    """Under pytest-xdist (.ci/run's `-n 2`), a worker's environment names it
    (PYTEST_XDIST_WORKER...). The tests start pytest and xfbench in child processes, which
    are sessions of their own: inheriting those names, pytest-benchmark in a child would
    switch itself off as if it were an xdist worker, and every cell would fail."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        os.environ.pop(name, None)


def pytest_collection_modifyitems(config, items):
    """Tests marked gpu need an NVIDIA GPU: without one they are skipped with the reason
    (each also skips where its framework is a CPU build)."""
    from xfbench import machine

    if machine.gpu_count():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU; NVML sees none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
