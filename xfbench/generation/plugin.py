"""The generation suite's part of the pytest plugin: its cells, its fixture and its table.

It runs when its file is named (pytest xfbench/suites/test_generation.py, or xfbench run
--suite generation): a plain `pytest xfbench/suites/` is the train/infer benchmark run.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from xfbench import options, records
from xfbench.errors import UsageError
from xfbench.generation import estimate, gpu_steps
from xfbench.generation import fields as record_fields
from xfbench.generation.cell import (
    ACCELERATOR_BATCHES,
    ACCELERATOR_PRECISIONS,
    BATCHES,
    DEFAULT_NETWORKS,
    KIND,
    LENGTHS,
    MODES,
    NETWORKS,
    TASK,
    GenerationCell,
    batches,
    expand,
    lengths,
    timed_version,
)
from xfbench.generation.check import TokensDiverged
from xfbench.generation.measure import measure
from xfbench.generation.table import generation_table
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


@dataclass(frozen=True)
class GenerationSelection:
    selection: Selection
    lengths: tuple[tuple[int, int], ...]
    batches: tuple[int, ...] | None  # None: each device's default

    def cells(self) -> list[GenerationCell]:
        return expand(self.selection, list(self.lengths), self.batches and list(self.batches))


def generation_options(get) -> dict:
    """The common selection options, for a generation run (and a token-serving one): GPT-2
    unless --model names another (refused with the reason), --batch-size read by the
    suite (it may name several), --data refused (the prompt is token ids)."""
    given = {dest: get(dest) for dest in options.selection_options()}
    if given.get("data") not in (None, "resident"):
        raise UsageError(
            "--data does not apply to the generation suite: its prompt is token ids drawn "
            "from the seed, held on the device"
        )
    given.update(model=given.get("model") or ",".join(DEFAULT_NETWORKS), batch_size=None)
    given.update(decoders=True)  # --model may name a decoder of models.DECODERS
    given.update(data=None, data_dir=None, data_workers=None)
    return given


def _given_batches(value: str | None, scale: str) -> tuple[int, ...] | None:
    """--batch-size's sizes, or None for each device's default (generation.cell.batches)."""
    return tuple(batches(value, scale)) if value is not None else None


def fitting(cells: list[GenerationCell]) -> list[GenerationCell]:
    """cells, or UsageError in one line where a CPU cell cannot fit in the host's memory
    (a full-size decoder of models.DECODERS, named with --model): refused before any
    process starts, never killed for memory midway. A GPU cell's memory is checked in
    its own process, against NVML's free memory (measure.check_fits)."""
    from xfbench.adapters import get_adapter
    from xfbench.generation.measure import check_fits
    from xfbench.harness.memory import TooLarge
    from xfbench.models import DECODERS, get_spec

    for cell in cells:
        adapter = get_adapter(cell.framework)
        # a framework that takes the host's weights skips such a cell with its reason
        if cell.device == "cpu" and cell.scale == "full" and cell.network in DECODERS:
            if not adapter.makes_weights:
                continue
            try:
                check_fits(get_spec(cell.network, cell.scale), cell, adapter)
            except TooLarge as e:
                raise UsageError(f"--model {cell.network} on the CPU: {e}") from None
    return cells


def select(config) -> GenerationSelection | None:
    """The selection where this suite runs (its file named); None otherwise, so that
    another suite's options are not judged by this one's rules."""
    if not named(config, "test_generation.py"):
        return None
    sel = parse(**generation_options(config.getoption))
    expand(sel, [], [])  # refuses a --model that does not generate, in one line
    chosen = GenerationSelection(
        selection=sel,
        lengths=tuple(lengths(config.getoption("lengths"), sel.preset.scale, sel.networks)),
        batches=_given_batches(config.getoption("batch_size"), sel.preset.scale),
    )
    fitting(chosen.cells())
    return chosen


def sweep(opts: dict) -> Sweep:
    """`xfbench run --suite generation`: the generation cells at each thread count (GPU
    cells once); thread counts: those given, else every CPU this process may use."""
    threads = opts.get("threads")
    counts = thread_counts(threads) if threads is not None else [len(allowed_cpus())]
    given = generation_options(lambda dest: opts.get(dest) if dest != "threads" else None)
    selections = {n: parse(**{**given, "threads": str(n)}) for n in counts}
    sel = selections[counts[0]]
    pairs = lengths(opts.get("lengths"), sel.preset.scale, sel.networks)
    sizes = _given_batches(opts.get("batch_size"), sel.preset.scale)
    cells = fitting(at_thread_counts(selections, lambda s: expand(s, pairs, sizes)))
    selection = {
        "suite": "generation",
        **described(sel, counts),
        "lengths": [f"{i}/{o}" for i, o in pairs],
        "batch_sizes": list(sizes) if sizes else "each device's default (docs/generation.md)",
    }
    return Sweep(selection=selection, cells=cells, preset=sel.preset.name)


