"""Where onnxruntime is installed without onnx (a GPU image): ONNX Runtime cells run the
canonical files written elsewhere, and say what to do when one is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")  # to write the file the onnx-less process then runs

ROOT = Path(__file__).resolve().parents[1]

# onnx blocked: `import onnx` raises ImportError in this process, as where it is absent.
RUN = """
import sys
sys.modules["onnx"] = None
from xfbench.errors import CannotRun
from xfbench.adapters import Cell, get_adapter
from xfbench.models import get_spec, initial_weights
spec = get_spec("fcn_r", "smoke")
cell = Cell(network="fcn_r", framework="onnxruntime", mode="cpu", precision="fp32", device="cpu", threads=1, batch_size=8, task="infer", data="resident", scale="smoke")
adapter = get_adapter("onnxruntime")
assert adapter.versions()["onnx"] is None
try:
    work = adapter.build(spec, cell, initial_weights(spec))
except CannotRun as e:
    print("UNSUPPORTED", e)
else:
    work.prepare(); work.step()
    print("RAN", work.output().shape)
"""


def _run(cache: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", RUN],
        cwd=ROOT,
        env={**__import__("os").environ, "XFBENCH_CACHE": str(cache)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_missing_file_is_a_skip_saying_how_to_make_it(tmp_path):
    out = _run(tmp_path)
    assert out.startswith("UNSUPPORTED onnx is not installed") and "exchange write fcn_r" in out


def test_the_canonical_file_runs_with_onnxruntime_alone(tmp_path, monkeypatch):
    from xfbench.exchange import canonical_file
    from xfbench.models import get_spec

    monkeypatch.setenv("XFBENCH_CACHE", str(tmp_path))
    canonical_file(get_spec("fcn_r", "smoke"))  # written here, where onnx is
    assert _run(tmp_path).startswith("RAN (8, 10)")
