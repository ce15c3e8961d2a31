"""Table 7's network suite: the train and infer cells of the FCNs, AlexNet, the ResNets,
the LSTMs and the transformers, each on one device (suites/test_train.py, test_infer.py:
their module says TASK), its equivalence checks' records (suites/test_equivalence.py), its
own options, its record fields (fields.py) and its steps of the GPU plan (gpu_steps.py).
"""

from __future__ import annotations

import pytest

from xfbench import command_line, options, records
from xfbench.adapters import Cell
from xfbench.data.readers import DataError
from xfbench.errors import UsageError
from xfbench.harness import memory
from xfbench.harness.estimate import network_seconds
from xfbench.harness.measure import WEIGHT_SOURCES, RealData, measure
from xfbench.harness.selection import cells, option_list, parse
from xfbench.harness.sweeps import at_thread_counts, described, thread_counts
from xfbench.harness.table import cell_table
from xfbench.networks import fields as record_fields
from xfbench.networks import gpu_steps
from xfbench.plugin import (
    GpuPart,
    Suite,
    SuiteOptions,
    Summary,
    Sweep,
    Swept,
    declare,
    measured,
    selection,
    threads_configured,
)
from xfbench.roofline.mfu import fill_mfu

# Its own options: those only its cells take (the common ones: xfbench/options.py).
OPTIONS = (
    options.Option(
        name="copies",
        values="`N` or `auto`: run each CPU cell as N copies at once, each its own process "
        "pinned to its own CPUs with --threads threads, and record their aggregate "
        "samples/s (the whole machine's throughput); `auto`: one copy per group of that "
        "many physical cores, groups kept inside one NUMA node and L3 domain",
        default="one process a cell",
        pytest=False,
        run=options.TAKEN,
    ),
    options.Option(
        name="task",
        values="`train`, `infer`, comma-separated",
        default="the preset's tasks",
        pytest=False,
        run=options.TAKEN,
    ),
    options.Option(
        name="minutes",
        values="plan the sweep's cells to about this many minutes: each process group "
        "times as many rounds a cell (the preset's, down to 1) as its share of the time "
        "left allows, from the cells' estimated time scaled by what their framework's "
        "groups before took (all groups', for a framework not run yet); the cells are all "
        "run, never fewer; before each group its rounds, and any overrun at one round a "
        "cell, are said (on stderr and in the group's log), and at the end the minutes taken "
        "against those planned (also under --quiet)",
        default="the preset's rounds, however long they take",
        pytest=False,
        run=options.TAKEN,
        kind="minutes",
    ),
    options.Option(
        name="ci-target",
        values="one percentage above 0 and below 100: adaptive rounds (paper and quick "
        "presets) time more rounds, within the preset's cap, until the median's 95% "
        "interval is within it",
        default="2",
        run=options.TAKEN,
        child=True,
        kind="percentage",
    ),
    options.Option(
        name="data",
        values="one of `resident`, `copied` (the batch copied from host memory inside each "
        "step), `real` (the data set under --data-dir, through the framework's own pipeline)",
        default="resident",
        run=options.TAKEN,
        child=True,
        selection=True,
    ),
    options.Option(
        name="data-dir",
        values="with --data real: one folder holding `mnist/`, `cifar10/`, `ptb/`, "
        "`imagenet/` (xfbench data check tells what is there)",
        default="none",
        run=options.TAKEN,
        child=True,
        selection=True,
        metavar="DIR",
        kind="folder",
    ),
    options.Option(
        name="data-workers",
        values="with --data real: the input pipeline's workers, a whole number, 0 or more",
        default="the cell's threads, at most 4",
        run=options.TAKEN,
        child=True,
        selection=True,
        kind="count or zero",
    ),
    options.Option(
        name="seeds",
        values="equivalence suite: the canonical weights of these seeds, e.g. `0-9` or `0,3`",
        default="seed 0",
    ),
    options.Option(
        name="profile-layers",
        values="after each cell's timed rounds, profile 3 more steps per layer (forward and "
        "backward time of every top-level layer, in the record's `layer_times` and the "
        "report's per-layer tables); PyTorch's eager mode, the others say why not",
        default="no per-layer profile",
        flag=True,
        run=options.TAKEN,
        child=True,
    ),
)


