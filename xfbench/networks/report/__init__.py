"""The network suite's part of the report (xfbench/report/suites.py): it reads its cells
(cells.py) and lays out Table 7's own sections (table7.py)."""

from __future__ import annotations

from xfbench.networks.report import cells, table7
from xfbench.report.api import Hooks

# Its part of the report (xfbench/report/suites.py says what each hook is).
REPORT = Hooks(
    read=cells.read,
    read_failure=cells.read_failure,
    cells=True,
    workloads={"train": "training", "infer": "inference"},
    sections=table7.sections,
)
