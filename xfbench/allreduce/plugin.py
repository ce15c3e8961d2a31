"""The all-reduce suite's pytest plumbing: options, test cases, the fixture, the summary.

Options (beside the common --framework, --device, --preset and --threads):
  --world-sizes     ranks per sweep, comma-separated (default: 1,2 on CPU; on CUDA 1, 2, 4, ...
                    up to the GPUs present, and their number)
  --allreduce-sizes message sizes: 1KB,4MB,1GB or a doubling range 1KB:1GB (default: 1KB:1GB,
                    smoke preset 1KB:1MB), capped at 1/8 of the memory each rank has
--framework picks torch and/or jax (default both); --threads is threads per rank on CPU
(default: the CPUs this process may use, shared out over the largest world size).
The suite (suites/test_allreduce.py) runs only when named on the command line.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import asdict, dataclass, fields

import pytest

from xfbench import frameworks, options, records
from xfbench.allreduce import FRAMEWORKS, gpu_steps
from xfbench.allreduce import fields as record_fields
from xfbench.allreduce import sizes as sizes_mod
from xfbench.allreduce.table import cells_table, sweep_tables
from xfbench.allreduce.timing import TIMINGS
from xfbench.errors import UsageError
from xfbench.harness import sweeps
from xfbench.harness.selection import comma_list, parse
from xfbench.plugin import (
    GpuPart,
    Suite,
    SuiteOptions,
    Summary,
    Sweep,
    Swept,
    cell_timeout,
    declare,
    failed_row,
    named,
)

SUITE_FILE = "test_allreduce.py"
# the record kind its sweeps write, and their failures' cells carry
KIND = "allreduce"
# The CPUs of this process before the common --threads option narrows them: the ranks
# share these out (each rank gets --threads of them).
START_CPUS = sorted(os.sched_getaffinity(0))


@dataclass(frozen=True, kw_only=True)
class Case:
    framework: str
    device: str  # "cpu" or "cuda" (all GPUs of the machine, one per rank)
    world_size: int
    task = "allreduce"  # its kind of measurement: the first part of its key in a results folder

    @property
    def id(self) -> str:
        return f"{self.framework}-{self.device}-n{self.world_size}"

    def as_dict(self) -> dict:
        return {"kind": KIND, **asdict(self)}

    @classmethod
    def from_dict(cls, record: dict) -> Case:
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})


@dataclass(frozen=True, kw_only=True)
class AllreduceSelection:
    cases: tuple[Case, ...]
    sizes: tuple[int, ...]
    preset: str
    threads_per_rank: int | None  # None: CPUs // largest CPU world size
    not_selected: str | None = None  # why no case is selected


def parse_world_sizes(text: str) -> list[int]:
    out = []
    for part in comma_list(text):
        try:
            n = int(part)
        except ValueError:
            n = 0
        if n < 1:
            raise UsageError(
                f"bad --world-sizes value {part!r}; write positive whole numbers, e.g. 1,2,4"
            )
        out.append(n)
    if not out:
        raise UsageError(f"no world size in --world-sizes {text!r}; write e.g. 1,2")
    return sorted(set(out))


def default_world_sizes(device: str, gpus: int) -> list[int]:
    if device == "cpu":
        return [1, 2]
    powers = [2**k for k in range(max(gpus, 1).bit_length()) if 2**k <= max(gpus, 1)]
    return sorted(set(powers + [max(gpus, 1)]))


def device_kind(device: str) -> str:
    return device.split(":")[0]


def select(
    world_sizes=None,
    allreduce_sizes=None,
    framework=None,
    device=None,
    preset=None,
    threads=None,
    gpus: int | None = None,
    cpus: int | None = None,
    check_cpus: bool = True,
) -> AllreduceSelection:
    """Validate raw option strings (the common ones already checked by the root plugin, xfbench.plugin).
    check_cpus: whether --threads per rank must fit the largest CPU world size (only when
    the suite runs: elsewhere --threads means the network suites' threads)."""
    from xfbench import machine
    from xfbench.harness.selection import normalize_device

    gpus = machine.gpu_count() if gpus is None else gpus
    cpus = len(START_CPUS) if cpus is None else cpus
    frameworks, not_selected = _frameworks(framework)
    devices = [device_kind(normalize_device(d)) for d in comma_list(device)] or ["cpu"] + (
        ["cuda"] if gpus else []
    )
    devices = list(dict.fromkeys(devices))
    explicit_ws = parse_world_sizes(world_sizes) if world_sizes not in (None, "") else None
    nbytes = _message_sizes(allreduce_sizes, preset)
    try:
        threads_per_rank = int(threads) if threads not in (None, "") else None
    except ValueError:
        raise UsageError(f"bad --threads {threads!r}") from None  # the root plugin says why
    cases = [
        Case(framework=fw, device=dev, world_size=n)
        for fw in frameworks
        for dev in devices
        for n in explicit_ws or default_world_sizes(dev, gpus)
    ]
    if check_cpus:
        _check_cpus(cases, threads_per_rank, cpus)
    return AllreduceSelection(
        cases=tuple(cases),
        sizes=tuple(nbytes),
        preset=preset or "paper",
        threads_per_rank=threads_per_rank,
        not_selected=not_selected,
    )


def _frameworks(framework) -> tuple[list[str], str | None]:
    """The frameworks --framework names that have an all-reduce worker, and why none is
    selected where it names none of them."""
    named = comma_list(framework)
    frameworks = [f for f in FRAMEWORKS if f in named] if named else list(FRAMEWORKS)
    if frameworks:
        return frameworks, None
    return [], f"--framework {framework} names no all-reduce worker ({', '.join(FRAMEWORKS)})"


def _check_cpus(cases: list[Case], threads_per_rank: int | None, cpus: int) -> None:
    """--threads per rank must fit the largest CPU world size in the CPUs this process has."""
    cpu_ws = [c.world_size for c in cases if c.device == "cpu"]
    if threads_per_rank and cpu_ws and threads_per_rank * max(cpu_ws) > cpus:
        raise UsageError(
            f"--threads {threads_per_rank} per rank times {max(cpu_ws)} ranks needs "
            f"{threads_per_rank * max(cpu_ws)} CPUs; this process may use {cpus}"
        )


def _message_sizes(allreduce_sizes, preset) -> list[int]:
    """--allreduce-sizes in bytes, else the preset's doubling range."""
    if allreduce_sizes in (None, ""):
        return sizes_mod.doubling(*(sizes_mod.SMOKE if preset == "smoke" else sizes_mod.DEFAULT))
    try:
        return sizes_mod.parse_sizes(allreduce_sizes)
    except sizes_mod.UsageError as e:
        raise UsageError(f"--allreduce-sizes: {e}") from None


def _select(config) -> AllreduceSelection:
    return select(
        **{
            name: config.getoption(name)
            for name in (
                "world_sizes",
                "allreduce_sizes",
                "framework",
                "device",
                "preset",
                "threads",
            )
        },
        check_cpus=named(config, SUITE_FILE),
    )


def _skip_reason(case: Case) -> str | None:
    module = frameworks.FRAMEWORKS[case.framework].package
    if importlib.util.find_spec(module) is None:
        return f"{module} is not installed"
    if case.device not in ("cpu", "cuda"):
        return f"no all-reduce worker for device {case.device!r} (cpu, cuda)"
    if case.device == "cuda":
        from xfbench import machine

        gpus = machine.gpu_count()
        if gpus < case.world_size:
            return f"one GPU per rank: {case.world_size} asked for, this machine has {gpus}"
    return None


def _threads_per_rank(sel: AllreduceSelection, case: Case) -> int | None:
    if case.device != "cpu":
        return None
    if sel.threads_per_rank:
        return sel.threads_per_rank
    largest = max(c.world_size for c in sel.cases if c.device == "cpu")
    return max(1, len(START_CPUS) // largest)


@pytest.fixture
def run_allreduce(request, benchmark):
    """Run one sweep (every size, every pattern of the framework) and record it as one benchmark entry."""
    from xfbench.allreduce.launch import LaunchError, run
    from xfbench.harness.external import record_durations
    from xfbench.harness.presets import PRESETS

    config = request.config
    sel = SUITE.selection(config)

    def go(case: Case) -> dict:
        reason = _skip_reason(case)
        if reason:
            pytest.skip(reason)
        cap = sizes_mod.memory_cap(
            case.device, case.world_size, one_gpu_holds_all=case.framework == "jax"
        )
        chosen = [s for s in sel.sizes if s <= cap]
        left_out = [s for s in sel.sizes if s > cap]
        if not chosen:
            pytest.skip(f"every message size is over the memory cap of {cap} bytes per rank")
        preset = PRESETS.get(sel.preset)
        try:
            result, output = run(
                framework=case.framework,
                device=case.device,
                world_size=case.world_size,
                sizes=chosen,
                preset=sel.preset if sel.preset in TIMINGS else "paper",
                timeout=cell_timeout(config) or (preset.cell_timeout_s if preset else 3600.0),
                threads_per_rank=_threads_per_rank(sel, case),
                cpus=START_CPUS,
            )
        except LaunchError as e:
            SUITE.records(config).append(failed_row({"case": case.id}, str(e)))
            raise
        if result.get("unavailable"):
            pytest.skip(result["reason"])
        if result["status"] != "ok":
            SUITE.records(config).append({"case": case.id, **result})
            raise RuntimeError(f"{case.id}: {result.get('reason')}\n{output[-3000:]}")
        record, largest = _sweep_record(case, sel.preset, result, cap=cap, left_out=left_out)
        benchmark.group = f"allreduce {case.framework} {record['backend']} n{case.world_size}"
        benchmark.extra_info.update(record)
        record_durations(benchmark, largest["round_seconds"])
        SUITE.records(config).append(record)
        return record

    return go


def _sweep_record(case: Case, preset, result: dict, *, cap: int, left_out: list[int]):
    """The record of one finished sweep, and its largest all-reduce row (whose rounds are
    the benchmark's)."""
    rows = result["rows"]
    largest = max((r for r in rows if r["pattern"] == "allreduce"), key=lambda r: r["bytes"])
    record = {
        **records.header(KIND),
        "framework": case.framework,
        "backend": result["backend"],
        "device": case.device,
        "device_name": result["device_name"],
        "world_size": case.world_size,
        "threads_per_rank": result.get("threads_per_rank"),
        "preset": preset,
        "timing": result.get("timing"),
        "status": "ok" if all(r["correct"] for r in rows) else "failed",
        "stats_are": f"seconds per all-reduce of {largest['bytes']} bytes",
        "memory_cap_bytes": cap,
        "sizes_left_out": left_out,
        "versions": result.get("versions", {}),
        "rows": [{k: v for k, v in r.items() if k != "round_seconds"} for r in rows],
    }
    return record, largest


def summary(records: list[dict]) -> str:
    """A row per cell, then each sweep's tables (sizes left out under the memory cap
    named), or its failure."""
    out = [cells_table(records)]
    for r in records:
        if r.get("rows"):
            out.append(sweep_tables(r["rows"]))
            if r.get("sizes_left_out"):
                out.append(
                    f"  (left out, over the memory cap of {r['memory_cap_bytes']} bytes: "
                    + ", ".join(sizes_mod.label(s) for s in r["sizes_left_out"])
                    + ")"
                )
        else:
            reason = (str(r.get("reason", "")).splitlines() or [""])[0]
            case = r.get("case") or f"{r.get('framework')}-{r.get('device')}-n{r.get('world_size')}"
            out.append(f"# {case}: {r.get('status')}: {reason}")
    return "\n".join(out)


def sweep(opts: dict) -> Sweep:
    """`xfbench run --suite allreduce`: its options checked (UsageError: one line) and its
    cases, from the suite's own expansion (select). --workers is another name for
    --world-sizes here."""
    world_sizes, sizes = opts.get("world_sizes"), opts.get("allreduce_sizes")
    if opts.get("workers") and world_sizes:
        raise UsageError("--workers and --world-sizes name the same thing here; give one")
    world_sizes = world_sizes or opts.get("workers")
    sel = parse(framework=opts.get("framework"), preset=opts.get("preset"))
    frameworks = sweeps.frameworks(opts.get("framework"), FRAMEWORKS, "allreduce", sel.frameworks)
    devices = sweeps.worker_devices(opts.get("device"), "allreduce")
    per_rank = sweeps.threads_per_worker(opts.get("threads"))
    if sizes is not None and not comma_list(sizes):
        raise UsageError("--allreduce-sizes needs at least one message size")
    by_device = {
        d: sweeps.worker_counts(world_sizes, d, "--world-sizes", every_gpu=True) for d in devices
    }
    if "cpu" in by_device:
        sweeps.fits_cpus("--world-sizes", by_device["cpu"], per_rank)
    chosen = select(
        world_sizes=world_sizes,
        allreduce_sizes=sizes,
        framework=",".join(frameworks),
        device=",".join(devices),
        preset=sel.preset.name,
        threads=opts.get("threads"),
    )
    selection = {
        "suite": "allreduce",
        "frameworks": frameworks,
        "devices": devices,
        "world_sizes": by_device,
        "sizes": sizes,
        "threads_per_rank": per_rank,
        "preset": sel.preset.name,
    }
    return Sweep(selection=selection, cells=list(chosen.cases), preset=sel.preset.name)


# Its own options (xfbench/options.py says what each field is).
OPTIONS = (
    options.Option(
        name="world-sizes",
        values="all-reduce suite: ranks per sweep, comma-separated",
        default="1,2 on the CPU; 1, 2, 4, ... up to the GPUs present, and their number, on cuda",
        run=options.TAKEN,
        kind="whole numbers",
    ),
    options.Option(
        name="allreduce-sizes",
        values="all-reduce suite: message sizes, `1KB,4MB,1GB` or a doubling range `1KB:1GB`",
        default="1KB:1GB (smoke preset 1KB:1MB), capped at 1/8 of each rank's memory",
        run=options.TAKEN,
        child=True,
    ),
)


SUITE: Suite = declare(
    Suite(
        name="allreduce",
        param="allreduce_case",
        cells=lambda metafunc: (
            SUITE.selection(metafunc.config).not_selected
            or list(SUITE.selection(metafunc.config).cases)
        ),
        files=(SUITE_FILE,),
        cell_type=Case,
        sweep=Swept(plan=sweep, about="collective bandwidth"),
        select=_select,
        summary=Summary(
            title="xfbench all-reduce: median time per operation, nccl-tests' algbw and busbw",
            table=summary,
        ),
        options=SuiteOptions(
            own=OPTIONS,
            takes=("workers",),
            notes={"workers": options.Note(takes="in xfbench run, the same as --world-sizes")},
        ),
        gpu=GpuPart(steps=gpu_steps.steps),
        kinds=(KIND,),
        report="xfbench.allreduce.report",
    )
)
# its name before records were typed: allreduce_sweep
records.declare_kind(KIND, record_fields.ALLREDUCE, aliases=("allreduce_sweep",))


def pytest_addoption(parser):
    options.add_pytest_options(parser, OPTIONS)
