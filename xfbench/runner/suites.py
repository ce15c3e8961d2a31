"""The suites the runner launches besides the train/infer sweep: data-parallel scaling
(suites/test_scaling.py), the all-reduce sweep (suites/test_allreduce.py) and serving
(suites/test_serving.py, whose cells are Cells and run exactly as the train/infer ones).

Their cells run in pytest children exactly like the train/infer groups (runner.group),
named by node id:
    suites/test_scaling.py::test_scaling[<network>-<framework>-<device>-w<workers>-<scaling>-b<batch>]
    suites/test_allreduce.py::test_allreduce[<framework>-<device>-n<world_size>]
Each child is given the options that make its suite expand exactly those cells (the
batch always explicitly), and the cells' results and failures land in the results
folder as scaling-<id>.json and allreduce-<id>.json.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

import xfbench.runner.group as group_module
from xfbench import machine
from xfbench.allreduce.plugin import select
from xfbench.errors import UsageError
from xfbench.frameworks import names
from xfbench.harness.selection import comma_list, normalize_device, parse
from xfbench.harness.threads import allowed_cpus
from xfbench.runner.group import Group, Job
from xfbench.runner.plan import Plan
from xfbench.scaling.cell import ScalingCell, expand

SUITES = ("single", "scaling", "allreduce", "serving")
SUITE_FILES = {"scaling": "test_scaling.py", "allreduce": "test_allreduce.py"}
# extra_info "kind" of each suite's entries, also written into its failure records
KINDS = {"scaling": "scaling", "allreduce": "allreduce"}
SCALING_FRAMEWORKS = names(scaling=True)
ALLREDUCE_FRAMEWORKS = names(allreduce=True)
SCALING_KINDS = ("strong", "weak")
# The all-reduce suite's pytest option for its world sizes.
WORLD_SIZES_OPTION = "world-sizes"


SCALING_ID = re.compile(
    r"(?P<network>.+?)-(?P<framework>[^-]+)-(?P<device>[^-]+)-w(?P<workers>\d+)"
    r"-(?P<scaling>[^-]+)-b(?P<batch>\d+)"
)
ALLREDUCE_ID = re.compile(r"(?P<framework>[^-]+)-(?P<device>[^-]+)-n(?P<world_size>\d+)")


@dataclass(frozen=True)
class SuiteCell:
    """A cell of the scaling or all-reduce suite as the runner knows it: its test id and
    the fields its failure record carries."""

    task: str  # "scaling" | "allreduce": the file-name prefix
    id: str  # the test id inside the suite
    fields: tuple[tuple[str, object], ...] = ()

    @property
    def node_id(self) -> str:
        return f"{group_module.SUITES_DIR / SUITE_FILES[self.task]}::test_{self.task}[{self.id}]"

    def as_dict(self) -> dict:
        return {"kind": KINDS[self.task], **dict(self.fields)}


def suite_cell(cell: ScalingCell) -> SuiteCell:
    """The runner's view of a scaling cell of the suite's own expansion."""
    return SuiteCell("scaling", cell.id, tuple(cell.as_dict().items()))


def from_item(item) -> SuiteCell | None:
    """The SuiteCell of a collected test of these suites (in the child), whatever its
    parameter is called: the test id names it, and a parameter with as_dict() (the
    suite's own cell) gives its fields."""
    task = getattr(item, "originalname", "").removeprefix("test_")
    callspec = getattr(item, "callspec", None)
    if task not in SUITE_FILES or callspec is None:
        return None
    fields = next((p.as_dict() for p in callspec.params.values() if hasattr(p, "as_dict")), None)
    if fields is None:
        match = (SCALING_ID if task == "scaling" else ALLREDUCE_ID).fullmatch(callspec.id)
        if match is None:
            return None  # not a cell: the placeholder a suite skips when it is not named
        fields = {k: int(v) if v.isdigit() else v for k, v in match.groupdict().items()}
    fields = {k: v for k, v in fields.items() if k != "kind"}
    return SuiteCell(task, callspec.id, tuple(fields.items()))


# ------------------------------------------------------------------ options


def counts(option: str, value: str | None) -> list[int] | None:
    """A list of positive whole numbers, or None when not given."""
    if not value:
        return None
    out = []
    for part in comma_list(value):
        if not part.isdigit() or int(part) < 1:
            raise UsageError(f"{option} takes positive counts like 1,2,4, not {part!r}")
        out.append(int(part))
    if not out:
        raise UsageError(f"{option} takes positive counts like 1,2,4")
    return sorted(set(out))


def _frameworks(framework: str | None, known: tuple[str, ...], suite: str, named) -> list[str]:
    if comma_list(framework):
        for f in named:
            if f not in known:
                raise UsageError(f"--suite {suite} runs {', '.join(known)}; not {f!r}")
        return list(named)
    found = [f for f in named if f in known]
    if not found:
        raise UsageError(f"--suite {suite} needs one of {', '.join(known)} installed")
    return found


def _devices(device: str | None, suite: str) -> list[str]:
    """cpu and cuda (a cell's workers take GPUs 0..N-1); default: cpu, and cuda when a GPU
    is present."""
    gpus = machine.gpu_count()
    if not comma_list(device):
        return ["cpu"] + (["cuda"] if gpus else [])
    out = []
    for d in map(normalize_device, comma_list(device)):
        if d == "cpu":
            out.append("cpu")
        elif d.startswith("cuda:"):
            if not gpus:
                raise UsageError(f"device {d} is not present: this machine has no NVIDIA GPU")
            if int(d.partition(":")[2]) >= gpus:
                raise UsageError(
                    f"device {d} is not present: this machine has {gpus} GPU(s), "
                    f"cuda:0 to cuda:{gpus - 1}"
                )
            out.append("cuda")
        else:
            raise UsageError(f"--suite {suite} runs on cpu and cuda, not {d}")
    return list(dict.fromkeys(out))


def worker_counts(
    value: str | None, device: str, option: str = "--workers", every_gpu: bool = False
) -> list[int]:
    """Default: 1 and 2 on the CPU; 1, 2, 4, ... up to the GPUs present on cuda (and,
    with every_gpu, the number of GPUs itself when it is not a power of two)."""
    gpus = machine.gpu_count()
    asked = counts(option, value)
    if device == "cpu":
        return asked or [1, 2]
    if asked:
        if asked[-1] > gpus:
            raise UsageError(
                f"{option} {asked[-1]} on cuda needs {asked[-1]} GPUs; this machine has {gpus}"
            )
        return asked
    if not gpus:
        return [1]
    powers = [2**i for i in range(int(math.log2(gpus)) + 1)]
    return sorted(set(powers + ([gpus] if every_gpu else [])))


def _threads(value: str | None) -> int | None:
    if not value:
        return None
    cpus = len(allowed_cpus())
    if not value.strip().isdigit() or int(value) < 1:
        raise UsageError(f"--threads takes one positive count per worker here, not {value!r}")
    if int(value) > cpus:
        raise UsageError(f"--threads {value} is more than the {cpus} CPUs this process may use")
    return int(value)


def _fits_cpus(option: str, counts: list[int], threads: int | None) -> None:
    """On the CPU every worker (or rank) needs CPUs of its own: refuse a count that cannot
    run here now, rather than start a child per cell only to skip each one."""
    cpus = len(allowed_cpus())
    need = max(counts) * (threads or 1)
    if need > cpus:
        raise UsageError(
            f"{option} {max(counts)} with {threads or 1} thread(s) each needs "
            f"{need} CPUs; this process may use {cpus}"
        )


# ------------------------------------------------------------------ plans


def scaling_plan(
    *,
    framework=None,
    model=None,
    precision=None,
    device=None,
    threads=None,
    batch_size=None,
    preset=None,
    workers=None,
    scaling=None,
):
    """Validate the options of `xfbench run --suite scaling` (UsageError: one line)
    and list its jobs: one child per (framework, device, network, scaling kind), given
    the batch explicitly so that the suite expands exactly the cells named here."""
    sel = parse(
        framework=framework, model=model, precision=precision, batch_size=batch_size, preset=preset
    )
    frameworks = _frameworks(framework, SCALING_FRAMEWORKS, "scaling", sel.frameworks)
    devices = _devices(device, "scaling")
    per_worker_threads = _threads(threads)
    if len(sel.precisions) > 1:
        raise UsageError("--suite scaling takes one --precision")
    precision = sel.precisions[0]
    kinds = list(dict.fromkeys(comma_list(scaling))) or ["strong"]
    for k in kinds:
        if k not in SCALING_KINDS:
            raise UsageError(f"unknown scaling {k!r}; valid: {', '.join(SCALING_KINDS)}")
    workers_by_device = {d: worker_counts(workers, d) for d in devices}
    if "cpu" in workers_by_device:
        _fits_cpus("--workers", workers_by_device["cpu"], per_worker_threads)
    scale = sel.preset.scale
    jobs = []
    for fw in frameworks:
        # One expansion (scaling.cell.expand), the suite's own, per framework and device:
        # the children collect exactly these cells.
        for dev in devices:
            cells = expand(
                frameworks=[fw],
                networks=sel.networks,
                devices=[dev],
                workers=tuple(workers_by_device[dev]),
                kinds=kinds,
                batch=sel.batch_size,
                precisions=[precision],
                scale=scale,
                threads=per_worker_threads,
                gpus=machine.gpu_count(),
            )
            by_part: dict[tuple[str, str], list[ScalingCell]] = {}
            for c in cells:
                by_part.setdefault((c.network, c.scaling), []).append(c)
            for (network, kind), part in by_part.items():
                ws = [c.workers for c in part]
                batch = part[0].batch
                if kind == "strong" and any(batch % w for w in ws):
                    w = next(w for w in ws if batch % w)
                    raise UsageError(
                        f"strong scaling splits the global batch {batch} of {network} "
                        f"over the workers: {w} workers do not divide it; give "
                        f"--batch-size a multiple of {math.lcm(*ws)}"
                    )
                options = {
                    "model": network,
                    "scaling": kind,
                    "workers": ",".join(map(str, ws)),
                    "batch-size": str(batch),
                    "precision": precision,
                    "preset": sel.preset.name,
                }
                group = Group(
                    framework=fw,
                    device=dev,
                    threads=per_worker_threads or 0,
                    suite="scaling",
                    part=f"{network}-{kind}",
                )
                jobs.append(Job(group, [suite_cell(c) for c in part], options))
    selection = {
        "suite": "scaling",
        "frameworks": frameworks,
        "networks": list(sel.networks),
        "devices": devices,
        "workers": workers_by_device,
        "scaling": list(kinds),
        "precision": precision,
        "batch_size": sel.batch_size,
        "threads_per_worker": per_worker_threads,
        "preset": sel.preset.name,
    }
    return Plan(selection=selection, jobs=jobs, preset_name=sel.preset.name)


def allreduce_plan(
    *,
    framework=None,
    device=None,
    preset=None,
    world_sizes=None,
    workers=None,
    allreduce_sizes=None,
    threads=None,
):
    """Validate the options of `xfbench run --suite allreduce` and list its jobs: one
    child per (framework, device), one test per world size (all sizes and patterns).
    --workers is another name for --world-sizes here."""
    if workers and world_sizes:
        raise UsageError("--workers and --world-sizes name the same thing here; give one")
    world_sizes, sizes = world_sizes or workers, allreduce_sizes
    sel = parse(framework=framework, preset=preset)
    frameworks = _frameworks(framework, ALLREDUCE_FRAMEWORKS, "allreduce", sel.frameworks)
    devices = _devices(device, "allreduce")
    per_rank_threads = _threads(threads)
    if sizes is not None and not comma_list(sizes):
        raise UsageError("--allreduce-sizes needs at least one message size")
    by_device = {d: worker_counts(world_sizes, d, "--world-sizes", every_gpu=True) for d in devices}
    if "cpu" in by_device:
        _fits_cpus("--world-sizes", by_device["cpu"], per_rank_threads)
    # The suite's own expansion (allreduce.plugin.select, which also checks the sizes here,
    # before anything runs): the children collect exactly these cases.
    chosen = select(
        world_sizes=world_sizes,
        allreduce_sizes=sizes,
        framework=",".join(frameworks),
        device=",".join(devices),
        preset=sel.preset.name,
        threads=threads,
    )
    jobs = []
    for fw in frameworks:
        for dev in devices:
            cases = [c for c in chosen.cases if (c.framework, c.device) == (fw, dev)]
            options = {
                WORLD_SIZES_OPTION: ",".join(str(c.world_size) for c in cases),
                "allreduce-sizes": sizes,
                "preset": sel.preset.name,
            }
            jobs.append(
                Job(
                    Group(fw, dev, per_rank_threads or 0, "allreduce"),
                    [SuiteCell("allreduce", c.id, tuple(asdict(c).items())) for c in cases],
                    options,
                )
            )
    selection = {
        "suite": "allreduce",
        "frameworks": frameworks,
        "devices": devices,
        "world_sizes": by_device,
        "sizes": sizes,
        "threads_per_rank": per_rank_threads,
        "preset": sel.preset.name,
    }
    return Plan(selection=selection, jobs=jobs, preset_name=sel.preset.name)


def serving_plan(
    *,
    framework=None,
    model=None,
    mode=None,
    precision=None,
    device=None,
    threads=None,
    batch_size=None,
    preset=None,
    weights=None,
    skip_missing_devices=False,
    scenario=None,
    latency_bound=None,
):
    """Validate the options of `xfbench run --suite serving` and list its jobs: one child
    per (framework, device, thread count), as the train/infer sweep, each given the options
    that make the serving suite expand exactly its cells. Thread counts: those given, else
    every CPU this process may use (a serving machine serves with all of them)."""
    from xfbench.harness.measure import WEIGHT_SOURCES
    from xfbench.runner.plan import thread_counts
    from xfbench.serving.cell import DEFAULT_NETWORKS, expand, scenarios
    from xfbench.serving.plugin import latency_bound as bound

    counts = thread_counts(threads) if threads is not None else [len(allowed_cpus())]
    model = model if model is not None else ",".join(DEFAULT_NETWORKS)
    base = dict(
        framework=framework,
        model=model,
        mode=mode,
        precision=precision,
        device=device,
        batch_size=batch_size,
        preset=preset,
        skip_missing_devices=skip_missing_devices,
    )
    selections = {n: parse(**base, threads=str(n)) for n in counts}
    sel = selections[counts[0]]
    chosen = scenarios(scenario)
    bound_ms = bound(latency_bound)
    if weights not in (None, *WEIGHT_SOURCES):
        raise UsageError(f"unknown weights {weights!r}; valid: {', '.join(WEIGHT_SOURCES)}")
    given = {
        "model": ",".join(sel.networks),
        "mode": mode,
        "precision": ",".join(sel.precisions),
        "preset": sel.preset.name,
        "batch-size": batch_size,
        "weights": weights or "seed",
        "skip-missing-devices": skip_missing_devices,
        "scenario": ",".join(chosen),
        "latency-bound": latency_bound,
    }
    jobs = []
    for fw in sel.frameworks:
        for dev in sel.devices:
            for n in counts if dev == "cpu" else counts[-1:]:
                group_cells = [
                    c
                    for c in expand(selections[n], chosen)
                    if c.framework == fw and c.device == dev
                ]
                if group_cells:
                    jobs.append(Job(Group(fw, dev, n, suite="serving"), group_cells, given))
    selection = {
        "suite": "serving",
        "frameworks": list(sel.frameworks),
        "networks": list(sel.networks),
        "modes": list(sel.modes) if sel.modes else None,
        "precisions": list(sel.precisions),
        "devices": list(sel.devices),
        "threads": counts,
        "scenarios": chosen,
        "latency_bound_ms": bound_ms,
        "preset": sel.preset.name,
        "batch_size": sel.batch_size,
        "weights": weights or "seed",
    }
    return Plan(selection=selection, jobs=jobs, preset_name=sel.preset.name)


# ------------------------------------------------------------------ the end-of-sweep table


def _fmt(value, spec: str) -> str:
    return (
        format(value, spec)
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else ""
    )


# summary columns: the busbw of each pattern some sweep measured, at its largest size
ALLREDUCE_PATTERN_HEADERS = {
    "allreduce": "busbw GB/s all-reduce (largest)",
    "reduce_broadcast": "busbw GB/s reduce+broadcast",
    "parameter_server": "busbw GB/s parameter server",
}


def _allreduce_patterns(records: list[dict]) -> list[str]:
    """The patterns these sweeps measured, all-reduce first: no column stays empty (a
    JAX sweep has no reduce+broadcast)."""
    have = {x.get("pattern") for r in records for x in r.get("rows") or [] if isinstance(x, dict)}
    have = {p for p in have if isinstance(p, str)} | {"allreduce"}
    return [p for p in ALLREDUCE_PATTERN_HEADERS if p in have] + sorted(
        have - set(ALLREDUCE_PATTERN_HEADERS)
    )


def _allreduce_row(r: dict, patterns: list[str]) -> list:
    base = [r.get("framework"), r.get("device"), r.get("world_size")]
    if r.get("status", "ok") != "ok":
        return (
            base
            + [f"{r.get('status') or 'failed'}: {r.get('reason', '')}"[:60]]
            + [""] * (2 + len(patterns))
        )
    rows = [x for x in r.get("rows") or [] if isinstance(x, dict)]
    sizes = sorted({x.get("bytes") for x in rows if isinstance(x.get("bytes"), int)})
    largest = {x.get("pattern"): x for x in rows if sizes and x.get("bytes") == sizes[-1]}
    correct = all(x.get("correct") is True for x in rows)
    return (
        base
        + [r.get("backend", ""), f"{len(sizes)} sizes up to {sizes[-1] if sizes else '?'} B"]
        + [_fmt(largest.get(p, {}).get("busbw_gbps"), ".3g") for p in patterns]
        + ["yes" if correct else "NO"]
    )


def summary_table(suite: str, records: list[dict]) -> str:
    """The terminal table at the end of a scaling or all-reduce sweep: one row per cell."""
    from tabulate import tabulate

    if suite == "scaling":
        from xfbench.scaling.speedup import fill_speedup, scaling_table

        fill_speedup(records)
        return scaling_table(records)
    if suite == "serving":
        from xfbench.serving.table import serving_table

        return serving_table(records)
    patterns = _allreduce_patterns(records)
    headers = (
        "framework",
        "device",
        "world size",
        "backend",
        "sizes",
        *(ALLREDUCE_PATTERN_HEADERS.get(p, f"busbw GB/s {p}") for p in patterns),
        "correct",
    )
    rows = [_allreduce_row(r, patterns) for r in records]
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
