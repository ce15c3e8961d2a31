"""The network suite's part of the report (xfbench/report/suites.py): it reads its cells
(cells.py) and lays out Table 7's sections: its own among the suites' (table7.py), what
is faster (compared.py), what money buys (procurement.py) and its plots (plots.py) at the
report's other places; report.csv (table7_csv.py); its training cells beside the published
anchors (anchors.py).
What they lay out it derives once per report (model.py: Table 7's blocks, each cell's
figures, the failed cells' footnotes, summaries against the base machine, buys)."""

from __future__ import annotations

from pathlib import Path

from xfbench.networks.report import (
    anchors,
    cells,
    compared,
    model,
    plots,
    procurement,
    table7,
    table7_csv,
)
from xfbench.report.api import (
    Anchors,
    FromSweeps,
    Hooks,
    Part,
    Report,
    Table7,
    table_section,
)


def after_scores(report: Report, drawn: list[tuple[str, Path]]) -> list[Part]:
    """The answers first: what money buys, then the fastest per network, in one run and
    over runs."""
    return [
        *table_section(procurement.procurement_summary(report)),
        *table_section(compared.fastest_table(report)),
        *table_section(compared.fastest_over_runs_table(report)),
    ]


def after_machines(report: Report, drawn: list[tuple[str, Path]]) -> list[Part]:
    """The machines compared, cell by cell."""
    return table_section(compared.machines_compared_table(report))


def after_roofline(report: Report, drawn: list[tuple[str, Path]]) -> list[Part]:
    """What money buys, network by network."""
    return table_section(procurement.procurement_table(report))


def after_anchors(report: Report, drawn: list[tuple[str, Path]]) -> list[Part]:
    """Its plots (plots.py draws them)."""
    return [Part(title="Plots", plots=drawn)] if drawn else []


# Its part of the report (xfbench/report/suites.py says what each hook is).
REPORT = Hooks(
    read=cells.read,
    read_failure=cells.read_failure,
    table7=Table7(csv=table7_csv.table, cells=cells.timed_cells),
    build=model.build,
    gpu_workloads=model.gpu_workloads,
    scored=cells.cells_of,  # every cell, timed or failed
    workloads={"train": "training", "infer": "inference"},
    sections={
        "suites": table7.sections,
        "after_scores": after_scores,
        "after_machines": after_machines,
        "after_roofline": after_roofline,
        "after_anchors": after_anchors,
    },
    plots=plots.draw,
    anchors=Anchors(anchors.ANCHORS, anchors.anchor_matches),
    acceptance={"ResNet-50 training": FromSweeps(anchors.resnet50_training)},
)
