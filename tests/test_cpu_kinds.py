"""Other CPUs played here: every place that picks a half type's path by the CPU's ISA is
handed another CPU's flags (as cpuinfo reports them) and must skip with the reason or run.
PyTorch picks its bf16 and fp16 kernels from the CPU's own flags, which no environment
switch limits (ONEDNN_MAX_CPU_ISA and ATEN_CPU_CAPABILITY did not): on an AVX2-only Zen 3
its bf16 matmul ran 1.2 GFLOP/s, and the roofs step waited out two 300 s time-outs.
ARM's flags are read by PyTorch's and oneDNN's rules (machine.HALF_ARITHMETIC), and a CPU
whose flags cannot be read is measured, never skipped as if it lacked them.
The roofs themselves: tests/test_roofline.py (OTHER_CPUS)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xfbench import machine
from xfbench.adapters import get_adapter
from xfbench.adapters.base import Cell
from xfbench.errors import CannotRun
from xfbench.gemm import shapes
from xfbench.gemm.measure import cpu_half_reason

ROOT = Path(__file__).resolve().parents[1]
FLAGS = {
    "zen3": ["avx", "avx2", "fma", "f16c"],
    "skylake-x": ["avx2", "avx512f", "avx512bw", "avx512vl"],
    "zen4": ["avx2", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"],
    "sapphire-rapids": ["avx512f", "avx512bw", "avx512vl", "avx512_fp16", "amx_bf16"],
    # /proc/cpuinfo's Features of an AWS Graviton 3 (Neoverse V1), as py-cpuinfo lists them
    "graviton3": "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
    "asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat "
    "ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng".split(),
    # and of a Graviton 2 (Neoverse N1): half-precision arithmetic, no BF16
    "graviton2": "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
    "asimdrdm lrcpc dcpop asimddp ssbs".split(),
}
ARCH = {"graviton3": "aarch64", "graviton2": "aarch64"}  # the others: x86_64


@pytest.fixture
def cpu_of(monkeypatch):
    def play(kind: str) -> None:
        arch = ARCH.get(kind, "x86_64")
        monkeypatch.setattr(machine, "cpu", lambda: {"isa": machine.isa(FLAGS[kind]), "arch": arch})

    return play


@pytest.mark.parametrize(
    "kind, bf16, fp16",
    [("zen3", False, False), ("skylake-x", True, False), ("zen4", True, False),
     ("sapphire-rapids", True, True), ("graviton3", True, True), ("graviton2", False, True)],
)  # fmt: skip
def test_which_cpus_compute_the_half_types(kind, bf16, fp16):
    arch = ARCH.get(kind, "x86_64")
    assert (machine.half_arithmetic("bf16", FLAGS[kind], arch) is None) == bf16
    assert (machine.half_arithmetic("fp16", FLAGS[kind], arch) is None) == fp16


def test_a_graviton_is_read_by_arms_flags(cpu_of):
    """A Graviton 3's bf16 (FEAT_BF16) and fp16 (fphp and asimdhp) are read, so its
    full-size half-type cells run; a Graviton 2 lacks bf16, and the reason names ARM's
    flag, not x86's."""
    assert {"bf16", "fphp", "asimdhp", "sve"} <= set(machine.isa(FLAGS["graviton3"]))
    cpu_of("graviton3")
    assert machine.half_arithmetic("bf16") is None and machine.half_arithmetic("fp16") is None
    cpu_of("graviton2")
    why = machine.half_arithmetic("bf16")
    assert why == "no bf16 arithmetic in this CPU's ISA (needs bf16)", why
    pytest.importorskip("torch")
    torch = get_adapter("torch")
    cpu_of("graviton3")
    assert torch.check(_cell("bf16")) is None and torch.check(_cell("fp16")) is None
    cpu_of("graviton2")
    assert "needs bf16)" in torch.check(_cell("bf16"))


@pytest.mark.parametrize("cpuinfo", [{}, {"flags": []}], ids=["py-cpuinfo failed", "no flags"])
def test_a_cpu_whose_flags_cannot_be_read_is_measured_and_says_so(monkeypatch, cpuinfo):
    """No flags read is not "no extensions": an AMX machine or a Graviton whose flags
    py-cpuinfo missed is measured in bf16 and fp16, not skipped, and the machine record
    (and each cell's cpu_isa, which is its "isa") says the flags were unknown."""
    monkeypatch.setattr(machine, "_cpuinfo", lambda: cpuinfo)
    assert machine.cpu()["isa"] == [machine.UNKNOWN] == machine.describe()["cpu"]["isa"]
    assert machine.half_arithmetic("bf16") is None and machine.half_arithmetic("fp16") is None
    pytest.importorskip("torch")
    assert get_adapter("torch").check(_cell("bf16")) is None
    from xfbench.roofline import roofs

    asked = []
    monkeypatch.setattr(roofs, "cpu_torch_peak", lambda p, stop=None: asked.append(p) or 1.0)
    out = roofs.cpu_half_peaks(1)
    assert asked == ["bf16", "fp16"] and out["bf16_peak_tflops"] == out["fp16_peak_tflops"] == 1.0
    assert "flags could not be read" in out["half_peaks_note"]


def _cell(precision: str, scale: str = "full", **kw) -> Cell:
    return Cell(network="resnet50", framework="torch", mode="eager", precision=precision,
                device="cpu", threads=1, batch_size=16, task="train", scale=scale, **kw)  # fmt: skip


