"""The token-serving suite's part of the pytest plugin: its cells, its fixture and its table.

It runs when its file is named (pytest xfbench/suites/test_token_serving.py, or xfbench
run --suite token-serving): a plain `pytest xfbench/suites/` is the train/infer run.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from xfbench import options, records
from xfbench.generation.cell import MODES
from xfbench.generation.check import TokensDiverged
from xfbench.generation.plugin import generation_options
from xfbench.harness import memory
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
from xfbench.serving import loadgen
from xfbench.serving.plugin import logs_folder
from xfbench.token_serving import estimate, gpu_steps
from xfbench.token_serving import fields as record_fields
from xfbench.token_serving.cell import (
    ACCELERATOR_BATCH,
    BATCH,
    KIND,
    TASK,
    TokenServingCell,
    batch,
    bounds,
    expand,
    lengths,
    scenarios,
)
from xfbench.token_serving.measure import measure
from xfbench.token_serving.table import token_serving_table

FILE = "test_token_serving.py"


@dataclass(frozen=True)
class TokenServingSelection:
    selection: Selection
    scenarios: tuple[str, ...]
    given: dict  # --lengths and --batch-size as given (None: each device's default)
    bounds: tuple[float, float, str]

    def cells(self) -> list[TokenServingCell]:
        return expand(self.selection, list(self.scenarios), self.given)

    def describe(self) -> dict:
        scale, preset = self.selection.preset.scale, self.selection.preset.name
        return {
            "scenarios": list(self.scenarios),
            "lengths": {
                d: "{}/{}".format(*lengths(self.given["lengths"], preset, scale, d))
                for d in self.selection.devices
            },
            "largest_batch": {
                d: batch(self.given["batch_size"], scale, d) for d in self.selection.devices
            },
            "ttft_bound_ms": self.bounds[0],
            "tpot_bound_ms": self.bounds[1],
            "bounds_source": self.bounds[2],
        }


def _chosen(sel: Selection, get) -> TokenServingSelection:
    chosen = TokenServingSelection(
        selection=sel,
        scenarios=tuple(scenarios(get("scenario"))),
        given={"lengths": get("lengths"), "batch_size": get("batch_size")},
        bounds=bounds(get("ttft_bound"), get("tpot_bound")),
    )
    chosen.describe()  # a bad --lengths or --batch-size: one line, now
    return chosen


def select(config) -> TokenServingSelection | None:
    """The selection where this suite runs (its file named); None otherwise, so that
    another suite's --scenario or --batch-size is not judged by this one's rules."""
    if not named(config, FILE):
        return None
    sel = parse(**generation_options(config.getoption))
    chosen = _chosen(sel, config.getoption)
    expand(sel, [], chosen.given)  # refuses a --model that does not generate, in one line
    return chosen


def sweep(opts: dict) -> Sweep:
    """`xfbench run --suite token-serving`: the cells at each thread count (GPU cells once);
    thread counts: those given, else every CPU this process may use."""
    threads = opts.get("threads")
    counts = thread_counts(threads) if threads is not None else [len(allowed_cpus())]
    given = generation_options(lambda dest: opts.get(dest) if dest != "threads" else None)
    selections = {n: parse(**{**given, "threads": str(n)}) for n in counts}
    chosen = _chosen(selections[counts[0]], opts.get)
    cells = at_thread_counts(selections, lambda s: expand(s, list(chosen.scenarios), chosen.given))
    selection = {
        "suite": "token-serving",
        **described(chosen.selection, counts),
        **chosen.describe(),
    }
    return Sweep(selection=selection, cells=cells, preset=chosen.selection.preset.name)


# Its own options (xfbench/options.py says what each field is).
OPTIONS = (
    options.Option(
        name="ttft-bound",
        values="token-serving suite: the Server scenario's p99 time-to-first-token bound in "
        "milliseconds, a number above 0 (MLPerf's interactive setting: 500)",
        default="2000, MLPerf Inference's llama3.1-8b Server bound",
        run=options.TAKEN,
        child=True,
        metavar="MS",
        kind="milliseconds",
    ),
    options.Option(
        name="tpot-bound",
        values="token-serving suite: the Server scenario's p99 time-per-output-token bound in "
        "milliseconds, a number above 0 (MLPerf's interactive setting: 30)",
        default="100, MLPerf Inference's llama3.1-8b Server bound",
        run=options.TAKEN,
        child=True,
        metavar="MS",
        kind="milliseconds",
    ),
)


SUITE: Suite = declare(
    Suite(
        name="token-serving",
        param="token_serving_cell",
        files=(FILE,),
        cells=lambda metafunc: SUITE.selection(metafunc.config).cells(),
        cell_type=TokenServingCell,
        sweep=Swept(
            plan=sweep,
            about="that generation driven by LoadGen's token mode",
            seconds=estimate.seconds,
        ),
        select=select,
        summary=Summary(
            title="xfbench token serving: GPT-2 generation through LoadGen's token mode "
            "(SingleStream p90 TTFT/TPOT, Server QPS under the p99 bounds, Offline tokens/s)",
            table=lambda records: token_serving_table(records),
        ),
        tasks=(TASK,),
        options=SuiteOptions(
            own=OPTIONS,
            takes=("model", "mode", "precision", "batch-size", "scenario", "lengths"),
            notes={
                "batch-size": options.Note(
                    takes="the largest batch the SUT runs",
                    default=f"{BATCH['full']} (on an accelerator {ACCELERATOR_BATCH['full']}), "
                    f"smoke {BATCH['smoke']} (on an accelerator {ACCELERATOR_BATCH['smoke']})",
                ),
            },
            own_rules=("batch_size", "model"),
            modes=MODES,  # generation's
        ),
        gpu=GpuPart(steps=gpu_steps.steps),
        kinds=(KIND,),
        report="xfbench.token_serving.report",
    )
)
records.declare_kind(KIND, record_fields.TOKEN_SERVING)


def pytest_addoption(parser):
    options.add_pytest_options(parser, OPTIONS)


@pytest.fixture
def run_token_serving(request, benchmark, tmp_path_factory):
    """Serve one cell's generations through LoadGen: skip with the reason when it cannot
    run here."""
    config = request.config
    chosen = SUITE.selection(config)

    def run(cell: TokenServingCell) -> dict:
        threads_config = threads_configured(config, cell, loadgen.missing())
        benchmark.group = (
            f"serve-tokens {cell.network} {cell.prompt_tokens}/{cell.new_tokens} {cell.scenario}"
        )
        return measured(
            SUITE.records(config),
            cell,
            lambda: measure(
                benchmark,
                cell,
                preset=chosen.selection.preset,
                threads_config=threads_config,
                logs=logs_folder(cell, tmp_path_factory),
                bounds=chosen.bounds,
            ),
            one_line=(memory.TooLarge, TokensDiverged),
        )

    return run
