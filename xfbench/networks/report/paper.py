"""Shi et al. 2016, Table 7: the paper's own seconds per mini-batch (data/shi2016_table7.csv).

Our networks map to the paper's rows through the models' Spec.table7_row
(fcn5 -> FCN-S, ..., lstm32 -> LSTM); networks without a paper row get none.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CSV = Path(__file__).parent / "data" / "shi2016_table7.csv"


@dataclass(frozen=True)
class PaperTable:
    columns: tuple[str, ...]  # csv column names, in order
    labels: tuple[str, ...]  # the same, for a reader
    rows: dict[str, list[tuple[str, dict[str, float]]]]  # paper row -> [(tool, {column: s})]
    batch: dict[str, int]  # paper row -> its mini-batch
    machines: str  # the header line describing the machines


# The paper's tools as they were in 2016; "Torch" there is Lua Torch7, not PyTorch.
TOOL_LABELS = {"Torch": "Torch7 (Lua)"}


def tool_label(tool: str) -> str:
    """Caffe -> 'Caffe, 2016'; Torch -> 'Torch7 (Lua), 2016'."""
    return f"{TOOL_LABELS.get(tool, tool)}, 2016"


def aligned(values: dict[str, float], machine: str, threads: int) -> float | None:
    """The paper's seconds for one tool on its machine ("desktop" or "server") at this
    thread count, or None where the paper has no such column."""
    return values.get(f"{machine}_t{threads}")


def column_label(column: str) -> str:
    """desktop_t4 -> 'desktop 4t', gtx1080 -> 'GTX 1080'."""
    m = re.fullmatch(r"(desktop|server)_t(\d+)", column)
    if m:
        return f"{m[1]} {m[2]}t"
    return {"gtx980": "GTX 980", "gtx1080": "GTX 1080", "k80": "K80"}.get(column, column)


@lru_cache(maxsize=1)
def table() -> PaperTable:
    lines = CSV.read_text(encoding="utf-8").splitlines()
    comments = [line.lstrip("# ") for line in lines if line.startswith("#")]
    body = [line for line in lines if line.strip() and not line.startswith("#")]
    reader = csv.DictReader(body)
    columns = tuple(c for c in reader.fieldnames if c not in ("network", "tool"))
    rows: dict[str, list] = {}
    for rec in reader:
        values = {c: float(rec[c]) for c in columns if rec[c].strip()}
        rows.setdefault(rec["network"], []).append((rec["tool"], values))
    sizes = next((c for c in comments if c.startswith("Mini-batch sizes:")), "")
    batch = {name: int(n) for name, n in re.findall(r"([\w-]+) (\d+)", sizes.split(":", 1)[-1])}
    machines = next((c for c in comments if c.startswith("desktop =")), "")
    return PaperTable(
        columns=columns,
        labels=tuple(column_label(c) for c in columns),
        rows=rows,
        batch=batch,
        machines=machines,
    )


def paper_row(network: str) -> str | None:
    """The Table 7 row of one of our networks, or None (unknown network, or no paper row)."""
    from xfbench.models import get_spec  # the specs are light: numpy only

    try:
        return get_spec(network).table7_row
    except (KeyError, ValueError):
        return None
