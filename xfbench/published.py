"""Published figures, stated once (published.toml): the GPU models xfbench knows by their
exact names, each one's datasheet roofs, and what others measured on them (anchors).

The GEMM suite reads a GPU's datasheet peaks here, the report and the acceptance summary
its roofs and the anchors that stand beside our cells (each kind of anchor is the suite's
that declares it: the network suite's training, GEMM's products). One matcher serves them all
(`gpu_for`): a device matches a model only by one of the model's exact names, so "H100"
never also matches an H100 PCIe and an H200 is held to its own datasheet.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_suffix(".toml")
PEAK_TYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class Gpu:
    id: str
    name: str  # what a table calls it
    names: tuple[str, ...]  # exactly as NVML and the frameworks report it
    memory_gbps: float
    peaks_tflops: dict  # dense, per type of PEAK_TYPES the datasheet gives
    source: str


@dataclass(frozen=True)
class Anchor:
    # what was measured: a kind of anchor a suite's report declares it stands beside
    # (report/suites.py, Hooks.anchors; tests/test_published.py holds every kind here to one)
    kind: str
    gpu: Gpu
    precision: str  # fp32, tf32, bf16, fp16
    value: float  # published (the low end of a range)
    high: float | None  # the high end of a published range, or None
    unit: str
    setting: str
    source: str
    n: int | None = None  # GEMM size

    @property
    def published(self) -> str:
        return f"{self.value:g}" + (f"-{self.high:g}" if self.high else "") + f" {self.unit}"


@dataclass(frozen=True)
class GpuRatio:
    """A published speed of one GPU model over another for a kind of workload."""

    kind: str  # "decode" or "training": the workloads of the buyer's table it stands beside
    name: str  # what a table calls it
    first: Gpu
    second: Gpu
    value: float  # second's speed over first's
    setting: str
    source: str


def _normal(name: str) -> str:
    return " ".join(name.split()).casefold()


@lru_cache(maxsize=1)
def _read() -> tuple[tuple[Gpu, ...], tuple[Anchor, ...], tuple[GpuRatio, ...]]:
    doc = tomllib.loads(DATA.read_text(encoding="utf-8"))
    gpus = tuple(
        Gpu(
            id=g["id"],
            name=g["name"],
            names=tuple(g["names"]),
            memory_gbps=float(g["memory_gbps"]),
            peaks_tflops={t: float(g[t]) for t in PEAK_TYPES if t in g},
            source=g["source"],
        )
        for g in doc.get("gpu", [])
    )
    by_id = {g.id: g for g in gpus}
    anchors = []
    for a in doc.get("anchor", []):
        if a["gpu"] not in by_id:
            raise ValueError(f"{DATA}: anchor {a} names an unknown gpu")
        anchors.append(
            Anchor(
                kind=a["kind"],
                gpu=by_id[a["gpu"]],
                precision=a["precision"],
                value=float(a["value"]),
                high=float(a["high"]) if "high" in a else None,
                unit=a["unit"],
                setting=a["setting"],
                source=a["source"],
                n=a.get("n"),
            )
        )
    ratios = tuple(
        GpuRatio(
            kind=r["kind"],
            name=r["name"],
            first=by_id[r["first"]],
            second=by_id[r["second"]],
            value=float(r["value"]),
            setting=r["setting"],
            source=r["source"],
        )
        for r in doc.get("gpu_ratio", [])
    )
    return gpus, tuple(anchors), ratios


def gpus() -> tuple[Gpu, ...]:
    return _read()[0]


def anchors() -> tuple[Anchor, ...]:
    return _read()[1]


def gpu_ratios(first: str | None, second: str | None, kind: str) -> tuple[GpuRatio, ...]:
    """The published ratios of the second device's model over the first's for that kind of
    workload (by exact names; () where either is not a listed model), a ratio published the
    other way round inverted."""
    a, b = gpu_for(first), gpu_for(second)
    found = []
    for r in _read()[2]:
        if r.kind == kind and a and b and (r.first, r.second) == (a, b):
            found.append(r)
        elif r.kind == kind and a and b and (r.first, r.second) == (b, a):
            found.append(replace(r, first=a, second=b, value=1 / r.value))
    return tuple(found)


def gpu_for(device_name: str | None) -> Gpu | None:
    """The model a device is, by one of its exact names; None for any other device (the
    CPU, a GPU not listed), never a guess."""
    wanted = _normal(device_name or "")
    return next((g for g in gpus() if wanted in map(_normal, g.names)), None)


def peak_tflops(device_name: str | None, dtype: str) -> float | None:
    """The datasheet's dense peak of that type on that device, or None."""
    gpu = gpu_for(device_name)
    return gpu.peaks_tflops.get(dtype) if gpu else None


def published_figure(
    kind: str, device_name: str | None, precision: str, n: int | None = None
) -> Anchor | None:
    """The published figure of that kind and type on that device (of GEMM's size n), or
    None."""
    gpu = gpu_for(device_name)
    return next(
        (
            a
            for a in anchors()
            if a.kind == kind and a.gpu == gpu and a.precision == precision and a.n == n
        ),
        None,
    )
