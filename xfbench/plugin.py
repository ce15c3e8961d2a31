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

import importlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from xfbench import command_line, environment, machine, options
from xfbench.adapters import Cell
from xfbench.errors import CannotRun, UsageError
from xfbench.harness import memory, processes, threads
from xfbench.harness.measure import WEIGHT_SOURCES
from xfbench.harness.selection import Selection, accept, parse

# Failures recorded, per-cell result files and one process per framework group (runner);
# Table 7's network suite's options, cells and records (networks); the GEMM suite's (gemm);
# the scaling, all-reduce and serving suites' (scaling, allreduce, serving); the generation
# and token-serving suites'.
pytest_plugins = (
    "xfbench.runner.plugin",
    "xfbench.networks.plugin",
    "xfbench.gemm.plugin",
    "xfbench.scaling.plugin",
    "xfbench.allreduce.plugin",
    "xfbench.serving.plugin",
    "xfbench.generation.plugin",
    "xfbench.token_serving.plugin",
)

SELECTION = pytest.StashKey[Selection]()
# item: a failure record a suite left because it knows better than the exception why its
# cell failed (a worker's own status, such as "timeout", and its output tail); the
# runner's plugin records it.
SUITE_FAILURE = pytest.StashKey[dict]()
CONFIGURED = pytest.StashKey[dict]()
NOTHING_MEASURED = pytest.StashKey[bool]()
EXIT_STATUS = pytest.StashKey[int]()  # the session's, for the exit watch
JOB = pytest.StashKey[dict]()  # config: the runner's job this child runs (runner.group)
MEASURED: set[str] = set()  # node ids of cell tests that passed in this session


# -- the skeleton every suite declares itself to ------------------------------------------
@dataclass(frozen=True)
class Sweep:
    """What `xfbench run --suite NAME` runs (a suite's `sweep`): its cells, the selection
    stored with them (to recognise a resume) and the preset (the cells' time-out)."""

    selection: dict
    cells: list
    preset: str


class CellType(Protocol):
    """A swept suite's cell class: from_dict reads a cell back from its as_dict() (every
    cell has a `task` and an `id`)."""

    def from_dict(self, data: dict, /) -> Any: ...


# The shape of each callable a suite declares, which mypy holds every declaration to
# (pyproject.toml).
CellsHook = Callable[[pytest.Metafunc], "list[Any] | str"]  # its cells, or why none is selected
ConfigHook = Callable[[pytest.Config], Any]  # a step of the session's configuration
TableHook = Callable[[list[dict]], str]  # its records -> its summary table
SweepHook = Callable[[dict], Sweep]  # the run's options (dest -> value) -> its sweep
SecondsHook = Callable[[Any, Any], "float | None"]  # (cell, preset) -> about how long
MergedHook = Callable[[list[dict], dict], None]  # (a run's records, its machine) -> None
GpuStepsHook = Callable[[Any], list]  # harness.gpu_plan.Context -> [acceptance Step]
TimedHook = Callable[[dict], int]  # a cell's fields -> the version of the code timing it


@dataclass(frozen=True)
class Summary:
    """Its terminal summary: the title and table of the records its fixture keeps (also the
    report's failed cells and the acceptance summary)."""

    title: str
    table: TableHook


@dataclass(frozen=True, kw_only=True)
class Swept:
    """What `xfbench run --suite NAME` sweeps of it: `plan`, its cells from the run's options
    (dest -> value), and what they run, one phrase (`xfbench run --suite`); `seconds`, about
    how long one of its cells takes, (cell, preset) -> seconds (`xfbench run --dry-run`; the
    rates in xfbench/harness/estimate.py; None: not known)."""

    plan: SweepHook
    about: str
    seconds: SecondsHook | None = None