def network_sweep(opts: dict) -> Sweep:
    """`xfbench run` (--suite single): the train and infer cells of the selection at each
    thread count of --threads, each count a process of its own; a GPU or TPU cell once, with
    the most host threads asked for (its time is the device's)."""
    from xfbench.adapters import TASKS

    counts = thread_counts(opts.get("threads"))
    given = {dest: opts.get(dest) for dest in options.selection_options() if dest != "threads"}
    selections = {n: parse(**given, threads=str(n)) for n in counts}
    sel = selections[counts[0]]
    if opts.get("ci_target") is not None:
        command_line.number("--ci-target", opts["ci_target"], high=100, what="a percentage")
    weights = opts.get("weights")
    if weights not in (None, *WEIGHT_SOURCES):
        raise UsageError(f"unknown weights {weights!r}; valid: {', '.join(WEIGHT_SOURCES)}")
    tasks = option_list("task", opts.get("task")) or list(sel.preset.tasks)
    for t in tasks:
        if t not in TASKS:
            raise UsageError(f"unknown task {t!r}; valid: {', '.join(TASKS)}")
    chosen = at_thread_counts(selections, lambda s: [c for t in tasks for c in cells(s, t)])
    selection = {
        **described(sel, counts),
        "tasks": tasks,
        "data": sel.data,
        "data_dir": sel.data_dir,
        "weights": weights or "seed",
        **({"profile_layers": True} if opts.get("profile_layers") else {}),
    }
    return Sweep(selection=selection, cells=chosen, preset=sel.preset.name)


def _before_pin(config) -> None:
    ci_target(config)  # a bad --ci-target is one line before anything runs


def ci_target(config) -> float | None:
    """--ci-target as a share (0.02 for 2), or None for the default; UsageError
    unless it is a percentage above 0 and below 100."""
    value = config.getoption("ci_target")
    if value is None:
        return None
    return command_line.number("--ci-target", value, high=100, what="a percentage") / 100


def _merged(infos: list[dict], machine: dict) -> None:
    """Each training cell's MFU, now that the run's roofs are beside its cells."""
    fill_mfu((info for info in infos if info.get("kind") == "train"), machine.get("roofs") or {})


# The train and infer suites (suites/test_train.py, test_infer.py): their module says TASK.
NETWORKS = declare(
    Suite(
        name="single",
        param="cell",
        cells=lambda metafunc: cells(selection(metafunc.config), metafunc.module.TASK),
        files=("test_train.py", "test_infer.py"),
        cell_type=Cell,
        sweep=Swept(
            plan=network_sweep,
            about="the train/infer cells, each on one device",
            seconds=network_seconds,
        ),
        before_pin=_before_pin,
        summary=Summary(title="xfbench: seconds per mini-batch (median)", table=cell_table),
        tasks=("train", "infer"),
        kinds=("train", "infer"),  # one per task
        report="xfbench.networks.report",
        merged=_merged,
        default=True,
        gpu=GpuPart(steps=gpu_steps.steps, parts=gpu_steps.PARTS),
        options=SuiteOptions(
            own=OPTIONS,
            takes=(
                "model",
                "mode",
                "precision",
                "batch-size",
                "rounds",
                "weights",
                "skip-missing-devices",
            ),
        ),
    )
)
# Its record kinds: one per task, and its equivalence checks' (suites/test_equivalence.py).
for _task in NETWORKS.tasks:
    records.declare_kind(_task, record_fields.NETWORK_CELL, record_fields.older_network(_task))
records.declare_kind(
    "equivalence", record_fields.EQUIVALENCE_RECORD, record_fields.older_equivalence
)


def pytest_addoption(parser):
    options.add_pytest_options(parser, OPTIONS)


@pytest.fixture
def run_cell(request, benchmark):
    """Measure one cell: skip with the reason when it cannot run here."""
    config = request.config
    sel = selection(config)

    def run(cell):
        threads_config = threads_configured(config, cell)
        benchmark.group = f"{cell.task} {cell.network}"
        return measured(
            NETWORKS.records(config),
            cell,
            lambda: measure(
                benchmark,
                cell,
                preset=sel.preset,
                threads_config=threads_config,
                weights=config.getoption("weights") or "seed",
                ci_target=ci_target(config),
                profile_layers=bool(config.getoption("profile_layers", False)),
                real=RealData(sel.data_dir, sel.data_workers) if sel.data == "real" else None,
            ),
            one_line=(memory.TooLarge, DataError),
        )

    return run
