"""What a suite's report module (xfbench/<suite>/report.py, or its package
xfbench/<suite>/report/) uses of the report: its one door into xfbench/report/ (tests/test_layering.py holds the suites to it). The plotting
names load matplotlib on first use (a module __getattr__), so a report module imports no
plotting library until it draws."""

from __future__ import annotations

from xfbench.report import procurement
from xfbench.report.anchors import matches as published_matches
from xfbench.report.equivalence import mark as verified_mark
from xfbench.report.files import plain
from xfbench.report.gpu_models import Workload
from xfbench.report.load import (
    Entry,
    Result,
    Run,
    cell_result,
    failure_result,
    integer,
    round_times,
    scored_failure,
    scored_result,
)
from xfbench.report.model import (
    Machine,
    Report,
    achieved_tflops,
    dtype_name,
    format_seconds,
    interval,
    measured_peaks,
    network_title,
    plus_minus,
)
from xfbench.report.noise import floor as noise_floor
from xfbench.report.roofline import roofs
from xfbench.report.runs import machine_groups, ratio_over_runs
from xfbench.report.sections import Part, table_section
from xfbench.report.suites import Anchors, FromOutput, FromSweeps, Hooks, Table7
from xfbench.report.table import Table, Text, as_text, number_text, plural
from xfbench.report.tables import legend_caption

__all__ = [
    "Result",
    "achieved_tflops",
    "measured_peaks",
    "plus_minus",
    "verified_mark",
    "Entry",
    "Anchors",
    "FromOutput",
    "FromSweeps",
    "Hooks",
    "Table7",
    "Machine",
    "Part",
    "Report",
    "Run",
    "Table",
    "Text",
    "Workload",
    "as_text",
    "cell_result",
    "dtype_name",
    "failure_result",
    "format_seconds",
    "integer",
    "interval",
    "legend_caption",
    "machine_groups",
    "network_title",
    "noise_floor",
    "number_text",
    "plain",
    "plural",
    "procurement",
    "published_matches",
    "ratio_over_runs",
    "round_times",
    "roofs",
    "scored_failure",
    "scored_result",
    "table_section",
]
# report/plots.py's names a suite draws with
PLOTTING = ("COLORS", "MARKERS", "SIZE", "STYLES", "place_legend", "plt", "safely", "save_figure")


def __getattr__(name: str):
    if name in PLOTTING:
        from xfbench.report import plots

        return getattr(plots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
