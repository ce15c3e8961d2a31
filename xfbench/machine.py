"""What the machine is: CPU, memory, GPUs, OS and library versions.

Nothing here imports a deep learning framework: versions come from package
metadata and GPUs from NVML, so describing the machine never starts a runtime.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys

import psutil

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


def gpu_count() -> int:
    nvml = _nvml()
    return nvml.nvmlDeviceGetCount() if nvml else 0


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


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe() -> dict:
    """The machine, for pytest-benchmark's machine_info and the runner's merged file."""
    return {
        "cpu_model": cpu_model(),
        "cores_physical": psutil.cpu_count(logical=False),
        "cores_logical": psutil.cpu_count(logical=True),
        "cpus_allowed": len(os.sched_getaffinity(0)),
        "memory_bytes": psutil.virtual_memory().total,
        "gpus": gpus(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "packages": package_versions(),
    }
