"""The token-serving table: one row per cell, in scenario order (the terminal summary and
the report)."""

from __future__ import annotations

from xfbench.generation.table import lead as generation_lead
from xfbench.serving.table import validity
from xfbench.token_serving.cell import SCENARIOS

HEADERS = [
    "framework",
    "mode",
    "precision",
    "device",
    "threads",
    "batch",
    "prompt/new",
    "scenario",
    "TTFT ms",
    "TPOT ms",
    "QPS",
    "tokens/s",
    "LoadGen",
]


def _num(value, spec: str = ".4g") -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    return format(value, spec)


def latencies(r: dict) -> tuple[str, str]:
    """The scenario's TTFT and TPOT, labelled by percentile: SingleStream's p90s, Server's
    p99s (the bounds'), Offline's p90s (every query issued at once: its TTFT is mostly
    the wait for the batches before it)."""
    p = "99" if r.get("scenario") == "Server" else "90"
    return (
        _num(r.get(f"ttft_p{p}_ms")) and f"p{p} {_num(r.get(f'ttft_p{p}_ms'))}",
        _num(r.get(f"tpot_p{p}_ms")) and f"p{p} {_num(r.get(f'tpot_p{p}_ms'))}",
    )


def row(r: dict) -> list[str]:
    lead = [*generation_lead(r), str(r.get("scenario", ""))]
    if r.get("status", "ok") != "ok":
        return lead + ["", "", "", "", validity(r)]
    ttft, tpot = latencies(r)
    qps = r.get("server_qps") if r.get("scenario") == "Server" else r.get("qps")
    none = "none" if r.get("scenario") == "Server" and qps is None else ""
    return lead + [ttft, tpot, _num(qps) or none, _num(r.get("tokens_per_s")), validity(r)]


def ordered(records: list[dict]) -> list[dict]:
    order = {s: i for i, s in enumerate(SCENARIOS)}
    return sorted(
        records,
        key=lambda r: (
            str(r.get("device")),
            int(r.get("prompt_tokens") or 0),
            int(r.get("threads") or 0),
            str(r.get("framework")),
            str(r.get("mode")),
            order.get(r.get("scenario"), 99),
        ),
    )


def token_serving_table(records: list[dict]) -> str:
    from tabulate import tabulate

    return tabulate([row(r) for r in ordered(records)], headers=HEADERS, disable_numparse=True)
