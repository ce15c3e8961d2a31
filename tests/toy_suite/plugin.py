"""The toy suite's declaration: its cells (summing a range of integers in Python, a size
each), its sweep, its record kind and fields, its estimate, its summary and its report
(toy_suite/report.py), and the fixture that measures a cell."""

from __future__ import annotations

import os
import statistics
from dataclasses import asdict, dataclass

import pytest

from xfbench import records
from xfbench.harness.sweeps import thread_counts
from xfbench.plugin import Suite, Summary, Sweep, Swept, declare, measured
from xfbench.records import Field

TASK = "toy"
KIND = "toy"  # the kind of record its cells write, declared with the suite
SIZES = (1_000, 10_000)


@dataclass(frozen=True)
class ToyCell:
    size: int
    framework: str = "null"  # xfbench's own framework of no work (adapters/null)
    device: str = "cpu"
    threads: int = 1
    network: str = "toy"
    task: str = TASK

    @property
    def id(self) -> str:
        return f"sum-{self.size}"

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ToyCell:
        return cls(**{k: d[k] for k in ("size", "framework", "device", "threads", "network")})


def sweep(opts: dict) -> Sweep:
    counts = thread_counts(opts.get("threads"))
    cells = [ToyCell(size=n, threads=counts[0]) for n in SIZES]
    return Sweep(selection={"suite": "toy", "sizes": list(SIZES)}, cells=cells, preset="smoke")


def table(found: list[dict]) -> str:
    return "\n".join(f"sum of {r['size']}: {r.get('seconds', r.get('status'))}" for r in found)


FIELDS = (
    Field("size", "int", "the integers summed"),
    Field("framework", "str", "null"),
    Field("device", "str", "cpu"),
    Field("threads", "int", "the thread count the cell was given"),
    Field("network", "str", "toy"),
    Field("task", "str", "toy"),
    Field("status", "str", "ok"),
    Field("seconds", "float", "the median of the timed sums"),
    records.PID,
)

SUITE = declare(
    Suite(
        name="toy",
        param="toy_cell",
        cells=lambda metafunc: [ToyCell(size=n) for n in SIZES],
        files=(os.path.join(os.path.dirname(__file__), "toy_tests.py"),),
        cell_type=ToyCell,
        sweep=Swept(plan=sweep, about="", seconds=lambda cell, preset: 0.5),
        summary=Summary(title="toy: seconds to sum a range", table=table),
        tasks=(TASK,),
        kinds=(KIND,),
        report="toy_suite.report",
    )
)
records.declare_kind(KIND, FIELDS)


@pytest.fixture
def run_toy(request, benchmark):
    def run(cell: ToyCell) -> dict:
        def measure() -> dict:
            benchmark.pedantic(sum, args=(range(cell.size),), rounds=5, iterations=1)
            seconds = statistics.median(benchmark.stats.stats.data)
            record = {**records.header(KIND), **cell.as_dict(), "status": "ok", "seconds": seconds}
            benchmark.extra_info.update(record)
            return record

        return measured(SUITE.records(request.config), cell, measure)

    return run