def _and(values) -> str:
    """1, 8 and 64."""
    words = [str(v) for v in values]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


def _pairs(scale: str) -> str:
    return ", ".join(f"{i}/{o}" for i, o in LENGTHS[scale])


# What the suite does when an option is not given, said from the values it uses
# (docs/running.md's table and the help are made from these).
DEFAULT_BATCHES = (
    f"{_and(BATCHES['full'])} (on an accelerator {_and(ACCELERATOR_BATCHES['full'])}), "
    f"smoke {_and(BATCHES['smoke'])} (on an accelerator {_and(ACCELERATOR_BATCHES['smoke'])})"
)
DEFAULT_PRECISIONS = (
    f"fp32, and on an accelerator {_and([p for p in ACCELERATOR_PRECISIONS if p != 'fp32'])} "
    "beside it where the framework decodes in it"
)

# Its own options (xfbench/options.py says what each field is).
OPTIONS = (
    options.Option(
        name="lengths",
        values="generation suite: prompt/new token pairs (ISL/OSL), comma-separated, e.g. "
        "`128/128,256/64`; prompt and new tokens together at most GPT-2's 1,024 positions "
        "(smoke size: 64)",
        # token-serving's own (token_serving/cell.py: LENGTHS, FULL_LENGTHS), which this
        # layer may not import: tests/test_docs_code.py holds them together
        default=f"{_pairs('full')} (smoke preset: {_pairs('smoke')}); token-serving, one pair: "
        "quick 32/32 (on an accelerator 128/128), smoke 8/8, the others 128/128",
        run=options.TAKEN,
        metavar="ISL/OSL",
    ),
)


SUITE: Suite = declare(
    Suite(
        name="generation",
        param="generation_cell",
        files=("test_generation.py",),
        cells=lambda metafunc: SUITE.selection(metafunc.config).cells(),
        cell_type=GenerationCell,
        sweep=Swept(
            plan=sweep,
            about="GPT-2's token generation: TTFT, TPOT, tokens/s",
            seconds=estimate.seconds,
        ),
        select=select,
        summary=Summary(
            title="xfbench generation: GPT-2 greedy decoding with a key/value cache "
            "(TTFT, TPOT, tokens/s)",
            table=lambda records: generation_table(records),
        ),
        tasks=(TASK,),
        options=SuiteOptions(
            own=OPTIONS,
            takes=("model", "mode", "precision", "batch-size"),
            notes={
                "model": options.Note(
                    takes="only " + ", ".join(f"`{n}`" for n in NETWORKS),
                    default=", ".join(f"`{n}`" for n in DEFAULT_NETWORKS),
                ),
                "mode": options.Note(
                    takes="`loop` too (JAX; PyTorch on CUDA)",
                    default="every mode that generates there",
                ),
                "precision": options.Note(default=DEFAULT_PRECISIONS),
                "batch-size": options.Note(
                    takes="sequences decoded together, one or more sizes",
                    default=DEFAULT_BATCHES,
                ),
            },
            own_rules=("batch_size", "model"),
            modes=MODES,
        ),
        gpu=GpuPart(steps=gpu_steps.steps, parts=gpu_steps.PARTS, timed=timed_version),
        kinds=(KIND,),
        report="xfbench.generation.report",
    )
)
records.declare_kind(KIND, record_fields.GENERATION)


def pytest_addoption(parser):
    options.add_pytest_options(parser, OPTIONS)


@pytest.fixture
def run_generation(request, benchmark):
    """Decode one cell's sequences: skip with the reason when it cannot run here."""
    config = request.config
    chosen = SUITE.selection(config)

    def run(cell: GenerationCell) -> dict:
        threads_config = threads_configured(config, cell)
        benchmark.group = f"generate {cell.network} b{cell.batch_size} " + (
            f"{cell.prompt_tokens}/{cell.new_tokens}"
        )
        return measured(
            SUITE.records(config),
            cell,
            lambda: measure(
                benchmark,
                cell,
                preset=chosen.selection.preset,
                threads_config=threads_config,
            ),
            one_line=(memory.TooLarge, TokensDiverged),
        )

    return run
