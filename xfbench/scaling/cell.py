"""One scaling cell, and the one command line every worker takes.

A cell is (network, framework, device, workers, scaling, batch): strong scaling
keeps the global batch fixed and splits it over the workers, as the paper did;
weak scaling keeps each worker's batch fixed, so the global batch grows with
the workers. `batch` is the global batch for strong scaling and the per-worker
batch for weak scaling.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass, fields
from typing import Any

from xfbench.errors import UsageError
from xfbench.models import SCALES

# the record kind its cells write, and their failures' cells carry
KIND = "scaling"

# Each framework's data-parallel worker module, where it has one.
WORKERS = {
    "torch": "xfbench.scaling.torch_ddp",
    "jax": "xfbench.scaling.jax_sharding",
    "tensorflow": "xfbench.scaling.tensorflow_mirrored",
}
FRAMEWORKS = tuple(WORKERS)  # those with a data-parallel worker
DEVICES = ("cpu", "cuda")
SCALINGS = ("strong", "weak")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")  # as adapters.base; tf32 only on cuda


def default_batch(network: str, scale: str, scaling: str, counts) -> int:
    """The batch of a network's cells when none is given. Strong scaling: the global
    batch, the same at every worker count: the network's paper batch (full size), or
    the smoke batch times the most workers, rounded up so every count divides it.
    Weak scaling: the batch per worker (paper or smoke batch)."""
    import math

    from xfbench.models import SMOKE_BATCH, get_spec

    if scale != "smoke":
        return get_spec(network).batch_size
    if scaling == "weak":
        return SMOKE_BATCH
    step = math.lcm(*counts)
    return -(-SMOKE_BATCH * max(counts) // step) * step


@dataclass(frozen=True, kw_only=True)
class ScalingCell:
    network: str
    framework: str
    device: str  # "cpu" or "cuda" (cuda: one GPU per worker)
    workers: int
    scaling: str  # "strong" or "weak"
    batch: int  # strong: the global batch; weak: the per-worker batch
    threads_per_worker: int
    precision: str = "fp32"
    scale: str = "full"  # "full" or "smoke"

    @property
    def global_batch(self) -> int:
        return self.batch if self.scaling == "strong" else self.batch * self.workers

    @property
    def per_worker_batch(self) -> int:
        if self.scaling == "weak":
            return self.batch
        if self.batch % self.workers:
            raise UsageError(
                f"strong scaling splits the global batch {self.batch} over "
                f"{self.workers} workers: it must divide by {self.workers}"
            )
        return self.batch // self.workers

    @property
    def id(self) -> str:
        return (
            f"{self.network}-{self.framework}-{self.device}-w{self.workers}-"
            f"{self.scaling}-b{self.batch}"
        )

    @property
    def task(self) -> str:
        """Its kind of measurement, the first part of its key in a results folder."""
        return "scaling"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": KIND, **asdict(self)}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> ScalingCell:
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})

    def check(self) -> None:
        """Raise UsageError with one line when a field is out of range."""
        from xfbench.models import NETWORKS

        for name, value, valid in (
            ("network", self.network, tuple(NETWORKS)),
            ("framework", self.framework, FRAMEWORKS),
            ("device", self.device, DEVICES),
            ("scaling", self.scaling, SCALINGS),
            ("precision", self.precision, PRECISIONS),
            ("scale", self.scale, SCALES),
        ):
            if value not in valid:
                raise UsageError(f"unknown {name} {value!r}; valid: {', '.join(valid)}")
        if self.precision == "tf32" and self.device != "cuda":
            raise UsageError(
                f"tf32 is a mode of NVIDIA tensor cores; it has no meaning on {self.device}"
            )
        for name, value in (
            ("workers", self.workers),
            ("batch", self.batch),
            ("threads per worker", self.threads_per_worker),
        ):
            if value < 1:
                raise UsageError(f"{name} must be at least 1, not {value}")
        self.per_worker_batch  # noqa: B018 (raises when the batch does not split)


@dataclass(frozen=True, kw_only=True)
class WorkerTask:
    """What a worker is asked to do: the cell, how many steps, where to write."""

    cell: ScalingCell
    warmup: int
    steps: int
    out: str
    save_weights: str | None = None


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, no usage block
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The worker command line, shared by every worker module."""
    p = _Parser(
        prog=prog,
        description="One data-parallel training measurement; writes the worker JSON to --out.",
    )
    p.add_argument("--network", required=True)
    p.add_argument("--scale", default="full", choices=SCALES)
    p.add_argument("--framework", required=True, choices=FRAMEWORKS)
    p.add_argument("--device", default="cpu", choices=DEVICES)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--scaling", default="strong", choices=SCALINGS)
    p.add_argument(
        "--batch",
        type=int,
        default=None,
        help="strong: the global batch; weak: the per-worker batch (default: the "
        "network's paper batch, or the smoke batch at --scale smoke)",
    )
    p.add_argument(
        "--threads-per-worker",
        type=int,
        default=None,
        help="CPU threads of each worker (default: the available CPUs // --workers)",
    )
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--warmup", type=int, default=2, help="untimed steps after the first")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--out", required=True, help="the worker JSON is written here")
    p.add_argument(
        "--save-weights",
        default=None,
        metavar="NPZ",
        help="also write the canonical weights after the timed steps (first "
        "worker's replica) as .npz, to compare with a one-device step",
    )
    return p


