"""Share of the best: each result over the fastest implementation measured in the
same run for the same (shape, dtype, device)."""

from __future__ import annotations

from collections.abc import Iterable


def _key(r: dict) -> tuple:
    return (r["m"], r["n"], r["k"], r["dtype"], r["device"])


def fill_share_of_best(records: Iterable[dict]) -> None:
    """Set r["share_of_best"] (0..1) on every successful GEMM record, in place."""
    ok = [
        r
        for r in records
        if r.get("suite") == "gemm" and r.get("status") == "ok" and r.get("tflops") is not None
    ]
    best: dict[tuple, float] = {}
    for r in ok:
        best[_key(r)] = max(best.get(_key(r), 0.0), r["tflops"])
    for r in ok:
        top = best[_key(r)]
        r["share_of_best"] = r["tflops"] / top if top > 0 else None
