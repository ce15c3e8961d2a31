"""xfbench's pytest plugin: the options and fixtures that tie the suites to the adapters.

Installed, it is loaded by its `pytest11` entry point into every pytest of the
environment; in a checkout without an install, the root conftest.py loads it. It
registers options and fixtures always, but validates the selection, pins threads
and changes the allocator only in a session that runs xfbench's suites (see
`active`), so that installing xfbench never changes another project's tests.

The selection options are validated in pytest_configure, before collection and
before any framework is imported, so that the thread count and CPU affinity are
in force when a framework's thread pool starts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from xfbench import machine
from xfbench.data.readers import DataError
from xfbench.harness import memory, threads
from xfbench.harness.measure import WEIGHT_SOURCES, RealData, Skip, measure
from xfbench.harness.selection import Selection, SelectionError, cells, parse
from xfbench.harness.table import cell_table

# Failures recorded, per-cell result files and one process per framework group (runner);
# the GEMM suite's options, cells and summary (gemm); the scaling and all-reduce
# suites' (scaling, allreduce).
pytest_plugins = (
    "xfbench.runner.plugin",
    "xfbench.gemm.plugin",
    "xfbench.scaling.plugin",
    "xfbench.allreduce.plugin",
)

SELECTION = pytest.StashKey()
# item: a failure record a suite left because it knows better than the exception why its
# cell failed (a worker's own status, such as "timeout", and its output tail); the
# runner's plugin records it.
SUITE_FAILURE = pytest.StashKey()
RECORDS = pytest.StashKey()
CONFIGURED = pytest.StashKey()
NOTHING_MEASURED = pytest.StashKey()
MEASURED: set[str] = set()  # node ids of cell tests that passed in this session

OPTIONS = {
    "framework": "frameworks, comma-separated (default: every installed one)",
    "model": "networks, comma-separated (default: all nine)",
    "mode": "execution modes, e.g. eager,compile (default: every mode that runs on the device)",
    "precision": "fp32, tf32, bf16, fp16, fp64 (CPU only) (default: fp32)",
    "device": "cpu, cuda:N (or gpu:N), tpu:N (default: cpu and every GPU present)",
    "threads": "CPU threads for this process: variables, framework knobs and affinity "
    "(default: every CPU this process may use)",
    "batch-size": "mini-batch size (default: the preset's, Table 7's for paper and quick)",
    "preset": "paper, quick, table7 or smoke (default: paper)",
    "data": "resident (default), copied (the batch copied from host memory inside each "
    "step) or real (the data set under --data-dir, through the framework's own pipeline)",
    "data-dir": "--data real: the folder holding mnist/, cifar10/, ptb/, imagenet/ "
    "(docs/data.md; xfbench data check tells what is there)",
    "data-workers": "--data real: the input pipeline's workers (default: the CPUs, at most 4)",
}


OPTIONS["ci-target"] = (
    "adaptive rounds (paper and quick presets): time more rounds, within the preset's cap, "
    "until the median's 95%% interval is within this percentage of it (default: 2)"
)
OPTIONS["weights"] = (
    "initial weights: 'seed' (drawn in memory) or 'onnx' (read from the canonical ONNX "
    "file, written to $XFBENCH_CACHE first when missing); the same numbers either way"
)


# -- the skeleton every suite declares itself to ------------------------------------------
@dataclass
class Suite:
    """A suite's options and how they become its selection. The root plugin registers the
    options, and in a session that runs the suites validates every suite's selection in one
    place: a bad value (SelectionError, ValueError or pytest.UsageError with a one-line
    message) is one line and pytest's usage-error exit, before anything runs."""

    name: str
    options: dict[str, str]  # option name (without --) -> help
    select: Callable[[pytest.Config], Any] | None = None  # after threads are pinned
    before_pin: Callable[[pytest.Config], None] | None = None  # before they are
    key: pytest.StashKey = field(default_factory=pytest.StashKey)

    def selection(self, config: pytest.Config):
        return config.stash[self.key]


