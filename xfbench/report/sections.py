"""The report's sections, declared once, in the order every format shows them: each a
function of the report and its plots giving Parts (a heading, a caption, tables, numbered
footnotes or a list, plots), which the Markdown and HTML renderers draw alike. A suite's
own kind of result brings its sections itself (report/suites.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from xfbench.report import (
    anchors,
    gpu_models,
    roofline,
    runs,
    suites,
    tables,
)
from xfbench.report.model import Report
from xfbench.report.table import Table


@dataclass
class Part:
    """One part of a report: an optional heading (level 2) and caption, its tables (their
    own headings at `level`), footnotes numbered as its cells cite them or a plain list,
    each under its title, and plots."""

    title: str = ""
    caption: str = ""
    tables: list[Table] = field(default_factory=list)
    level: int = 3
    notes_title: str = ""
    notes: list[tuple[int, str]] = field(default_factory=list)
    items_title: str = ""
    items: list[str] = field(default_factory=list)
    plots: list[tuple[str, Path]] = field(default_factory=list)


def table_section(table: Table | None) -> list[Part]:
    """A table that is a section of its own (its heading at level 2), where there is one."""
    return [Part(tables=[table], level=2)] if table else []


def _roofline(report: Report, plots: dict) -> list[Part]:
    found = roofline.tables(report)
    return [Part(title="Roofline", tables=found, plots=plots.get("roofline", []))] if found else []


def _left_out(report: Report, plots: dict) -> list[Part]:
    return [Part(title="Left out", items=list(report.problems))] if report.problems else []


def _placed(place: str) -> Callable[[Report, dict], list[Part]]:
    """The sections the suites put at one place of the report (report/suites.py PLACES), in
    the order they are declared."""
    PLACED.append(place)

    def placed_sections(report: Report, plots: dict) -> list[Part]:
        return [
            part
            for suite in suites.declared()
            if place in suite.hooks.sections
            for part in suite.hooks.sections[place](report, plots.get(suite.name, []))
        ]

    return placed_sections


PLACED: list[str] = []  # the places SECTIONS shows (each of suites.PLACES, once)
SECTIONS: tuple[Callable[[Report, dict], list[Part]], ...] = (
    lambda r, p: table_section(tables.answer_table(r)),  # the answer first: the scores
    lambda r, p: table_section(runs.scores_table(r)),  # and over several runs of one machine
    _placed("after_scores"),  # then what money buys, what is fastest
    lambda r, p: table_section(tables.machines_table(r)),
    _placed("after_machines"),
    lambda r, p: table_section(gpu_models.gpu_models_table(r)),
    _placed("suites"),  # the suites' own sections
    _roofline,
    _placed("after_roofline"),
    lambda r, p: table_section(anchors.anchors_table(r)),
    _placed("after_anchors"),
    _left_out,
)


if PLACED != list(suites.PLACES):  # a place a suite may declare is one the report shows
    raise RuntimeError(f"report sections: places {PLACED}, declared {list(suites.PLACES)}")


def parts(report: Report, plots: dict) -> list[Part]:
    """Every part of the report, in its order."""
    return [part for section in SECTIONS for part in section(report, plots)]