def cell_from(a: argparse.Namespace) -> ScalingCell:
    """The cell named by parsed worker options (defaults filled); UsageError when it cannot be."""
    cell = ScalingCell(
        network=a.network,
        framework=a.framework,
        device=a.device,
        workers=a.workers,
        scaling=a.scaling,
        # 0 is refused by check(), not taken for "the default"
        batch=a.batch if a.batch is not None else _default_batch(a.network, a.scale),
        threads_per_worker=(
            a.threads_per_worker
            if a.threads_per_worker is not None
            else default_threads_per_worker(a.workers)
        ),
        precision=a.precision,
        scale=a.scale,
    )
    cell.check()
    if a.warmup < 0 or a.steps < 1:
        raise UsageError("--warmup must be at least 0 and --steps at least 1")
    return cell


def parse_args(
    argv: list[str] | None = None, framework: str | None = None, prog: str | None = None
) -> WorkerTask:
    """The worker's task from its command line; a bad value exits 2 with one line."""
    p = parser(prog)
    a = p.parse_args(argv)
    try:
        cell = cell_from(a)
        if framework and cell.framework != framework:
            raise UsageError(f"this worker runs {framework}, not {cell.framework}")
    except UsageError as e:
        p.error(str(e))
    return WorkerTask(
        cell=cell, warmup=a.warmup, steps=a.steps, out=a.out, save_weights=a.save_weights
    )


def _default_batch(network: str, scale: str) -> int:
    from xfbench.models import NETWORKS, get_spec

    if network not in NETWORKS:
        raise UsageError(f"unknown network {network!r}; valid: {', '.join(NETWORKS)}")
    return get_spec(network, scale).batch_size


def default_threads_per_worker(max_workers: int) -> int:
    """Available CPUs // the most workers asked for (at least 1): every run, the one-worker
    baseline included, then gives each worker the same threads."""
    from xfbench.scaling.result import available_cpus

    return max(1, len(available_cpus()) // max(1, max_workers))


def gpu_worker_counts(gpus: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to the GPUs present (1 where there is none)."""
    return tuple(2**k for k in range(gpus.bit_length())) if gpus else (1,)


def expand(
    *,
    frameworks,
    networks,
    devices,
    workers: tuple[int, ...] | None = None,
    kinds=("strong",),
    batch: int | None = None,
    precisions=("fp32",),
    scale: str = "full",
    threads: int | None = None,
    gpus: int = 0,
) -> list[ScalingCell]:
    """Every scaling cell of a selection, in one order (device, network, framework, kind,
    precision, workers). The suite (scaling/plugin.py) and `xfbench run --suite scaling`
    (runner/suites.py) both expand cells here, so the runner names exactly the cells its
    children collect. Defaults: workers 1 and 2 on the CPU, 1, 2, 4, ... up to the GPUs on
    cuda; threads per worker the available CPUs over the most workers; the batch of
    default_batch."""
    out = []
    for device in devices:
        counts = tuple(workers or ((1, 2) if device == "cpu" else gpu_worker_counts(gpus)))
        per_worker = threads or default_threads_per_worker(max(counts))
        for network in networks:
            for framework in frameworks:
                for kind in kinds:
                    b = batch or default_batch(network, scale, kind, counts)
                    for precision in precisions:
                        out += [
                            ScalingCell(
                                network=network,
                                framework=framework,
                                device=device,
                                workers=w,
                                scaling=kind,
                                batch=b,
                                threads_per_worker=per_worker,
                                precision=precision,
                                scale=scale,
                            )
                            for w in counts
                        ]
    return out


def to_argv(cell: ScalingCell, warmup: int, steps: int, out: str) -> list[str]:
    """The worker arguments for a cell (what parse_args reads back)."""
    return [
        "--network",
        cell.network,
        "--scale",
        cell.scale,
        "--framework",
        cell.framework,
        "--device",
        cell.device,
        "--workers",
        str(cell.workers),
        "--scaling",
        cell.scaling,
        "--batch",
        str(cell.batch),
        "--threads-per-worker",
        str(cell.threads_per_worker),
        "--precision",
        cell.precision,
        "--warmup",
        str(warmup),
        "--steps",
        str(steps),
        "--out",
        str(out),
    ]