SUITES: list[Suite] = []


def declare(suite: Suite) -> Suite:
    SUITES.append(suite)
    return suite


def add_options(parser, options: dict[str, str]) -> None:
    group = parser.getgroup("xfbench", "xfbench cell selection")
    for name, text in options.items():
        group.addoption(f"--{name}", action="store", default=None, help=text)


# The equivalence suite's own: not part of the cell selection.
EQUIVALENCE_OPTIONS = {
    "seeds": "equivalence suite: the canonical weights of each of these seeds, e.g. 0-9 "
    "or 0,3 (default: seed 0); a sweep, not part of CI",
}


def pytest_addoption(parser):
    add_options(parser, OPTIONS)
    add_options(parser, EQUIVALENCE_OPTIONS)
    parser.getgroup("xfbench").addoption(
        "--skip-missing-devices",
        action="store_true",
        default=False,
        help="skip, with the reason, the cells of a --device this machine lacks "
        "(default: such a device is an error listing those present)",
    )


def _parse(config) -> Selection:
    return parse(
        **{
            name.replace("-", "_"): config.getoption(name.replace("-", "_"))
            for name in OPTIONS
            if name not in ("weights", "ci-target")
        },
        skip_missing_devices=config.getoption("skip_missing_devices", False),
    )


SUITES_DIR = Path(__file__).resolve().parent / "suites"


def failed_row(fields: dict, error: BaseException | str) -> dict:
    """A cell that raised, as a row of its suite's summary table: its fields, status
    "failed" and a one-line reason. (The runner's plugin records the failure itself.)"""
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
    return {**fields, "status": "failed", "reason": (text.strip().splitlines() or ["failed"])[0]}


def named(config, suite_file: str) -> bool:
    """Whether a suite's file was named on the command line, alone or with test ids, as a
    path or (with --pyargs) as its module, e.g. xfbench.suites.test_scaling. The
    scaling, all-reduce and equivalence suites run only when named."""
    module = "xfbench.suites." + suite_file.removesuffix(".py")
    return any(
        str(arg).split("::")[0].endswith(suite_file) or str(arg).split("::")[0] == module
        for arg in config.args
    )


def active(config) -> bool:
    """Whether this session runs xfbench's suites: a path argument inside (or above)
    the suites folder, or --pyargs naming xfbench's suites."""
    for arg in config.args:
        target = str(arg).split("::")[0]
        if config.getoption("pyargs", False) and (
            target == "xfbench" or target.startswith("xfbench.suites")
        ):
            return True
        path = Path(target).resolve()
        if path == SUITES_DIR or SUITES_DIR in path.parents or path in SUITES_DIR.parents:
            return True
    return False


def selection(config):
    """The validated selection of this session (parsed now if pytest_configure did not)."""
    if SELECTION not in config.stash:
        try:
            config.stash[SELECTION] = _parse(config)
        except SelectionError as e:
            raise pytest.UsageError(str(e)) from None
    return config.stash[SELECTION]


def pytest_configure(config):
    MEASURED.clear()
    config.stash[RECORDS] = []
    config.stash[CONFIGURED] = {}
    if not active(config):
        return
    for suite in SUITES:
        if suite.before_pin:
            suite.before_pin(config)
    try:
        sel = _parse(config)
        ci_target(config)
        if config.getoption("weights") not in (None, *WEIGHT_SOURCES):
            raise SelectionError(
                f"unknown weights {config.getoption('weights')!r}; "
                f"valid: {', '.join(WEIGHT_SOURCES)}"
            )
        # Before any framework is imported: OpenMP/MKL read these once, at start, and the
        # allocator settings then hold for every allocation the frameworks make. CUDA
        # numbers GPUs as NVML does (PCI bus order), so cuda:N and NVML's readings agree.
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        threads.pin(sel.threads)
        memory.keep_freed_memory()
        config.stash[SELECTION] = sel
        for suite in SUITES:
            if suite.select:
                config.stash[suite.key] = suite.select(config)
    except (SelectionError, ValueError, pytest.UsageError) as e:
        raise pytest.UsageError((str(e).strip().splitlines() or ["bad option"])[0]) from None