@dataclass(frozen=True, kw_only=True)
class SuiteOptions:
    """Its options: `own` (xfbench.options.Option, shown under its name; its plugin's
    pytest_addoption gives them to pytest), `takes` (the common options its `xfbench run`
    sweep takes, by name), `notes` (what a common option takes and means in it: name ->
    options.Note); `own_rules`, the options (dests) it reads by rules of its own, which the
    session's common selection then leaves to it where its file is named (generation:
    --batch-size lists sizes, --model may name a decoder of models.DECODERS); `modes`
    (framework -> modes) and `precisions` its cells run beyond the adapters', which --mode
    and --precision then accept (generation's loop mode, GEMM's fp8)."""

    own: tuple = ()
    takes: tuple[str, ...] = ()
    notes: dict = field(default_factory=dict)
    own_rules: tuple[str, ...] = ()
    modes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    precisions: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class GpuPart:
    """Its part of the GPU acceptance run: `steps`, from the run's harness.gpu_plan.Context
    (each an acceptance Step, one child process), and `parts`, the rank of each part of its
    own among the plan's (xfbench/acceptance/steps.py); `probes`, what the acceptance run's
    probe asks beside the frameworks for its versions and devices (name -> a callable
    giving a thing with versions() and devices(); GEMM: CuPy); `timed`, the version of the
    code that times a cell of these fields (absent: 1), raised in the commit that changes
    a timed path: a reference's cell of an older version is not held by today's code
    (xfbench/acceptance/plan.py; its records carry `timed_version`)."""

    steps: GpuStepsHook
    parts: dict[str, int] = field(default_factory=dict)
    probes: dict[str, Callable[[], Any]] = field(default_factory=dict)
    timed: TimedHook | None = None


@dataclass(kw_only=True)
class Suite:
    """What a suite declares; the root plugin and the runner do the rest once for every
    suite. Each field is used by two suites or more, or says why beside it.

    A suite gives its cells (the test parameter `param` they fill, and `cells`, from the
    session, or why none is selected), when it runs (only when one of its `files` is named,
    unless it is the `default` suite), and its `summary` (the title and table of the
    records its fixture keeps in `records(config)`); its fixture measures a cell and skips,
    with the reason, one that cannot run here. The root plugin registers the options
    (xfbench.options), validates every suite's selection (`select`, after threads are
    pinned; `before_pin`) in one place, so that a bad value (UsageError, ValueError or
    pytest.UsageError with a one-line message) is one line and pytest's usage-error exit
    before anything runs, and writes pytest_generate_tests and the terminal summary.

    A suite `xfbench run --suite NAME` sweeps also gives `sweep` (Swept), `cell_type`
    (whose from_dict reads a cell back from its as_dict(), with `task` and `id`) and
    `files`: the runner hands each child process a job file of cells (runner.group) and the
    child runs exactly those, a module with a TASK taking the cells of that task.

    Its record kinds it declares to the records itself (records.declare_kind in its
    plugin, with their fields from its package's fields.py)."""

    name: str  # its name for `xfbench run --suite`
    param: str
    cells: CellsHook
    files: tuple[str, ...] = ()  # its pytest files in xfbench/suites/ (or paths)
    cell_type: CellType | None = None
    select: ConfigHook | None = None
    before_pin: ConfigHook | None = None
    summary: Summary | None = None
    tasks: tuple[str, ...] = ()  # the `task` of its cells' records (the runner's summary)
    options: SuiteOptions = field(default_factory=SuiteOptions)
    sweep: Swept | None = None
    # One suite, Table 7's network suite: it is swept when --suite is not given, runs
    # without its files named, and reads the failed cells no suite claims.
    default: bool = False
    # the record kinds its cells write (one per task where they write several)
    kinds: tuple[str, ...] = ()
    # fills in a run's records what is known only once its cells, run in separate
    # children, are merged beside the run's machine (its measured roofs): scaling's
    # speedup over one worker, the network suite's MFU of each training cell
    merged: MergedHook | None = None
    gpu: GpuPart | None = None
    # its part of `xfbench report`: the module (xfbench/<suite>/report.py) that gives its
    # section, plots, CSV files and scored results (xfbench/report/suites.py)
    report: str | None = None
    key: pytest.StashKey = field(default_factory=pytest.StashKey)
    records_key: pytest.StashKey = field(default_factory=pytest.StashKey)

    def selection(self, config: pytest.Config):
        return config.stash[self.key]

    def records(self, config: pytest.Config) -> list[dict]:
        """The rows of this suite's summary: each measured cell's record, or its failure."""
        return config.stash.setdefault(self.records_key, [])

    def is_named(self, config: pytest.Config) -> bool:
        """Whether it runs in this session: the default suite always, any other when one
        of its files is named (or it has none)."""
        return (
            self.default or not self.files or any(named(config, Path(f).name) for f in self.files)
        )

    def skip_reason(self, config: pytest.Config) -> str | None:
        if not self.is_named(config):
            where = f"xfbench/suites/{self.files[0]}"
            return f"the {self.name} suite runs when named: pytest {where}"
        return None

    def paths(self) -> list[Path]:
        """Its pytest files, as a child of the runner is given them."""
        return [SUITES_DIR / f for f in self.files]


