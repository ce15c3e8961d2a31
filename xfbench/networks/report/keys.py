"""Where a cell of Table 7 stands: its block (one network at one batch size), its row (the
way the network was run) and its column within one machine (CPU threads or the device),
and how each is headed."""

from __future__ import annotations

from typing import Any

from xfbench.frameworks import display
from xfbench.report.api import Result

# A row of Table 7: the way a network was run.
RowKey = tuple[str, str, str, str]  # framework, mode, precision, data
# A block of Table 7: one network at one batch size.
BlockKey = tuple[str, str, int, str]  # task, network, batch_size, scale
# A column within one machine: ("cpu", threads) or ("acc", device_name).
ColKey = tuple[str, Any]


def block_key(r: Result) -> BlockKey:
    return (r.task, r.network, r.batch_size, r.scale)


def row_key(r: Result) -> RowKey:
    return (r.framework, r.mode, r.precision, r.data)


def col_key(r: Result) -> ColKey:
    return ("acc", r.device_name) if r.accelerator else ("cpu", r.threads)


def row_label(key: RowKey) -> str:
    framework, mode, precision, data = key
    parts = (
        [display(framework), mode]
        + ([precision] if precision != "fp32" else [])
        + ([f"data {data}"] if data != "resident" else [])
    )
    return " ".join(parts)


def col_label(key: ColKey) -> str:
    kind, what = key
    return f"{what}t" if kind == "cpu" else str(what)


def col_order(key: ColKey):
    return (0, key[1], "") if key[0] == "cpu" else (1, 0, str(key[1]))
