"""The scaling suite's pytest plumbing: options, cells, the fixture, and the
end-of-session speedup and efficiency (in the JSON and a terminal table).

Options: the common --framework, --model, --device, --batch-size, --preset, --precision and
--workers (worker counts, comma-separated; default: 1,2 on the CPU, 1 and powers of two up to
the GPUs present on cuda: a common option, as the all-reduce suite takes it too), and its own
  --scaling  strong, weak, or strong,weak (default: strong)
--threads means threads per worker here (default: the CPUs available // the most workers
asked for, so the one-worker baseline has what each of the N workers has).
Batch (--batch-size, else): smoke preset -> SMOKE_BATCH per worker (strong: SMOKE_BATCH times
the most workers, rounded up so that every worker count divides it); paper/quick -> the
network's paper batch (strong: the global batch; weak: the per-worker batch).
Steps: the preset's warm-up steps, then its min_rounds timed steps (paper: 3 and 10).
The suite (suites/test_scaling.py) runs only when named on the command line.
"""

from __future__ import annotations

import importlib.util
import math
import os
import statistics

import pytest

from xfbench import options, records
from xfbench.errors import UsageError
from xfbench.harness import launch, sweeps
from xfbench.harness.selection import comma_list, parse
from xfbench.plugin import SUITE_FAILURE as PENDING
from xfbench.plugin import (
    GpuPart,
    Suite,
    SuiteOptions,
    Summary,
    Sweep,
    Swept,
    cell_timeout,
    declare,
)
from xfbench.scaling import SCALING_CPUS, estimate, gpu_steps
from xfbench.scaling import fields as record_fields
from xfbench.scaling import result as R
from xfbench.scaling.cell import FRAMEWORKS, KIND, ScalingCell, expand
from xfbench.scaling.speedup import fill_speedup, scaling_table

# PENDING (item): the failure record a cell's run left; the runner's plugin records it
# (status "timeout" and the workers' output tail, rather than a bare exception).
SUITE_FILE = "test_scaling.py"


def parse_workers(value: str | None) -> tuple[int, ...] | None:
    counts = []
    for v in comma_list(value):
        if not v.isdigit() or int(v) < 1:
            raise UsageError(f"--workers takes positive whole numbers, not {v!r}")
        counts.append(int(v))
    return tuple(sorted(set(counts))) or None


def parse_scaling(value: str | None) -> tuple[str, ...]:
    kinds = comma_list(value) or ["strong"]
    for k in kinds:
        if k not in ("strong", "weak"):
            raise UsageError(f"unknown scaling {k!r}; valid: strong, weak")
    return tuple(dict.fromkeys(kinds))


def _before_pin(config) -> None:
    # The workers spread over the CPUs this session could use before --threads pins it.
    os.environ.setdefault(SCALING_CPUS.name, ",".join(map(str, R.available_cpus())))


def _select(config):
    return parse_workers(config.getoption("workers")), parse_scaling(config.getoption("scaling"))


def scaling_cells(config) -> list[ScalingCell]:
    """The cells the options select; cells that cannot run here are kept, to skip with why."""
    from xfbench import machine
    from xfbench.plugin import selection

    sel = selection(config)
    counts_asked, kinds = SUITE.selection(config)
    devices = dict.fromkeys(d.split(":")[0] for d in sel.devices)
    return expand(
        frameworks=[f for f in sel.frameworks if f in FRAMEWORKS],
        networks=sel.networks,
        devices=[d for d in devices if d in ("cpu", "cuda")],
        workers=counts_asked,
        kinds=kinds,
        batch=sel.batch_size,
        precisions=sel.precisions,
        scale=sel.preset.scale,
        threads=sel.threads if config.getoption("threads") else None,
        gpus=machine.gpu_count(),
    )


