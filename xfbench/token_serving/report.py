"""The token-serving suite's part of the report (xfbench/report/suites.py): every
token-serving cell per machine (LoadGen's numbers and verdict), its failed cells,
report-token-serving.csv, and what generated tokens cost where a prices file prices a
machine (over generation's cells and these)."""

from __future__ import annotations

from xfbench.generation import report as generation
from xfbench.generation.report import CELL_COLUMNS, measured
from xfbench.report.api import Hooks, Part, Report, Table, Text, procurement
from xfbench.token_serving import table as served
from xfbench.token_serving.cell import KIND


def sections(report: Report, plots: list) -> list[Part]:
    found, failures = tables(report), generation.failure_lines(report, KIND)
    cost = procurement_table(report)
    parts = [Part(tables=[cost], level=2)] if cost else []
    if not (found or failures):
        return parts
    serving = Part(
        title="Token serving (LoadGen)",
        tables=found,
        items_title="Token-serving cells that gave no number",
        items=failures,
    )
    return [serving, *parts]


def tables(report: Report) -> list[Table]:
    """Per machine: every token-serving cell, LoadGen's numbers and verdict."""
    out = []
    for m in report.machines:
        found = served.ordered(m.of(KIND))
        if not found:
            continue
        bounds = sorted(
            {
                (r.get("ttft_bound_ms"), r.get("tpot_bound_ms"))
                for r in found
                if "ttft_bound_ms" in r
            },
            key=str,
        )
        said = "; ".join(f"p99 TTFT {a:g} ms, p99 TPOT {b:g} ms" for a, b in bounds)
        out.append(
            Table(
                title="Token serving through LoadGen, GPT-2"
                + (f" on {m.label}" if len(report.machines) > 1 else ""),
                headers=served.HEADERS,
                rows=[[Text(c) for c in served.row(r)] for r in found],
                anchor=f"token-serving-{m.tag or 'A'}",
                caption=CAPTION + (f" Server's bounds: {said}." if said else ""),
                text_cols=len(served.HEADERS),
            )
        )
    return out


CAPTION = (
    "LoadGen in token mode (docs/token-serving.md): each sample's first token reported "
    "when its batch's prefill returns it. SingleStream: p90 TTFT and TPOT of one query at a "
    "time; Server: the highest Poisson rate whose p99 TTFT and p99 TPOT met the bounds, "
    "confirmed over enough queries for LoadGen's early stopping; Offline: tokens/s with "
    "every query issued at once. Static batches: a query waits for the batch before it."
)


COST_HEADERS = [
    "prompt/new",
    "machine",
    "fastest",
    "tokens/s",
    "tokens/s per $",
    "$ per million tokens",
    "tokens/s per W (typed power)",
    "J per token (measured)",
]


def procurement_table(report: Report) -> Table | None:
    """Where a prices file prices a machine: its fastest generation cell per ISL/OSL and
    its best token-serving throughput, per dollar and per watt."""
    rows = []
    for m in (m for m in report.machines if m.prices):
        for (isl, osl), (rate, r, how) in sorted(_fastest(m).items(), key=str):
            f = procurement.figures(rate, m.prices)
            rows.append(
                [Text(f"{isl}/{osl}"), Text(m.label)]
                + [Text(f"{r['framework']} {r['mode']} {r['device']}, {how}"), Text(f"{rate:.4g}")]
                + [Text(_num(f["samples_per_s_per_usd"], ".3g"))]
                + [Text(_num(f["usd_per_million_samples"], ".3g"))]
                + [Text(_num(f["samples_per_s_per_watt_typed"], ".3g"))]
                + [Text(_num(r.get("joules_per_token"), ".3g"))]
            )
    if not rows:
        return None
    return Table(
        title="What generated tokens cost",
        headers=COST_HEADERS,
        rows=rows,
        anchor="generation-procurement",
        caption="The prices file's figures (report/procurement.py) applied to output tokens: "
        "each machine's fastest generation cell or LoadGen run per prompt/new lengths. $ per "
        "million tokens uses the hourly price; typed power is the file's, never measured.",
        text_cols=8,
    )


def _fastest(m) -> dict[tuple, tuple]:
    """A machine's fastest output tokens/s per (prompt, new) lengths: (rate, record, how),
    over its generation cells and its LoadGen runs that met their bounds or ran Offline."""
    candidates = [
        (r, "output_tokens_per_s", f"batch {r.get('batch_size')}")
        for r in measured(m.of(generation.KIND))
    ] + [
        (r, "tokens_per_s", f"{r.get('scenario')} under LoadGen")
        for r in measured(m.of(KIND))
        if r.get("scenario") == "Offline" or r.get("server_qps")
    ]
    best: dict[tuple, tuple] = {}
    for r, key, how in candidates:
        rate = r.get(key)
        lengths = (r.get("prompt_tokens"), r.get("new_tokens"))
        if isinstance(rate, (int, float)) and rate > best.get(lengths, (0,))[0]:
            best[lengths] = (rate, r, how)
    return best


COLUMNS = CELL_COLUMNS + [
    "scenario",
    "status",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "tpot_p90_ms",
    "tpot_p99_ms",
    "tokens_per_s",
    "qps",
    "server_qps",
    "samples_per_s",
    "query_count",
    "validity",
    "early_stopping_met",
    "ttft_bound_ms",
    "tpot_bound_ms",
    "mean_batch",
    "compile_s",
    "check_s",
    "reason",
]


def csv_files(report: Report) -> list[tuple[str, list[str], list[dict]]]:
    return [("report-token-serving.csv", COLUMNS, csv_rows(report))]


def csv_rows(report: Report) -> list[dict]:
    return [
        {
            **{k: r.get(k) for k in COLUMNS},
            "machine": m.label,
            "status": r.get("status", "ok"),
        }
        for m in report.machines
        for r in m.of(KIND)
    ]


def _num(value, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) else ""


# Its part of the report (xfbench/report/suites.py says what each hook is).
REPORT = Hooks(sections={"suites": sections}, csv_files=csv_files)
