"""Self-contained HTML: one file, plots inline as base64 PNG, every string from a JSON
file escaped by Jinja2's autoescape."""

from __future__ import annotations

import base64
from dataclasses import replace
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from xfbench.report.model import Report
from xfbench.report.sections import parts

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
    shown = [
        replace(p, plots=[(caption, _png(path)) for caption, path in p.plots])
        for p in parts(report, plots)
    ]
    return ENV.get_template("report.html.j2").render(generated=generated, parts=shown)
