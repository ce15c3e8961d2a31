"""What the machine is: CPU, memory, GPUs, OS and library versions.

Nothing here imports a deep learning framework: versions come from package
metadata and GPUs from NVML, so describing the machine never starts a runtime.
"""

from __future__ import annotations

import functools
import glob
import importlib.metadata
import os
import platform
import sys

import psutil

from xfbench import topology

# Distributions whose versions every run records (whichever are installed).
PACKAGES = (
    "numpy",
    "torch",
    "tensorflow",
    "tensorflow-cpu",
    "keras",
    "jax",
    "jaxlib",
    "jax-cuda12-plugin",
    "onnx",
    "onnxruntime",
    "onnxruntime-gpu",
    "cupy-cuda12x",
    "cupy-cuda13x",
    "pytest",
    "pytest-benchmark",
)


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _nvml():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # no NVIDIA driver, or nvidia-ml-py missing: no GPUs to describe
        return None


def tpu_chip_count() -> int:
    """TPU chips attached to this machine (a TPU VM), as the kernel lists them: /dev/accel0,
    /dev/accel1, ... No TPU runtime is started."""
    return len(glob.glob("/dev/accel[0-9]*"))


def gpus() -> list[dict]:
    nvml = _nvml()
    if not nvml:
        return []
    driver = nvml.nvmlSystemGetDriverVersion()
    cuda = nvml.nvmlSystemGetCudaDriverVersion()
    out = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        out.append(
            {
                "index": i,
                "name": nvml.nvmlDeviceGetName(h),
                "memory_bytes": nvml.nvmlDeviceGetMemoryInfo(h).total,
                "driver": driver,
                "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
            }
        )
    return out


# The instruction-set extensions that decide which kernels oneDNN, XLA, ATen and MLAS
# pick, under the names the CPU reports (Linux's /proc/cpuinfo spelling, its "flags" on
# x86 and "Features" on aarch64; cpuinfo reads the same bits elsewhere). Listed in this
# order when present.
ISA_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
    "asimd",
    "fphp",
    "asimdhp",
    "asimddp",
    "i8mm",
    "bf16",
    "sve",
    "sve2",
)
# What a record's ISA list holds where the CPU's flags could not be read (py-cpuinfo
# failed, or found none): nothing is gated on them then, and the record says so.
UNKNOWN = "unknown"
# cpuinfo's CPUID reader spells a few without the underscore.
_FLAG_ALIASES = {"avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16", "avxvnni": "avx_vnni"}


# Where a CPU computes each half type at speed, by its architecture and ISA flags (any one
# group suffices), by PyTorch's and oneDNN's own rules.
# x86: bf16 natively (AVX-512 BF16, AMX-BF16), or in oneDNN's AVX-512 kernels, which widen
# it to fp32 in registers (PyTorch's mkldnn_bf16_device_check asks for AVX-512 BW and VL).
# On an AVX2-only CPU PyTorch's bf16 matmul ran 1.1-1.3 GFLOP/s against fp32's 32 (a Zen 3
# EPYC, 2 threads). fp16: AVX-512 FP16 or AMX-FP16; elsewhere PyTorch computes it in a
# scalar loop, hundreds of times slower.
# aarch64: bf16 is FEAT_BF16, Linux's `bf16` (Graviton 3 and 4, Neoverse V1 and V2; not
# Graviton 2's N1): PyTorch's mkldnn_bf16_device_check_arm asks cpuinfo_has_arm_bf16, which
# reads that bit, and oneDNN's ACL kernels take bf16 only there. fp16 is FEAT_FP16, scalar
# `fphp` and vector `asimdhp` both (cpuinfo's fp16arith, which PyTorch's
# mkldnn_fp16_device_check_arm asks for).
HALF_ARITHMETIC = {
    "x86_64": {
        "bf16": (("avx512_bf16",), ("amx_bf16",), ("avx512bw", "avx512vl")),
        "fp16": (("avx512_fp16",), ("amx_fp16",)),
    },
    "aarch64": {
        "bf16": (("bf16",),),
        "fp16": (("fphp", "asimdhp"),),
    },
}
ARCH_NAMES = {"amd64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64", "armv8": "aarch64"}


def arch_of(name: str | None) -> str:
    """x86_64 or aarch64 (or the name as given) from cpuinfo's or platform's spelling."""
    name = (name or platform.machine()).lower()
    return ARCH_NAMES.get(name, "aarch64" if name.startswith("armv8") else name)


def half_arithmetic(precision: str, flags=None, arch: str | None = None) -> str | None:
    """None where this CPU (or one of these ISA flags, of that architecture) computes a
    half type at speed, or where its flags could not be read (it is then measured, and its
    records say "unknown"), else the one line that says why not. Every CPU path that picks
    bf16 or fp16 asks here."""
    own = cpu() if flags is None else {"isa": isa(flags), "arch": arch}
    have = set(own["isa"])
    if UNKNOWN in have:
        return None
    # no flag name is shared between the architectures, so every rule can be asked
    every = [g for rules in HALF_ARITHMETIC.values() for g in rules[precision]]
    if any(have.issuperset(g) for g in every):
        return None
    rules = HALF_ARITHMETIC.get(arch_of(own.get("arch")))
    wanted = " or ".join("+".join(g) for g in (rules[precision] if rules else every))
    return f"no {precision} arithmetic in this CPU's ISA (needs {wanted})"