def sweep(opts: dict) -> Sweep:
    """`xfbench run --suite scaling`: its options checked (UsageError: one line) and its
    cells, from the suite's one expansion (scaling.cell.expand)."""
    from xfbench import machine

    sel = parse(
        **{k: opts.get(k) for k in ("framework", "model", "precision", "batch_size", "preset")}
    )
    frameworks = sweeps.frameworks(opts.get("framework"), FRAMEWORKS, "scaling", sel.frameworks)
    devices = sweeps.worker_devices(opts.get("device"), "scaling")
    per_worker = sweeps.threads_per_worker(opts.get("threads"))
    if len(sel.precisions) > 1:
        raise UsageError("--suite scaling takes one --precision")
    kinds = list(parse_scaling(opts.get("scaling")))
    workers = {d: sweeps.worker_counts(opts.get("workers"), d) for d in devices}
    if "cpu" in workers:
        sweeps.fits_cpus("--workers", workers["cpu"], per_worker)
    cells = [
        c
        for fw in frameworks
        for dev in devices
        for c in expand(
            frameworks=[fw],
            networks=sel.networks,
            devices=[dev],
            workers=tuple(workers[dev]),
            kinds=kinds,
            batch=sel.batch_size,
            precisions=sel.precisions,
            scale=sel.preset.scale,
            threads=per_worker,
            gpus=machine.gpu_count(),
        )
    ]
    _check_strong_batches(cells, workers)
    selection = {
        "suite": "scaling",
        "frameworks": frameworks,
        "networks": list(sel.networks),
        "devices": devices,
        "workers": workers,
        "scaling": kinds,
        "precision": sel.precisions[0],
        "batch_size": sel.batch_size,
        "threads_per_worker": per_worker,
        "preset": sel.preset.name,
    }
    return Sweep(selection=selection, cells=cells, preset=sel.preset.name)


def _check_strong_batches(cells: list[ScalingCell], workers: dict) -> None:
    """Strong scaling splits the global batch over the workers: every count must divide it."""
    for c in cells:
        if c.scaling == "strong" and c.batch % c.workers:
            raise UsageError(
                f"strong scaling splits the global batch {c.batch} of {c.network} over the "
                f"workers: {c.workers} workers do not divide it; give --batch-size a multiple "
                f"of {math.lcm(*workers[c.device])}"
            )


def summary(records: list[dict]) -> str:
    fill_speedup(records)
    return scaling_table(records)


# Its own options (xfbench/options.py says what each field is).
OPTIONS = (
    options.Option(
        name="scaling",
        values="scaling suite: `strong` (the global batch split over the workers), `weak` "
        "(the batch per worker fixed), or both, comma-separated",
        default="strong",
        run=options.TAKEN,
    ),
)


SUITE = declare(
    Suite(
        name="scaling",
        param="scaling_cell",
        cells=lambda metafunc: scaling_cells(metafunc.config),
        files=(SUITE_FILE,),
        cell_type=ScalingCell,
        sweep=Swept(
            plan=sweep, about="data-parallel training over N workers", seconds=estimate.seconds
        ),
        select=_select,
        before_pin=_before_pin,
        summary=Summary(
            title="xfbench scaling: seconds per step of the global batch (median), speedup and "
            "efficiency over one worker",
            table=summary,
        ),
        options=SuiteOptions(own=OPTIONS, takes=("model", "precision", "batch-size", "workers")),
        gpu=GpuPart(steps=gpu_steps.steps),
        kinds=(KIND,),
        merged=lambda found, machine: fill_speedup(found),
        report="xfbench.scaling.report",
    )
)
records.declare_kind(KIND, record_fields.SCALING)


def pytest_addoption(parser):
    options.add_pytest_options(parser, OPTIONS)


def _why_not(cell: ScalingCell) -> str | None:
    """Why this cell cannot run here, or None (imports no framework)."""
    from xfbench import machine
    from xfbench.adapters import get_adapter
    from xfbench.scaling.cell import WORKERS

    try:
        cell.check()
    except UsageError as e:
        return str(e)
    reason = get_adapter(cell.framework).import_error()
    if reason:
        return reason
    if importlib.util.find_spec(WORKERS[cell.framework]) is None:
        return (
            f"the {cell.framework} scaling worker ({WORKERS[cell.framework]}) is not part "
            "of this checkout"
        )
    if cell.device == "cuda" and machine.gpu_count() < cell.workers:
        return (
            f"{cell.workers} workers on cuda need {cell.workers} GPUs; "
            f"{machine.gpu_count()} present"
        )
    cpus = len(R.available_cpus())
    if cell.device == "cpu" and cell.workers * cell.threads_per_worker > cpus:
        return (
            f"{cell.workers} workers of {cell.threads_per_worker} threads need "
            f"{cell.workers * cell.threads_per_worker} CPUs; {cpus} available"
        )
    return None