def test_a_full_size_half_type_cell_skips_on_a_cpu_without_its_arithmetic(cpu_of):
    """Every framework's network cells ask adapters/base.py's check: on a Zen 3 a full-size
    bf16 cell is skipped with the reason, a smoke one runs (it checks the code); on a Zen 4
    bf16 runs and fp16 does not."""
    pytest.importorskip("torch")
    torch = get_adapter("torch")
    cpu_of("zen3")
    reason = torch.check(_cell("bf16"))
    assert reason and "no bf16 arithmetic in this CPU's ISA" in reason
    assert torch.check(_cell("bf16", scale="smoke")) is None
    assert torch.check(_cell("fp32")) is None
    cpu_of("zen4")
    assert torch.check(_cell("bf16")) is None
    assert "no fp16 arithmetic" in torch.check(_cell("fp16"))


def test_bf16_decoding_on_the_cpu_skips_without_bf16_arithmetic(cpu_of):
    pytest.importorskip("torch")
    from xfbench.generation.cell import GenerationCell
    from xfbench.generation.measure import runnable

    cpu_of("zen3")
    cell = GenerationCell(network="gpt2", framework="torch", mode="eager", precision="bf16",
                          device="cpu", threads=1, batch_size=1, scale="full")  # fmt: skip
    with pytest.raises(CannotRun, match="no bf16 arithmetic"):
        runnable(cell)
    cpu_of("zen4")
    assert runnable(cell) is not None


def test_the_gemm_suites_half_types_skip_large_products_without_their_arithmetic(cpu_of):
    """Up to a 512^3 square they run on any CPU (the path is proven); beyond, only where
    the CPU has the arithmetic: the smoke preset's batch-16 layer shapes took 18-25 s a cell
    in PyTorch's bf16 fallback on a Zen 3."""
    layer = shapes.Shape(16, 11008, 4096, "b16-4096x11008").flops
    small = shapes.square(512).flops
    cpu_of("zen3")
    assert "no bf16 arithmetic" in cpu_half_reason("bf16", "cpu", layer)
    assert cpu_half_reason("bf16", "cpu", small) is None
    assert cpu_half_reason("bf16", "cuda:0", layer) is None
    cpu_of("skylake-x")
    assert cpu_half_reason("bf16", "cpu", layer) is None
    assert "no fp16 arithmetic" in cpu_half_reason("fp16", "cpu", layer)


# Each file that names a half type's dtype, and the check that keeps it off a CPU without
# that arithmetic (a GPU path, or one of the checks above). A new file computing in bf16 or
# fp16 fails test_every_half_type_path_is_behind_a_check until it is listed here.
CHECKED = {
    "xfbench/adapters/base.py": "the dtype table; cpu_half_reason gates every network cell",
    "xfbench/adapters/jax/generation.py": "adapters' check (generation.measure.runnable)",
    "xfbench/adapters/jax/workload.py": "adapters' check",
    "xfbench/adapters/tensorflow/lstm.py": "adapters' check",
    "xfbench/adapters/tensorflow/workload.py": "adapters' check",
    "xfbench/adapters/torch/generation.py": "adapters' check (generation.measure.runnable)",
    "xfbench/adapters/torch/precision.py": "adapters' check",
    "xfbench/adapters/torch/workload.py": "adapters' check",
    "xfbench/gemm/check.py": "the check's rounding, in NumPy: no product",
    "xfbench/gemm/impls/cupy_matmul.py": "GPU only",
    "xfbench/gemm/impls/jax_matmul.py": "gemm.measure.cpu_half_reason",
    "xfbench/gemm/impls/numpy_matmul.py": "refuses the half types itself",
    "xfbench/gemm/impls/ort_matmul.py": "gemm.measure.cpu_half_reason",
    "xfbench/gemm/impls/tf_matmul.py": "gemm.measure.cpu_half_reason",
    "xfbench/gemm/impls/torch_matmul.py": "gemm.measure.cpu_half_reason",
    "xfbench/generation/check.py": "the check's rounding, in NumPy: no product",
    "xfbench/generation/fields.py": "a field's description",
    "xfbench/roofline/roofs.py": "machine.half_arithmetic (cpu_half_peaks); the GPU's roofs",
}


def test_every_half_type_path_is_behind_a_check():
    found = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "xfbench").rglob("*.py")
        if re.search(r"\b(bfloat16|float16)\b", p.read_text())
        and not str(p.relative_to(ROOT)).startswith("xfbench/report/")
    )
    new = [f for f in found if f not in CHECKED]
    assert not new, (
        f"{new} compute in a half type: keep it off a CPU without that arithmetic "
        "(machine.half_arithmetic) and list it in CHECKED with the check that does"
    )


def test_the_int8_record_names_each_cpus_dot_product_instructions():
    """What int8_cpu_isa says, x86 and ARM alike, and "unknown" where flags were unread."""
    from xfbench.adapters import int8

    assert int8.isa(FLAGS["graviton3"]) == "I8MM (SMMLA)"
    assert int8.isa(FLAGS["graviton2"]) == "dot product (SDOT)"
    assert int8.isa(FLAGS["zen3"]) == "no VNNI, AMX or SDOT"
    assert int8.isa(["avx2", "avx512f", "avx512_vnni"]) == "AVX-512 VNNI"  # a Zen 4
    assert int8.isa(["unknown"]).startswith("unknown")