SUITES: list[Suite] = []


def declare(suite: Suite) -> Suite:
    accept(suite.options.modes, suite.options.precisions)
    options.declare(
        suite.name,
        own=suite.options.own,
        takes=suite.options.takes,
        notes=suite.options.notes,
        sweep=suite.sweep.about if suite.sweep else "",
        default=suite.default,
    )
    SUITES.append(suite)
    return suite


def declared() -> dict[str, Suite]:
    """Every suite, by name: the root plugin's, those of the plugins it names
    (pytest_plugins) and those named in PYTEST_PLUGINS (pytest loads these into every
    session, a runner's children included: a suite outside xfbench is that one line),
    imported here where pytest has not loaded them (`xfbench run`, `xfbench report`). A
    name in PYTEST_PLUGINS that is no module here is pytest's to load or to report (its
    own plugins go by short names, such as pytester)."""
    for module in pytest_plugins:
        importlib.import_module(module)
    names = [m.strip() for m in os.environ.get("PYTEST_PLUGINS", "").split(",")]
    for module in filter(None, names):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            if not e.name or not (module == e.name or module.startswith(f"{e.name}.")):
                raise  # the module is there, and something it imports is not
    return {s.name: s for s in SUITES}


def pytest_addoption(parser):
    # The common options; each suite's plugin adds its own in its pytest_addoption (pytest
    # loads the suites' plugins after this hook: importing them here would leave their
    # asserts unrewritten, with a warning in every session).
    options.add_pytest_options(parser, options.COMMON)


