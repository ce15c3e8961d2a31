"""The serving suite's part of the pytest plugin: its cells, its fixture and its table.

It runs when its file is named (pytest xfbench/suites/test_serving.py, or xfbench run
--suite serving): a plain `pytest xfbench/suites/` is the train/infer benchmark run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from xfbench import command_line, environment, options, records
from xfbench.errors import UsageError
from xfbench.harness.measure import WEIGHT_SOURCES
from xfbench.harness.selection import Selection, parse
from xfbench.harness.sweeps import at_thread_counts, described, thread_counts
from xfbench.harness.threads import allowed_cpus
from xfbench.plugin import (
    GpuPart,
    Suite,
    SuiteOptions,
    Summary,
    Sweep,
    Swept,
    declare,
    measured,
    named,
    threads_configured,
)
from xfbench.serving import estimate, gpu_steps, loadgen
from xfbench.serving import fields as record_fields
from xfbench.serving.cell import DEFAULT_NETWORKS, KIND, TASK, ServingCell, expand, scenarios
from xfbench.serving.measure import measure
from xfbench.serving.table import serving_table


@dataclass(frozen=True)
class ServingSelection:
    selection: Selection
    scenarios: tuple[str, ...]
    bound_ms: float | None

    def cells(self) -> list[ServingCell]:
        return expand(self.selection, list(self.scenarios))


def latency_bound(value) -> float | None:
    """--latency-bound in ms, or None for each network's own (scenarios.py)."""
    if value is None:
        return None
    return command_line.number("--latency-bound", value, what="a number of milliseconds")


def select(config) -> ServingSelection | None:
    """The selection where this suite runs (its file named); None otherwise, so that
    another suite's options are not judged by this one's rules."""
    if not named(config, "test_serving.py"):
        return None
    given = {dest: config.getoption(dest) for dest in options.selection_options()}
    if given.get("data") not in (None, "resident"):
        raise UsageError(
            "--data does not apply to the serving suite: its synthetic samples are copied "
            "to the device with each batch it serves"
        )
    if given["model"] is None:
        given["model"] = ",".join(DEFAULT_NETWORKS)
    # the serving cells' samples are resident on the host (a train/infer session's --data
    # real is its own)
    given.update(data=None, data_dir=None, data_workers=None)
    return ServingSelection(
        selection=parse(**given),
        scenarios=tuple(scenarios(config.getoption("scenario"))),
        bound_ms=latency_bound(config.getoption("latency_bound")),
    )


def sweep(opts: dict) -> Sweep:
    """`xfbench run --suite serving`: the serving cells at each thread count, as the
    train/infer sweep (GPU cells once). Thread counts: those given, else every CPU this
    process may use (a serving machine serves with all of them)."""
    threads = opts.get("threads")
    counts = thread_counts(threads) if threads is not None else [len(allowed_cpus())]
    given = {dest: opts.get(dest) for dest in options.selection_options() if dest != "threads"}
    given.update(model=opts.get("model") or ",".join(DEFAULT_NETWORKS), data=None)
    selections = {n: parse(**given, threads=str(n)) for n in counts}
    sel = selections[counts[0]]
    chosen = scenarios(opts.get("scenario"))
    bound_ms = latency_bound(opts.get("latency_bound"))
    weights = opts.get("weights")
    if weights not in (None, *WEIGHT_SOURCES):
        raise UsageError(f"unknown weights {weights!r}; valid: {', '.join(WEIGHT_SOURCES)}")
    cells = at_thread_counts(selections, lambda s: expand(s, chosen))
    selection = {
        "suite": "serving",
        **described(sel, counts),
        "scenarios": chosen,
        "latency_bound_ms": bound_ms,
        "weights": weights or "seed",
    }
    return Sweep(selection=selection, cells=cells, preset=sel.preset.name)


# Its own options (xfbench/options.py says what each field is).
OPTIONS = (
    options.Option(
        name="scenario",
        values="serving suite: LoadGen scenarios, comma-separated: `SingleStream`, "
        "`MultiStream`, `Server`, `Offline` (any case); token-serving: all but MultiStream",
        default="every scenario of the suite",
        run=options.TAKEN,
    ),
    options.Option(
        name="latency-bound",
        values="serving suite: the Server scenario's p99 latency bound in milliseconds, a "
        "number above 0",
        default="each network's (docs/serving.md): MLPerf's 15 ms for ResNet-50, 130 ms for "
        "BERT, and the bound of MLPerf's network of the same kind for the others",
        run=options.TAKEN,
        child=True,
        metavar="MS",
        kind="milliseconds",
    ),
)


SUITE: Suite = declare(
    Suite(
        name="serving",
        param="serving_cell",
        files=("test_serving.py",),
        cells=lambda metafunc: SUITE.selection(metafunc.config).cells(),
        cell_type=ServingCell,
        sweep=Swept(
            plan=sweep,
            about="inference driven by MLPerf's LoadGen through its four scenarios",
            seconds=estimate.seconds,
        ),
        select=select,
        summary=Summary(
            title="xfbench serving: LoadGen's scenarios (SingleStream p90, MultiStream p99, "
            "Server QPS under the bound, Offline samples/s)",
            table=lambda records: serving_table(records),
        ),
        tasks=(TASK,),
        options=SuiteOptions(
            own=OPTIONS,
            takes=("model", "mode", "precision", "batch-size", "weights", "skip-missing-devices"),
            notes={
                "model": options.Note(default="`resnet56`, `resnet50`"),
                "batch-size": options.Note(takes="the largest batch the SUT runs"),
            },
        ),
        gpu=GpuPart(steps=gpu_steps.steps, parts=gpu_steps.PARTS),
        kinds=(KIND,),
        report="xfbench.serving.report",
    )
)
records.declare_kind(KIND, record_fields.SERVING)


def pytest_addoption(parser):
    options.add_pytest_options(parser, OPTIONS)


def logs_folder(cell, tmp_path_factory) -> Path:
    """Where LoadGen writes a serving or token-serving cell's logs (by its task and id): the
    results folder of a runner's child (loadgen/<task>-<cell id>/), else pytest's temporary
    folder of this session."""
    root = environment.CELL_DIR.read()
    if root:
        return Path(root) / "loadgen" / f"{cell.task}-{cell.id}"
    return tmp_path_factory.getbasetemp() / "loadgen" / f"{cell.task}-{cell.id}"


@pytest.fixture
def run_serving(request, benchmark, tmp_path_factory):
    """Serve one cell through LoadGen: skip with the reason when it cannot run here."""
    config = request.config
    chosen = SUITE.selection(config)

    def run(cell: ServingCell) -> dict:
        threads_config = threads_configured(config, cell, loadgen.missing())
        benchmark.group = f"serve {cell.network} {cell.scenario}"
        return measured(
            SUITE.records(config),
            cell,
            lambda: measure(
                benchmark,
                cell,
                preset=chosen.selection.preset,
                threads_config=threads_config,
                logs=logs_folder(cell, tmp_path_factory),
                bound_ms=chosen.bound_ms,
                weights=config.getoption("weights") or "seed",
            ),
        )

    return run
