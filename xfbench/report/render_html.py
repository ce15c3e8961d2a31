"""Self-contained HTML: one file, plots inline as base64 PNG, every string from a JSON
file escaped by Jinja2's autoescape."""

from __future__ import annotations

import base64
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from xfbench.report import anchors, roofline, scaling_tables, serving, tables
from xfbench.report.model import Report

ENV = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _png(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def render(report: Report, plots: dict, generated: str) -> str:
    sections = {
        "machines": tables.machines_table(report),
        "backends": tables.backends_table(report),
        "fastest": tables.fastest_table(report),
        "procurement_summary": tables.procurement_summary(report),
        "answer": tables.answer_table(report),
        "compared": tables.machines_compared_table(report),
        "compact": tables.compact_table7(report),
        "summary": tables.summary_table(report),
        "table7": [
            tables.table7(b, [m.label for m in report.machines], [m.tag for m in report.machines])
            for b in report.blocks
        ],
        "footnotes": tables.footnote_lines(report),
        "details": [t for t in (tables.details_table(report, b) for b in report.blocks) if t],
        "procurement": tables.procurement_table(report),
        "copies": tables.copies_table(report),
        "gemm": tables.gemm_table(report),
        "anchors": anchors.anchors_table(report),
        "plots": [
            (caption, _png(path))
            for kind in ("threads", "accelerators", "gemm")
            for caption, path in plots[kind]
        ],
        "problems": report.problems,
        "scaling": scaling_tables.scaling_tables(report),
        "scaling_caption": scaling_tables.CAPTION,
        "efficiency_plots": [
            (caption, _png(path)) for caption, path in plots.get("efficiency", [])
        ],
        "allreduce": scaling_tables.allreduce_tables(report),
        "allreduce_caption": scaling_tables.ALLREDUCE_CAPTION,
        "busbw_plots": [(caption, _png(path)) for caption, path in plots.get("busbw", [])],
        "scaling_failures": scaling_tables.failure_lines(report),
        "serving": serving.tables(report),
        "serving_caption": serving.CAPTION,
        "serving_failures": serving.failure_lines(report),
        "serving_plots": [(caption, _png(path)) for caption, path in plots.get("serving", [])],
        "roofline": roofline.tables(report),
        "roofline_plots": [(caption, _png(path)) for caption, path in plots.get("roofline", [])],
    }
    return ENV.get_template("report.html.j2").render(generated=generated, **sections)
