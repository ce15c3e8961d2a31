"""Published numbers beside ours where the device matches (xfbench/published.toml).

An anchor is one published measurement: ResNet-50 training images/s, or a transformer's
training tokens/s, on one GPU at a precision, or one square GEMM's TFLOP/s. The report
lists, for every one of our cells on a GPU of the anchor's model (by its exact name:
xfbench.published.gpu_for), our number, the published one and their ratio, with the
publisher's setting and source: a ratio far below 1 on the same GPU says to suspect our
adapter first. Nothing is shown where no device matches (a CPU-only run).
"""

from __future__ import annotations

from dataclasses import dataclass

from xfbench.published import Anchor, anchors
from xfbench.report import suites
from xfbench.report.model import Report
from xfbench.report.table import Table, as_text


@dataclass
class Match:
    anchor: Anchor
    machine: str
    device_name: str
    what: str  # our framework / mode, or a suite's implementation
    ours: float  # in the anchor's unit
    ours_setting: str  # our batch or size, so a reader sees how the two differ
    utilisation: str = ""  # what share of the GPU's peak ours is, where a suite says

    @property
    def ratio(self) -> str:
        """Ours over the published value (over each end of a published range)."""
        low = self.ours / self.anchor.value
        if self.anchor.high:
            return f"{self.ours / self.anchor.high:.2f}-{low:.2f}x"
        return f"{low:.2f}x"


def matches(report: Report) -> list[Match]:
    """Every measurement of ours beside an anchor of its kind, from the suite that declares
    the kind (report/suites.py: Hooks.anchors)."""
    found = []
    for a in anchors():
        for m in report.machines:
            for suite in suites.declared():
                declared = suite.hooks.anchors
                if declared and a.kind in declared.titles:
                    found += [
                        Match(anchor=a, machine=m.short, **ours) for ours in declared.matches(m, a)
                    ]
    return found


def _measurement(kind: str) -> str:
    """What a table calls the measurement of an anchor's kind."""
    titles = (
        s.hooks.anchors.titles[kind]
        for s in suites.declared()
        if s.hooks.anchors and kind in s.hooks.anchors.titles
    )
    return next(titles, kind)


def anchors_table(report: Report) -> Table | None:
    found = matches(report)
    if not found:
        return None
    several = len(report.machines) > 1
    rows = [
        ([as_text(f.machine)] if several else [])
        + [
            as_text(f.device_name),
            as_text(f"{_measurement(f.anchor.kind)}, {f.anchor.precision}"),
            as_text(f.what),
            as_text(
                f"{f.ours:.4g} {f.anchor.unit} ({f.ours_setting})"
                + (f"; {f.utilisation}" if f.utilisation else "")
            ),
            as_text(f.anchor.published),
            as_text(f.ratio),
            as_text(f"{f.anchor.setting}. Source: {f.anchor.source}"),
        ]
        for f in found
    ]
    return Table(
        "Beside published numbers",
        (["machine"] if several else [])
        + [
            "device",
            "measurement",
            "ours by",
            "ours",
            "published",
            "ours / published",
            "published setting and source",
        ],
        rows,
        caption="Published measurements on the same GPU model (xfbench/published.toml). Their "
        "settings differ from our cells (batch size, data pipeline, tuning): read a ratio "
        "far below 1 as a reason to check our adapter, not as a verdict.",
        anchor="anchors",
        text_cols=4 if several else 3,
    )
