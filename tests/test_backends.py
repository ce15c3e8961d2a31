"""What each framework reports it runs on the CPU agrees with the CPU and with the limits
set on it. .ci/run runs these tests twice: as they come, and with the ISA limited
(ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY, XLA_FLAGS=--xla_cpu_max_isa,
TF_ENABLE_ONEDNN_OPTS=0), so a limit that did not take hold fails here."""

from __future__ import annotations

import os
import re

import pytest

from xfbench import machine

# ATen's capabilities on x86, lowest first, and the CPU extension each needs.
ATEN_LEVELS = {"DEFAULT": None, "AVX2": "avx2", "AVX512": "avx512f"}
# The lowest LLVM feature above each --xla_cpu_max_isa level, which XLA must then leave off.
XLA_ABOVE = {"SSE4_2": "avx", "AVX": "avx2", "AVX2": "avx512f"}


def test_the_machine_names_its_cpu_and_isa():
    cpu = machine.cpu()
    assert cpu["model"] and cpu["vendor"]
    assert cpu["isa"] == machine.isa(cpu["isa"])  # known names, in order
    if cpu["arch"] in ("x86_64", "AMD64"):
        assert "sse4_2" in cpu["isa"]  # every x86-64 CPU these frameworks support has it


def test_aten_runs_no_higher_than_the_cpu_or_the_limit():
    torch = pytest.importorskip("torch")
    from xfbench.adapters.torch.workload import backend

    capability = torch.backends.cpu.get_cpu_capability()
    info = backend("cpu")
    assert info["aten_cpu_capability"] == capability
    if capability not in ATEN_LEVELS:
        pytest.skip(f"ATen capability {capability} (not an x86 level)")
    needs = ATEN_LEVELS[capability]
    assert needs is None or needs in machine.cpu()["isa"], (capability, machine.cpu()["isa"])
    limit = os.environ.get("ATEN_CPU_CAPABILITY", "").upper()
    if limit in ATEN_LEVELS:
        order = list(ATEN_LEVELS)
        assert order.index(capability) <= order.index(limit), (capability, limit)


def test_pytorch_names_the_gemm_library_and_its_code_path():
    """oneMKL's banner, read from its verbose output, names the path it dispatched for: on
    any x86 CPU some text after the version, never an unparsed banner."""
    torch = pytest.importorskip("torch")
    from xfbench.adapters.torch.workload import backend, blas

    text = blas()
    if torch.backends.mkl.is_available():
        assert text.startswith("oneMKL ") and ", " in text, text
    assert "GEMM " + text in backend("cpu")["backend"]


def test_xla_compiles_for_no_more_than_the_cpu_or_the_limit():
    pytest.importorskip("jax")
    from xfbench.adapters.jax.workload import xla_cpu_target

    target = xla_cpu_target()
    assert target["cpu"] != "unknown", target
    cpu = set(machine.cpu()["isa"])
    llvm_to_cpu = {"sse4.2": "sse4_2", "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16"}
    for feature in target["isa"]:
        name = llvm_to_cpu.get(feature, feature.replace("-", "_"))
        if name in machine.ISA_FLAGS:
            assert name in cpu, (feature, cpu)
    limit = re.search(r"--xla_cpu_max_isa=(\w+)", os.environ.get("XLA_FLAGS", ""))
    if limit and limit.group(1).upper() in XLA_ABOVE:
        assert XLA_ABOVE[limit.group(1).upper()] not in target["isa"], (limit.group(1), target)


def test_tensorflow_reports_the_onednn_switch():
    pytest.importorskip("tensorflow")
    from xfbench.adapters.tensorflow.workload import backend, onednn_in_use

    asked_off = os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0"
    assert onednn_in_use() is (not asked_off)
    assert backend("cpu", "function").startswith("Eigen" if asked_off else "oneDNN")
