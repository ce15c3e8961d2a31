"""A token-serving cell: a generation cell (GPT-2, framework, mode, precision, device,
threads, largest batch, ISL/OSL) under one of LoadGen's scenarios in token mode; the
scenarios, their defaults per preset and the TTFT/TPOT bounds."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from xfbench import command_line
from xfbench.errors import UsageError
from xfbench.generation.cell import GenerationCell
from xfbench.generation.cell import lengths as generation_lengths
from xfbench.harness.selection import Selection, option_list

TASK = "serve-tokens"
KIND = "token_serving"  # the kind of record its cells write (its fields: fields.py)
# LoadGen's scenarios for a language model, in the order a cell's scenarios run and every
# table shows them. MultiStream (8 samples per query) is an image scenario: MLPerf runs no
# LLM under it. MLPerf's "interactive" is Server with tighter bounds (--ttft-bound,
# --tpot-bound), not a scenario of LoadGen's.
SCENARIOS = ("SingleStream", "Server", "Offline")
METRIC = {
    "SingleStream": "p90 TTFT and p90 TPOT of one query at a time, sent back to back",
    "Server": "the highest Poisson arrival rate (queries/s) whose p99 TTFT and p99 TPOT meet "
    "the bounds, and its tokens/s",
    "Offline": "tokens/s with every query issued at once",
}
IDS = {s: s.lower() for s in SCENARIOS}
BY_ID = {v: k for k, v in IDS.items()}

# MLPerf Inference's Server bounds for llama3.1-8b (p99 TTFT 2,000 ms, p99 TPOT 100 ms);
# its "interactive" setting is 500 ms and 30 ms. --ttft-bound and --tpot-bound replace them.
TTFT_BOUND_MS, TPOT_BOUND_MS = 2000.0, 100.0
BOUNDS_SOURCE = "MLPerf Inference's llama3.1-8b Server bounds (p99 TTFT 2 s, p99 TPOT 100 ms)"

# (prompt tokens, new tokens) per preset when --lengths is not given. Server's static
# batches make a query wait for the batch before it, prefill and decode: on 2 cores at
# 128/128 a batch of 8 takes about 5 s, which no 2 s TTFT bound survives, and LoadGen's
# SingleStream needs at least 64 queries for its p90 (minutes at 128/128). The quick
# preset serves 32/32 (a batch of 8 in about 1 s there); paper and the training presets
# 128/128, the generation suite's lengths; smoke 8/8 on the smoke network.
# An accelerator serves the generation suite's 128/128 at every full-size preset.
LENGTHS = {"smoke": (8, 8), "quick": (32, 32)}
FULL_LENGTHS = (128, 128)
# The largest batch the SUT runs (Offline's and Server's bucket) when --batch-size is not
# given; an accelerator's decode stays bandwidth-bound far beyond 8 (the decode roofline).
BATCH = {"full": 8, "smoke": 2}
ACCELERATOR_BATCH = {"full": 64, "smoke": 2}


@dataclass(frozen=True, kw_only=True)
class TokenServingCell(GenerationCell):
    """batch_size is the largest static batch the SUT runs (Offline's and Server's
    bucket); each scenario's buckets are scenarios.batching's."""

    task: str = TASK
    scenario: str = "SingleStream"

    @property
    def id(self) -> str:
        return f"{super().id}-{IDS[self.scenario]}"

    def bucket_cell(self, batch: int) -> GenerationCell:
        """The generation cell of one bucket: this cell at that batch."""
        own = {f.name: getattr(self, f.name) for f in fields(GenerationCell)}
        return GenerationCell(**{**own, "batch_size": batch, "task": "generate"})


def scenarios(value: str | None) -> list[str]:
    """--scenario: LoadGen's names of the language-model scenarios, any case; default all."""
    items = option_list("scenario", value)
    if not items:
        return list(SCENARIOS)
    out = []
    for item in items:
        name = BY_ID.get(item.lower())
        if name is None:
            raise UsageError(
                f"scenario {item!r} does not serve tokens; valid: {', '.join(SCENARIOS)} "
                "(MLPerf runs no language model under MultiStream)"
            )
        out.append(name)
    return [s for s in SCENARIOS if s in out]


def lengths(value: str | None, preset: str, scale: str, device: str = "cpu") -> tuple[int, int]:
    """--lengths: one prompt/new token pair (a token-serving run serves one); default the
    preset's on the device's kind."""
    if value is None:
        if scale != "full":
            return LENGTHS["smoke"]
        return LENGTHS.get(preset, FULL_LENGTHS) if device == "cpu" else FULL_LENGTHS
    pairs = generation_lengths(value, scale)
    if len(pairs) > 1:
        raise UsageError("--lengths: the token-serving suite serves one ISL/OSL pair a run")
    return pairs[0]


def batch(value: str | None, scale: str, device: str = "cpu") -> int:
    """--batch-size: the largest static batch, one size (default: the device kind's)."""
    items = option_list("batch-size", value)
    if not items:
        return (BATCH if device == "cpu" else ACCELERATOR_BATCH)[scale]
    if len(items) > 1 or not items[0].isdigit() or int(items[0]) < 1:
        raise UsageError(
            f"--batch-size: the token-serving suite takes one largest batch, a whole number "
            f"above 0, not {value!r}"
        )
    return int(items[0])


def bounds(ttft: str | None, tpot: str | None) -> tuple[float, float, str]:
    """--ttft-bound and --tpot-bound in ms (default: MLPerf's llama3.1-8b), and their source."""
    given = [
        command_line.number(f"--{name}", v, what="a number of milliseconds")
        if v is not None
        else None
        for name, v in (("ttft-bound", ttft), ("tpot-bound", tpot))
    ]
    source = BOUNDS_SOURCE if given == [None, None] else "--ttft-bound, --tpot-bound"
    if given != [None, None] and None in given:
        source = "--ttft-bound" if given[0] is not None else "--tpot-bound"
        source += f" (the other: {BOUNDS_SOURCE})"
    return (
        given[0] if given[0] is not None else TTFT_BOUND_MS,
        given[1] if given[1] is not None else TPOT_BOUND_MS,
        source,
    )


def expand(sel: Selection, chosen: list[str], given: dict) -> list[TokenServingCell]:
    """Every token-serving cell: each generation cell of the selection (at the largest
    batch, ISL/OSL: given's `lengths` and `batch_size` options, else each device's
    defaults) under each scenario."""
    from xfbench.generation.cell import expand as generation_cells

    out = []
    for device in sel.devices:
        one = replace(sel, devices=(device,))
        pair = lengths(given.get("lengths"), sel.preset.name, sel.preset.scale, device)
        largest = batch(given.get("batch_size"), sel.preset.scale, device)
        for c in generation_cells(one, [pair], [largest]):
            own = {f.name: getattr(c, f.name) for f in fields(GenerationCell) if f.name != "task"}
            out += [TokenServingCell(**own, scenario=s) for s in chosen]
    return out
