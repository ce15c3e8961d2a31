"""The pytest side of the runner, loaded by the root plugin (xfbench.plugin).

Three jobs:
- in every pytest run, each cell that fails or is skipped is recorded with its
  reason, and --benchmark-json gets them under the top-level key "xfbench"
  (beside the machine), so no cell of a run is blank;
- in a runner's child (XFBENCH_CELL_DIR set), a marker names the cell starting,
  and each cell's result or failure is written into the results folder the moment
  the cell ends;
- in a plain `pytest xfbench/suites/` whose cells span several (framework, device) groups,
  each group runs in a fresh child process (the runner's group executor) and its
  results are replayed into this session's benchmark fixture: the JSON, the
  pytest-benchmark table and --benchmark-compare see them as if measured here,
  while no two frameworks ever shared a process.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from xfbench import environment, records
from xfbench.adapters import Cell
from xfbench.errors import UsageError
from xfbench.harness import launch
from xfbench.options import child_options
from xfbench.plugin import SUITE_FAILURE, SUITES, cell_timeout
from xfbench.runner.group import Group, Job, key, run_group
from xfbench.runner.store import STATUSES, RunFolder, children_runtimes, read_json, write_json

FAILURES = pytest.StashKey()  # config: failure records of this session
ISOLATION = pytest.StashKey()  # config: the Isolation when groups run in children
REPLAYED = pytest.StashKey()  # item: the child's failure record for this cell
CACHE = pytest.StashKey()  # config: machine and commit info for per-cell files
CALLS = pytest.StashKey()  # config: tests started so far (XFBENCH_FAULT's test#N)


def pytest_configure(config):
    config.stash[FAILURES] = []
    try:  # nan, inf, 0 and below would each disable the limit silently
        cell_timeout(config)
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None


def _suite_cell(item):
    """(suite, cell) of a test item of a suite `xfbench run` sweeps (one with a declared
    sweep), or None (another test, or a suite's placeholder when it does not run)."""
    callspec = getattr(item, "callspec", None)
    for suite in SUITES if callspec else ():
        if suite.sweep and callspec.params.get(suite.param) is not None:
            return suite, callspec.params[suite.param]
    return None


def _unit(item):
    """What a test item measures, for markers, result files and failure records: the cell
    of a suite `xfbench run` sweeps (its task and id name it), or None."""
    found = _suite_cell(item)
    return found[1] if found else None


# -- several groups in one pytest: isolate each in a child ----------------------------
class Isolation:
    def __init__(self, config, found):
        from xfbench.harness.presets import PRESETS

        self.folder = RunFolder(tempfile.mkdtemp(prefix="xfbench-"))
        preset = PRESETS.get(config.getoption("preset") or "paper", PRESETS["paper"])
        self.timeout = cell_timeout(config) or preset.cell_timeout_s
        given = {
            name.replace("-", "_"): config.getoption(name.replace("-", "_"), None)
            for name in child_options()
        }
        self.jobs: dict[Group, Job] = {}
        for suite, cell in found:
            group = Group(cell.framework, cell.device, cell.threads, suite.name)
            self.jobs.setdefault(group, Job(group, [], given)).cells.append(cell)
        self.ran: set[Group] = set()
        self.records: list[dict] = []
        self.runtimes: dict[str, dict] = {}  # what the children's frameworks reported

    def outcome(self, suite, cell) -> tuple[dict | None, dict | None]:
        """(pytest-benchmark JSON, failure record) of a cell, running its group first."""
        group = Group(cell.framework, cell.device, cell.threads, suite.name)
        if group not in self.ran:
            self.ran.add(group)
            run_group(self.jobs[group], self.folder, self.timeout)
        return read_json(self.folder.cells / f"{key(cell)}.json"), self.folder.failure(key(cell))

    def close(self):
        shutil.rmtree(self.folder.root, ignore_errors=True)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    if environment.CELL_DIR.read():
        return  # a runner's child: one group already
    found = [
        (suite, cell)
        for suite, cell in filter(None, map(_suite_cell, items))
        if isinstance(cell, Cell)
    ]
    if len({(c.framework, c.device) for _, c in found}) > 1:
        config.stash[ISOLATION] = Isolation(config, found)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    isolation = pyfuncitem.config.stash.get(ISOLATION, None)
    found = _suite_cell(pyfuncitem)
    if isolation is None or found is None or not isinstance(found[1], Cell):
        return None
    suite, cell = found
    result, failure = isolation.outcome(suite, cell)
    bench = pyfuncitem.funcargs.get("benchmark")
    if bench is not None:
        # The cell was measured in a child, so this fixture is filled, not used.
        bench._mode = "benchmark.pedantic(...)"
    if result:
        entry = result["benchmarks"][0]
        isolation.records.append(entry["extra_info"])
        isolation.runtimes.update(children_runtimes([result]))
        if bench is not None:
            _replay(bench, entry)
        return True
    failure = failure or _failure(
        cell, "failed", "the child process left no record of this cell", ""
    )
    pyfuncitem.stash[REPLAYED] = failure
    isolation.records.append(
        {**failure["cell"], "status": failure["status"], "reason": failure["reason"]}
    )
    if failure["status"] == "skipped":
        pytest.skip(failure["reason"])
    pytest.fail(
        f"{failure['status']}: {failure['reason']}\n{failure['output_tail']}", pytrace=False
    )


@pytest.hookimpl(trylast=True)
def pytest_benchmark_update_machine_info(config, machine_info):
    """Groups measured in children started their frameworks there, not here."""
    isolation = config.stash.get(ISOLATION, None)
    if isolation is not None and isinstance(machine_info.get("xfbench"), dict):
        runtimes = machine_info["xfbench"].setdefault("runtimes", {})
        for name, versions in isolation.runtimes.items():
            runtimes.setdefault(name, versions)


def _replay(bench, entry: dict) -> None:
    """Give this session's benchmark fixture the rounds the child measured (pytest-benchmark
    5.3's own stats object, so every statistic is recomputed from the same data)."""
    bench.group = entry.get("group")
    bench.extra_info.update(entry["extra_info"])
    stats = bench._make_stats(entry["stats"]["iterations"])
    for duration in entry["stats"]["data"]:
        stats.update(duration)


def pytest_terminal_summary(terminalreporter, config):
    isolation = config.stash.get(ISOLATION, None)
    if not (isolation and isolation.records):
        return
    from xfbench.plugin import declared

    # each suite's cells (and their failures, which carry the cell's task) in its own table
    for suite in declared().values():
        mine = [r for r in isolation.records if r.get("task") in suite.tasks]
        if mine and suite.summary:
            title = suite.summary.title
            terminalreporter.write_sep("=", f"{title}, each framework in its own process")
            terminalreporter.write_line(suite.summary.table(mine))


def pytest_unconfigure(config):
    isolation = config.stash.get(ISOLATION, None)
    if isolation:
        isolation.close()


# -- a runner's child: marker before each cell, a file after each --------------------
# -- every run: its outputs so far after each test, so a run killed at its cap keeps them
@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    marker = environment.MARKER.read()
    cell = _unit(item)
    if marker and cell is not None:
        write_json(
            Path(marker), {"key": key(cell), "started": time.monotonic(), "pid": os.getpid()}
        )
    # XFBENCH_FAULT's test#N (tests only): the session's N-th test, skipped or not, is
    # killed or hangs as it starts, as a step cut at its time-out during that test is
    ordinal = item.config.stash[CALLS] = item.config.stash.get(CALLS, 0) + 1
    action = environment.faults().get(f"test#{ordinal}")
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "sleep":
        time.sleep(3600)
    try:
        return (yield)
    finally:
        write_so_far(item.config)


def write_so_far(config) -> None:
    """--benchmark-json and --junitxml as they would be written at the session's end,
    with the tests that ended so far: a step killed at its time-out (the acceptance run's
    pytest steps) keeps every finished cell. Each file is replaced whole."""
    bench = getattr(config, "_benchmarksession", None)
    held = False
    if bench is not None and bench.json and not bench.disabled:
        if CACHE not in config.stash:
            config.stash[CACHE] = (
                bench.get_machine_info(),
                config.hook.pytest_benchmark_generate_commit_info(config=config),
            )
        machine_info, commit_info = config.stash[CACHE]
        output = config.hook.pytest_benchmark_generate_json(
            config=config,
            benchmarks=bench.benchmarks,
            include_data=True,
            machine_info=machine_info,
            commit_info=commit_info,
        )
        config.hook.pytest_benchmark_update_json(
            config=config, benchmarks=bench.benchmarks, output_json=output
        )
        write_json(benchmark_json_path(bench.json), output)
        held = bool(output.get("benchmarks") or output["xfbench"]["failures"])
    held = _junit_so_far(config) or held
    if held and environment.faults().get("written") == "kill":  # tests only: cut right here
        os.kill(os.getpid(), signal.SIGKILL)


def _junit_so_far(config) -> bool:
    """pytest's own JUnit writer, run now into a file beside --junitxml and moved onto it;
    whether it holds a test."""
    from _pytest.junitxml import xml_key  # the one handle pytest gives to its writer

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return False
    final = xml.logfile
    xml.logfile = f"{final}.part"
    try:
        xml.pytest_sessionfinish()
        os.replace(xml.logfile, final)
    finally:
        xml.logfile = final
    return bool(xml.node_reporters_ordered)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    cell = _unit(item)
    if item.config.stash.get(ISOLATION, None) is not None:
        return  # the cell runs in a child, where the fault belongs
    action = environment.faults().get(key(cell)) if cell is not None else None
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "sleep":
        time.sleep(3600)
    elif action == "raise":
        raise RuntimeError(f"fault injected by {environment.FAULT.name}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    cell = _unit(item)
    if cell is None:
        return report
    record = None
    if report.when == "call" and report.passed:
        bench = item.funcargs.get("benchmark")
        stats = getattr(bench, "stats", None)
        if stats:
            bench.extra_info.setdefault("pid", os.getpid())
            _write_result(item.config, cell, stats)
        elif item.config.stash.get(ISOLATION, None) is None:
            record = _failure(cell, "failed", "the test passed without a benchmark", "")
    elif report.skipped and report.when in ("setup", "call"):
        record = item.stash.get(REPLAYED, None) or _failure(
            cell, "skipped", _skip_reason(report), ""
        )
    elif report.failed and report.when in ("setup", "call"):
        record = (
            item.stash.get(REPLAYED, None)
            or _suite_failure(item, cell)
            or _from_exception(cell, call, report)
        )
    if record:
        item.config.stash[FAILURES].append(record)
        if environment.CELL_DIR.read():
            RunFolder(environment.CELL_DIR.read()).write_failure(
                key(cell), **{k: record[k] for k in ("cell", "status", "reason", "output_tail")}
            )
    return report


def _suite_failure(item, cell) -> dict | None:
    """The record a suite left in item.stash[SUITE_FAILURE], in the shape of ours."""
    left = item.stash.get(SUITE_FAILURE, None)
    if not isinstance(left, dict):
        return None
    status = left.get("status") if left.get("status") in STATUSES else "failed"
    reason = str(left.get("reason") or "failed").strip().splitlines() or ["failed"]
    return {
        **records.header("failure"),
        "cell": left.get("cell") or cell.as_dict(),
        "status": status,
        "reason": reason[0],
        "output_tail": str(left.get("output_tail") or ""),
    }


def _failure(cell, status, reason, tail) -> dict:
    return {
        **records.header("failure"),
        "cell": cell.as_dict(),
        "status": status,
        "reason": reason,
        "output_tail": tail,
    }


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ").splitlines()[0] if text else "skipped"


def _from_exception(cell, call, report) -> dict:
    excinfo = call.excinfo
    if excinfo is not None:
        reason = f"{excinfo.typename}: {excinfo.value}".strip().splitlines()[0]
    else:
        reason = (report.longreprtext.strip().splitlines() or ["failed"])[-1]
    oom = (excinfo is not None and excinfo.errisinstance(MemoryError)) or any(
        s in reason for s in ("out of memory", "OutOfMemory", "ResourceExhausted", "OOM")
    )
    tail = launch.tail(report.longreprtext)
    return _failure(cell, "oom" if oom else "failed", reason, tail)


def _write_result(config, cell, stats) -> None:
    """This cell's pytest-benchmark JSON, as --benchmark-json would write it for this
    one benchmark, into the results folder (runner's child only)."""
    folder = environment.CELL_DIR.read()
    if not folder:
        return
    if CACHE not in config.stash:
        session = config._benchmarksession
        config.stash[CACHE] = (
            session.get_machine_info(),
            config.hook.pytest_benchmark_generate_commit_info(config=config),
        )
    machine_info, commit_info = config.stash[CACHE]
    output = config.hook.pytest_benchmark_generate_json(
        config=config,
        benchmarks=[stats],
        include_data=True,
        machine_info=machine_info,
        commit_info=commit_info,
    )
    RunFolder(folder).write_result(key(cell), output)


# -- every run: failures beside the benchmarks in --benchmark-json --------------------
def benchmark_json_path(value) -> Path:
    """Where --benchmark-json writes: pytest-benchmark 5.3 on keeps the option as a path,
    5.2 as the file it opened (and emptied) when it read the option, which is closed here:
    the document replaces it whole (write_json) rather than being written into it."""
    if isinstance(value, str | os.PathLike):
        return Path(value)
    value.close()
    return Path(value.name)


def pytest_sessionstart(session):
    """--benchmark-json written whole or not at all, like every file xfbench writes
    (pytest-benchmark writes it in place)."""
    bench = getattr(session.config, "_benchmarksession", None)
    if bench is not None and bench.json:
        bench.save_json = lambda output_json: write_json(
            benchmark_json_path(bench.json), output_json
        )


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """pytest-benchmark writes --benchmark-json only when a benchmark ran. When none did
    (every cell failed or was skipped), the same document is written with no benchmarks,
    so the failure records and the machine are not lost."""
    config = session.config
    bench = getattr(config, "_benchmarksession", None)
    if bench is None or not bench.json or bench.benchmarks or bench.disabled:
        return
    output = config.hook.pytest_benchmark_generate_json(
        config=config,
        benchmarks=[],
        include_data=True,
        machine_info=bench.get_machine_info(),
        commit_info=config.hook.pytest_benchmark_generate_commit_info(config=config),
    )
    config.hook.pytest_benchmark_update_json(config=config, benchmarks=[], output_json=output)
    write_json(benchmark_json_path(bench.json), output)


def pytest_benchmark_update_json(config, benchmarks, output_json):
    from xfbench import machine

    # None for an option no loaded plugin declares (a suite run with -p no:xfbench.plugin)
    options = {
        name: config.getoption(name.replace("-", "_"), None)
        for name in ("framework", "device", "threads") + child_options()
    }
    output_json["xfbench"] = {
        "failures": _once_per_cell(config.stash.get(FAILURES, [])),
        "selection": options,
        "machine": machine.describe(),
    }


def _once_per_cell(records: list[dict]) -> list[dict]:
    """One failure record per cell: a suite plugin that also records its own cells'
    failures must not make them appear twice."""
    import json

    seen, out = set(), []
    for record in records:
        cell = json.dumps(record.get("cell"), sort_keys=True, default=str)
        if cell not in seen:
            seen.add(cell)
            out.append(record)
    return out
