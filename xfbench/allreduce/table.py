"""The all-reduce tables: nccl-tests-style (one line per message size, one table per
pattern) and one row per cell (the end of a sweep)."""

from __future__ import annotations

from tabulate import tabulate

from xfbench.allreduce import PATTERNS

HEADERS = (
    "size (B)",
    "count (elements)",
    "type",
    "redop",
    "time (us)",
    "algbw (GB/s)",
    "busbw (GB/s)",
    "#wrong",
)


def _line(r: dict) -> list:
    if r.get("seconds") is None:
        return [
            r.get("bytes", ""),
            r.get("count", ""),
            r.get("dtype", ""),
            "sum",
            f"{r.get('status', 'failed')}: {r.get('reason', '')}"[:60],
            "",
            "",
            "",
        ]
    return [
        r["bytes"],
        r["count"],
        r["dtype"].replace("fp", "float"),
        "sum",
        f"{r['seconds'] * 1e6:.1f}",
        f"{r['algbw_gbps']:.3f}",
        f"{r['busbw_gbps']:.3f}",
        r.get("wrong", 0 if r.get("correct") else "?"),
    ]


def title(r: dict) -> str:
    return (
        f"{r['framework']} {r['backend']} {r['device']} ({r.get('device_name', '')}), "
        f"{r['world_size']} ranks: {r['pattern']}"
    )


def sweep_tables(rows: list[dict]) -> str:
    """Tables of one sweep (one framework, backend and world size), all-reduce first."""
    out = []
    others = sorted({r.get("pattern") for r in rows} - set(PATTERNS) - {None})
    for pattern in PATTERNS + tuple(others):
        mine = sorted((r for r in rows if r.get("pattern") == pattern), key=lambda r: r["bytes"])
        if mine:
            out.append(f"# {title(mine[0])}")
            out.append(
                tabulate(
                    [_line(r) for r in mine],
                    headers=HEADERS,
                    tablefmt="simple",
                    disable_numparse=True,
                    stralign="right",
                )
            )
    return "\n".join(out)


def _fmt(value, spec: str) -> str:
    return (
        format(value, spec)
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else ""
    )


# summary columns: the busbw of each pattern some sweep measured, at its largest size
ALLREDUCE_PATTERN_HEADERS = {
    "allreduce": "busbw GB/s all-reduce (largest)",
    "reduce_broadcast": "busbw GB/s reduce+broadcast",
    "parameter_server": "busbw GB/s parameter server",
}


def _allreduce_patterns(records: list[dict]) -> list[str]:
    """The patterns these sweeps measured, all-reduce first: no column stays empty (a
    JAX sweep has no reduce+broadcast)."""
    have = {x.get("pattern") for r in records for x in r.get("rows") or [] if isinstance(x, dict)}
    have = {p for p in have if isinstance(p, str)} | {"allreduce"}
    return [p for p in ALLREDUCE_PATTERN_HEADERS if p in have] + sorted(
        have - set(ALLREDUCE_PATTERN_HEADERS)
    )


def _allreduce_row(r: dict, patterns: list[str]) -> list:
    base = [r.get("framework"), r.get("device"), r.get("world_size")]
    if r.get("status", "ok") != "ok":
        return (
            base
            + [f"{r.get('status') or 'failed'}: {r.get('reason', '')}"[:60]]
            + [""] * (2 + len(patterns))
        )
    rows = [x for x in r.get("rows") or [] if isinstance(x, dict)]
    sizes = sorted({x.get("bytes") for x in rows if isinstance(x.get("bytes"), int)})
    largest = {x.get("pattern"): x for x in rows if sizes and x.get("bytes") == sizes[-1]}
    correct = all(x.get("correct") is True for x in rows)
    return (
        base
        + [r.get("backend", ""), f"{len(sizes)} sizes up to {sizes[-1] if sizes else '?'} B"]
        + [_fmt(largest.get(p, {}).get("busbw_gbps"), ".3g") for p in patterns]
        + ["yes" if correct else "NO"]
    )


def cells_table(records: list[dict]) -> str:
    """One row per all-reduce cell: its backend, the sizes it swept, each pattern's busbw at
    the largest size, and whether every result was right (or why the cell gave none)."""
    patterns = _allreduce_patterns(records)
    headers = (
        "framework",
        "device",
        "world size",
        "backend",
        "sizes",
        *(ALLREDUCE_PATTERN_HEADERS.get(p, f"busbw GB/s {p}") for p in patterns),
        "correct",
    )
    rows = [_allreduce_row(r, patterns) for r in records]
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
