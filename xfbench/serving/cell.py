"""A serving cell: an inference cell (network, framework, mode, precision, device,
threads, largest batch) under one LoadGen scenario, and the cells a selection expands to."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from xfbench.adapters import Cell
from xfbench.errors import UsageError
from xfbench.harness.selection import Selection, cells, option_list
from xfbench.serving.scenarios import BY_ID, IDS, SCENARIOS

TASK = "serve"
KIND = "serving"  # the kind of record its cells write (its fields: fields.py)
# The networks a serving run measures when --model is not given: MLPerf Inference's image
# classifier and Shi's CIFAR-10 ResNet, both quick enough for a Server search on a small CPU.
DEFAULT_NETWORKS = ("resnet56", "resnet50")


@dataclass(frozen=True, kw_only=True)
class ServingCell(Cell):
    """batch_size is the largest batch the SUT runs (Offline's and Server's bucket)."""

    task: str = TASK
    scenario: str = "SingleStream"

    @property
    def id(self) -> str:
        return f"{super().id}-{IDS[self.scenario]}"

    def bucket_cell(self, batch: int) -> Cell:
        """The infer cell of one bucket: this cell at that batch."""
        own = {f.name: getattr(self, f.name) for f in fields(Cell)}
        return Cell(**{**own, "batch_size": batch, "task": "infer"})

    def as_dict(self) -> dict:
        return asdict(self)


def scenarios(value: str | None) -> list[str]:
    """--scenario: LoadGen's names, any case (SingleStream or singlestream); default all."""
    items = option_list("scenario", value)
    if not items:
        return list(SCENARIOS)
    out = []
    for item in items:
        name = BY_ID.get(item.lower())
        if name is None:
            raise UsageError(f"unknown scenario {item!r}; valid: {', '.join(SCENARIOS)}")
        out.append(name)
    return [s for s in SCENARIOS if s in out]


def expand(sel: Selection, chosen: list[str]) -> list[ServingCell]:
    """Every serving cell: each inference cell of the selection under each scenario."""
    out = []
    for c in cells(sel, "infer"):
        base = {f.name: getattr(c, f.name) for f in fields(Cell) if f.name != "task"}
        out += [ServingCell(**base, scenario=s) for s in chosen]
    return out