@functools.cache
def _cpuinfo() -> dict:
    try:
        import cpuinfo  # py-cpuinfo, which pytest-benchmark uses for its own machine_info

        return cpuinfo.get_cpu_info()
    except Exception:  # an unknown platform: describe what platform knows
        return {}


def isa(flags) -> list[str]:
    """The ISA_FLAGS among flags, in ISA_FLAGS order ([UNKNOWN] when flags is UNKNOWN's)."""
    have = {_FLAG_ALIASES.get(f, f) for f in flags}
    return [UNKNOWN] if UNKNOWN in have else [f for f in ISA_FLAGS if f in have]


def cpu() -> dict:
    """Vendor, model and the instruction-set extensions the kernels choose by ([UNKNOWN]
    where py-cpuinfo could not read the CPU's flags)."""
    info = _cpuinfo()
    flags = info.get("flags") or ()
    return {
        "vendor": info.get("vendor_id_raw") or platform.machine(),
        "model": cpu_model(),
        "family": info.get("family"),
        "model_number": info.get("model"),
        "stepping": info.get("stepping"),
        "arch": info.get("arch_string_raw") or platform.machine(),
        # no flags read is not "no extensions": a Graviton or an AMX machine whose flags
        # py-cpuinfo missed must be measured, not skipped as if it lacked them
        "isa": isa(flags) if flags else [UNKNOWN],
    }


_FROM_ENV = object()


def nvml_handle(device: str, nvml=None, visible=_FROM_ENV):
    """NVML's handle of the GPU a framework calls cuda:N, or None. NVML numbers every GPU
    of the machine in PCI bus order and ignores CUDA_VISIBLE_DEVICES; CUDA numbers only
    the visible ones, in that variable's order. So the N-th visible entry is looked up: by
    UUID when it is one (GPU-..., MIG-...), else as an NVML index, which is CUDA's order
    when CUDA_DEVICE_ORDER=PCI_BUS_ID (xfbench sets it for every cell it starts)."""
    nvml = nvml or _nvml()
    if not nvml or not device.startswith("cuda:"):
        return None
    n = int(device.split(":")[1])
    if visible is _FROM_ENV:  # tests pass the variable's value (None: unset)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        if visible is None or visible.strip() == "":
            return nvml.nvmlDeviceGetHandleByIndex(n) if visible is None else None
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if n >= len(entries):
            return None
        entry = entries[n]
        if entry.startswith(("GPU-", "MIG-")):
            return nvml.nvmlDeviceGetHandleByUUID(entry)
        return nvml.nvmlDeviceGetHandleByIndex(int(entry))
    except Exception:  # a bad entry, or NVML's NotFound: no reading rather than a wrong one
        return None


def gpu_count(nvml=None, visible=_FROM_ENV) -> int:
    """The GPUs CUDA shows: every NVML GPU, or with CUDA_VISIBLE_DEVICES set, its entries
    up to the first that names no GPU (CUDA ignores the rest); "" shows none."""
    nvml = nvml or _nvml()
    if not nvml:
        return 0
    if visible is _FROM_ENV:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return nvml.nvmlDeviceGetCount()
    n = 0
    while nvml_handle(f"cuda:{n}", nvml, visible) is not None:
        n += 1
    return n


def gpu_free_bytes(device: str) -> int | None:
    """Free memory of cuda:N by NVML (None without a reading)."""
    handle = nvml_handle(device)
    if handle is None:
        return None
    try:
        return int(_nvml().nvmlDeviceGetMemoryInfo(handle).free)
    except Exception:
        return None


def gpu_name(device: str) -> str | None:
    handle = nvml_handle(device)
    if handle is None:
        return None
    try:
        return str(_nvml().nvmlDeviceGetName(handle))
    except Exception:
        return None


def cpu_model() -> str:
    """The CPU's brand string; where it names no model (a hypervisor may pass only "AMD
    EPYC", for Zen 3 and Zen 5 alike) its family and model numbers are added, so two
    different CPUs never share a label."""
    info = _cpuinfo()
    brand = info.get("brand_raw") or platform.processor() or platform.machine()
    return model_label(brand, info.get("family"), info.get("model"))


def model_label(brand: str, family, model) -> str:
    if any(ch.isdigit() for ch in brand) or family is None or model is None:
        return brand
    return f"{brand} (family {family} model {model})"


def describe() -> dict:
    """The machine, for pytest-benchmark's machine_info and the runner's merged file."""
    return {
        "cpu_model": cpu_model(),
        "cpu": cpu(),
        "cores_physical": psutil.cpu_count(logical=False),
        "cores_logical": psutil.cpu_count(logical=True),
        "cpus_allowed": len(os.sched_getaffinity(0)),
        # sockets, NUMA nodes, L3 domains, SMT siblings of the CPUs this process may use
        "topology": topology.describe(),
        "memory_bytes": psutil.virtual_memory().total,
        "gpus": gpus(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "packages": package_versions(),
    }