def ci_target(config) -> float | None:
    """--ci-target as a share (0.02 for 2), or None for the default; SelectionError
    unless it is a percentage above 0 and below 100."""
    value = config.getoption("ci_target")
    if value is None:
        return None
    try:
        pct = float(value)
    except ValueError:
        pct = math.nan
    if not 0 < pct < 100:
        raise SelectionError(
            f"--ci-target must be a percentage above 0 and below 100, not {value!r}"
        )
    return pct / 100


def pytest_generate_tests(metafunc):
    if "cell" in metafunc.fixturenames:
        task = metafunc.module.TASK
        selected = cells(selection(metafunc.config), task)
        metafunc.parametrize("cell", selected, ids=[c.id for c in selected])


@pytest.fixture
def run_cell(request, benchmark):
    """Measure one cell: skip with the reason when it cannot run here."""
    config = request.config
    sel = selection(config)

    def run(cell):
        from xfbench.adapters import get_adapter

        adapter = get_adapter(cell.framework)
        reason = adapter.import_error()
        if reason:
            pytest.skip(reason)
        configured = config.stash[CONFIGURED]
        if cell.framework not in configured:
            configured[cell.framework] = adapter.configure_threads(cell.threads)
        benchmark.group = f"{cell.task} {cell.network}"
        try:
            record = measure(
                benchmark,
                cell,
                sel.preset,
                configured[cell.framework],
                config.getoption("weights") or "seed",
                ci_target(config),
                RealData(sel.data_dir, sel.data_workers) if sel.data == "real" else None,
            )
        except Skip as e:
            pytest.skip(str(e))
        except (memory.TooLarge, DataError) as e:
            config.stash[RECORDS].append(failed_row(cell.as_dict(), e))
            record = str(e)
        except Exception as e:
            config.stash[RECORDS].append(failed_row(cell.as_dict(), e))
            raise
        if isinstance(record, str):  # outside the except: one line, no chained traceback
            pytest.fail(record, pytrace=False)
        config.stash[RECORDS].append(record)
        return record

    return run


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed and "[" in report.nodeid:
        MEASURED.add(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    """A session that selected network cells and measured none of them (every one skipped:
    an absent device under --skip-missing-devices, a framework not installed) ends with
    pytest's "no tests" status, 5, never 0: a script must not read it as a success. A cell
    counts as measured when its test passed, here or in the child that ran it."""
    config = session.config
    if not active(config) or exitstatus != pytest.ExitCode.OK:
        return
    cell_items = [i for i in session.items if "cell" in getattr(i, "fixturenames", ())]
    if cell_items and not any(i.nodeid in MEASURED for i in cell_items):
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
        config.stash[NOTHING_MEASURED] = True


def pytest_terminal_summary(terminalreporter, config):
    records = config.stash.get(RECORDS, [])
    if config.stash.get(NOTHING_MEASURED, False):
        terminalreporter.write_line("xfbench: no cell was measured (every one was skipped: -rs)")
    if records:
        terminalreporter.write_sep("=", "xfbench: seconds per mini-batch (median)")
        terminalreporter.write_line(cell_table(records))


def pytest_benchmark_update_machine_info(config, machine_info):
    info = machine.describe()
    # Runtime versions (CUDA, cuDNN, ...) of the frameworks this process already started;
    # asking the others would import them.
    from xfbench.adapters import get_adapter

    info["runtimes"] = {
        name: get_adapter(name).versions() for name in config.stash.get(CONFIGURED, {})
    }
    machine_info["xfbench"] = info
