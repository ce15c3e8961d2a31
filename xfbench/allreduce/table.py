"""nccl-tests-style tables: one line per message size, one table per pattern."""

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