def _parse(config) -> Selection:
    """The session's common selection; an option a named suite reads by its own rules
    (SuiteOptions.own_rules) is left to that suite."""
    own = {d for s in SUITES if s.files and s.is_named(config) for d in s.options.own_rules}
    return parse(
        **{
            dest: None if dest in own else config.getoption(dest)
            for dest in options.selection_options()
        }
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
    """Whether this session runs xfbench's suites: a runner's child (its job), a path
    argument inside (or above) the suites folder, or --pyargs naming xfbench's suites."""
    if JOB in config.stash:
        return True
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
        except UsageError as e:
            raise pytest.UsageError(str(e)) from None
    return config.stash[SELECTION]


def read_job(config) -> None:
    """In a runner's child (XFBENCH_JOB): its settings become this session's options, and
    its cells the only ones this session generates (pytest_generate_tests)."""
    path = environment.JOB.read()
    if not path:
        return
    job = json.loads(Path(path).read_text())
    for dest, value in job["settings"].items():
        setattr(config.option, dest, value)
    config.stash[JOB] = job


def pytest_configure(config):
    MEASURED.clear()
    for suite in SUITES:
        config.stash[suite.records_key] = []
    config.stash[CONFIGURED] = {}
    read_job(config)
    if not active(config):
        return
    try:
        environment.check_environment()
        for suite in SUITES:
            if suite.before_pin:
                suite.before_pin(config)
        sel = _parse(config)
        cell_timeout(config)
        if config.getoption("weights") not in (None, *WEIGHT_SOURCES):
            raise UsageError(
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
    except (UsageError, ValueError, pytest.UsageError) as e:
        raise pytest.UsageError((str(e).strip().splitlines() or ["bad option"])[0]) from None


def cell_timeout(config) -> float | None:
    """--cell-timeout in seconds, or None for the preset's; UsageError unless a positive,
    finite number (nan, inf, 0 and below would each switch the limit off)."""
    return command_line.seconds("--cell-timeout", config.getoption("cell_timeout", None))


def _job_cells(suite: Suite, metafunc, job: dict) -> tuple[list, str | None]:
    """The cells of a runner's job this module runs (a module with a TASK: that task's),
    or the reason it runs none."""
    if job["suite"] != suite.name:
        return [], f"this process runs the {job['suite']} suite's job"
    task = getattr(metafunc.module, "TASK", None)
    if suite.cell_type is None:
        return [], f"the {suite.name} suite declares no cell type to read its job's cells"
    chosen = [suite.cell_type.from_dict(c) for c in job["cells"]]
    chosen = [c for c in chosen if task in (None, c.task)]
    return chosen, None if chosen else f"no {task} cell in this process's job"


def pytest_generate_tests(metafunc):
    """Every suite's cells (in a runner's child, its job's), or one placeholder skipped
    with the reason the suite does not run (not named, nothing selected)."""
    job = metafunc.config.stash.get(JOB, None)
    for suite in SUITES:
        if suite.param not in metafunc.fixturenames:
            continue
        if job is not None:
            selected, reason = _job_cells(suite, metafunc, job)
        else:
            reason = suite.skip_reason(metafunc.config)
            found = [] if reason else suite.cells(metafunc)
            selected, reason = ([], found) if isinstance(found, str) else (found, reason)
        if reason:
            placeholder = pytest.param(None, marks=pytest.mark.skip(reason=reason))
            metafunc.parametrize(suite.param, [placeholder], ids=["not-selected"])
        else:
            metafunc.parametrize(suite.param, selected, ids=[c.id for c in selected])


def threads_configured(config, cell, *more_reasons: str | None) -> dict:
    """The cell's framework with its threads set (once per process, before its first
    operation): what it reports it uses. Skips with the reason where the framework is
    not installed, or with the first of more_reasons given."""
    from xfbench.adapters import get_adapter

    adapter = get_adapter(cell.framework)
    reason = adapter.import_error() or next((r for r in more_reasons if r), None)
    if reason:
        pytest.skip(reason)
    configured = config.stash[CONFIGURED]
    if cell.framework not in configured:
        configured[cell.framework] = adapter.configure_threads(cell.threads)
    return configured[cell.framework]


def measured(records: list, cell, measure_cell, one_line: tuple = (memory.TooLarge,)) -> dict:
    """measure_cell()'s record, kept in records. A cell that cannot run here skips with
    the reason; any other failure is kept as a failure row and fails the test, in one
    line where it is one of one_line (the user's to fix, not a defect)."""
    try:
        record = measure_cell()
    except CannotRun as e:
        pytest.skip(str(e))
    except one_line as e:
        records.append(failed_row(cell.as_dict(), e))
        record = str(e)
    except Exception as e:
        records.append(failed_row(cell.as_dict(), e))
        raise
    if isinstance(record, str):  # outside the except: one line, no chained traceback
        pytest.fail(record, pytrace=False)
    records.append(record)
    return record


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed and "[" in report.nodeid:
        MEASURED.add(report.nodeid)


def _has_cell(item) -> bool:
    """Whether a test measures a train, infer or serving cell."""

    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(isinstance(p, Cell) for p in callspec.params.values())


def pytest_sessionfinish(session, exitstatus):
    """A session that selected network cells and measured none of them (every one skipped:
    an absent device under --skip-missing-devices, a framework not installed) ends with
    pytest's "no tests" status, 5, never 0: a script must not read it as a success. A cell
    counts as measured when its test passed, here or in the child that ran it."""
    config = session.config
    config.stash[EXIT_STATUS] = int(exitstatus)
    if not active(config) or exitstatus != pytest.ExitCode.OK or config.option.collectonly:
        return
    cell_items = [i for i in session.items if _has_cell(i)]
    if cell_items and not any(i.nodeid in MEASURED for i in cell_items):
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
        config.stash[EXIT_STATUS] = int(session.exitstatus)
        config.stash[NOTHING_MEASURED] = True


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Every output is written by now: a run of xfbench's suites or of its own tests that
    has not exited EXIT_GRACE_S later is held, says by what, and ends with its status
    (a GPU window's step is otherwise killed at its cap, its results lost with it)."""
    if active(config) or Path(config.rootpath) == SUITES_DIR.parents[1]:
        status = config.stash.get(EXIT_STATUS, 0)
        processes.exit_within(processes.EXIT_GRACE_S, status, say=_stderr_line)


def _stderr_line(line: str) -> None:
    import sys

    sys.stderr.write(line + "\n")


def pytest_terminal_summary(terminalreporter, config):
    if config.stash.get(NOTHING_MEASURED, False):
        terminalreporter.write_line("xfbench: no cell was measured (every one was skipped: -rs)")
    for suite in SUITES:
        records = config.stash.get(suite.records_key, [])
        if records and suite.summary:
            terminalreporter.write_sep("=", suite.summary.title)
            terminalreporter.write_line(suite.summary.table(records))


def pytest_benchmark_update_machine_info(config, machine_info):
    info = machine.describe()
    # Runtime versions (CUDA, cuDNN, ...) of the frameworks this process already started;
    # asking the others would import them.
    from xfbench.adapters import get_adapter

    info["runtimes"] = {
        name: get_adapter(name).versions() for name in config.stash.get(CONFIGURED, {})
    }
    machine_info["xfbench"] = info