def record(cell: ScalingCell, result: dict, preset: str, stats=None) -> dict:
    """The pytest-benchmark extra_info of a measured cell, from its worker JSON."""
    from xfbench.models import get_spec

    steps = result["step_seconds"]
    median = stats.median if stats is not None else statistics.median(steps)
    flops = get_spec(cell.network, cell.scale).flops("train", cell.global_batch)
    out = {
        **records.header(KIND),
        **cell.as_dict(),
        "cell_id": cell.id,
        "global_batch": cell.global_batch,
        "per_worker_batch": cell.per_worker_batch,
        "preset": preset,
        "status": "ok",
        "seconds_per_batch": median,
        "samples_per_s": cell.global_batch / median,
        "speedup": None,
        "efficiency": None,
        "speedup_baseline": None,
        "flops_per_step": flops,
        "achieved_tflops": flops / median / 1e12,
        "rounds": len(steps),
    }
    for key in (
        "backend",
        "comm_share",
        "comm_share_how",
        "compile_s",
        "warmup_steps",
        "replicas_agree",
        "replicas_max_diff",
        "loss",
        "threads_used",
        "threads_config",
        "device_name",
        "versions",
        "layout",
        "mode",
        "cpus",
        "sharding",
    ):
        if key in result:
            out[key] = result[key]
    return out


def _failure(cell: ScalingCell, status: str, reason: str, tail: str = "") -> dict:
    return {
        "cell": cell.as_dict(),
        "status": status,
        "reason": reason,
        "output_tail": tail,
    }


@pytest.fixture
def run_scaling(request, benchmark):
    """Launch one cell's workers, give their step times to the benchmark fixture, and
    return the record; skip with the reason when the cell cannot run here."""
    from xfbench.harness.external import record_durations
    from xfbench.plugin import selection
    from xfbench.scaling.launch import LaunchError, run

    config = request.config
    preset = selection(config).preset

    def go(cell: ScalingCell) -> dict:
        reason = _why_not(cell)
        if reason:
            pytest.skip(reason)
        benchmark.group = f"scaling {cell.network} {cell.scaling}"
        timeout = cell_timeout(config) or preset.cell_timeout_s
        try:
            result = run(cell, preset.warmup, preset.min_rounds, timeout=timeout)
        except LaunchError as e:
            request.node.stash[PENDING] = _failure(cell, e.status, str(e), e.tail)
            pytest.fail(f"{e.status}: {e}\n{e.tail}", pytrace=False)
        if result.get("status") != "ok":
            reason = result.get("reason", "the workers reported a failure")
            request.node.stash[PENDING] = _failure(
                cell, "failed", reason, result.get("output_tail", "")
            )
            pytest.fail(f"failed: {reason}\n{result.get('output_tail', '')}", pytrace=False)
        stats = record_durations(benchmark, result["step_seconds"])
        out = record(cell, result, preset.name, stats.stats if stats is not None else None)
        benchmark.extra_info.update(out)
        SUITE.records(config).append(out)
        return out

    return go


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A cell that failed or was skipped is recorded with its reason (the session goes on)."""
    report = yield
    callspec = getattr(item, "callspec", None)
    cell = callspec.params.get("scaling_cell") if callspec else None
    if cell is None or report.when not in ("setup", "call") or report.passed:
        return report
    failure = item.stash.get(PENDING, None)
    if failure is None:
        if report.skipped:
            longrepr = report.longrepr
            text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            failure = _failure(cell, "skipped", text.removeprefix("Skipped: ").splitlines()[0])
        else:
            e = call.excinfo
            reason = (f"{e.typename}: {e.value}" if e else report.longreprtext).strip()
            failure = _failure(
                cell,
                "failed",
                (reason.splitlines() or ["failed"])[0],
                launch.tail(report.longreprtext),
            )
    # The runner's plugin records the failure for --benchmark-json and the results folder.
    SUITE.records(item.config).append(
        {
            **failure["cell"],
            "cell_id": cell.id,
            "status": failure["status"],
            "reason": failure["reason"],
        }
    )
    return report


def pytest_benchmark_update_json(config, benchmarks, output_json):
    fill_speedup(b.get("extra_info", {}) for b in output_json.get("benchmarks", []))
