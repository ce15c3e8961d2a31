"""The generation table: one row per cell (the terminal summary and the report)."""

from __future__ import annotations

HEADERS = [
    "framework",
    "mode",
    "precision",
    "device",
    "threads",
    "batch",
    "prompt/new",
    "TTFT ms",
    "TPOT ms",
    "ITL p99 ms",
    "tokens/s",
    "per sequence tokens/s",
    "build s",
    "compile s",
    "cache MB",
    "tokens",
]


def _ms(value) -> str:
    return f"{value * 1e3:.4g}" if isinstance(value, (int, float)) else ""


def _num(value, spec: str = ".4g") -> str:
    return format(value, spec) if isinstance(value, (int, float)) else ""


def tokens_verdict(r: dict) -> str:
    """What the token check found: checked and agreeing (with its near-ties), or not."""
    check = r.get("token_check")
    if not isinstance(check, dict):
        return ""
    ties = check.get("near_ties") or 0
    said = "same" if check.get("verified") else "DIVERGED"
    return said + (f" ({ties} near-ties)" if ties else "")


def lead(r: dict) -> list[str]:
    """What a generation cell is: framework, mode, precision, device, threads, batch,
    prompt/new."""
    return [
        str(r.get("framework", "")),
        str(r.get("mode", "")),
        str(r.get("precision", "")),
        str(r.get("device", "")),
        str(r.get("threads", "")),
        str(r.get("batch_size", "")),
        f"{r.get('prompt_tokens', '')}/{r.get('new_tokens', '')}",
    ]


def row(r: dict) -> list[str]:
    cell = lead(r)
    if r.get("status", "ok") != "ok":
        return cell + [f"{r.get('status')}: {r.get('reason', '')}"[:70]] + [""] * 8
    cache = r.get("cache_bytes")
    return cell + [
        _ms(r.get("ttft_s")),
        _ms(r.get("tpot_s")),
        _ms(r.get("itl_p99_s")),
        _num(r.get("output_tokens_per_s")),
        _num(r.get("per_sequence_tokens_per_s")),
        _num(r.get("build_s"), ".3g"),
        _num(r.get("compile_s"), ".3g"),
        _num(cache / 1e6 if isinstance(cache, (int, float)) else None, ".3g"),
        tokens_verdict(r),
    ]


def ordered(records: list[dict]) -> list[dict]:
    return sorted(
        records,
        key=lambda r: (
            str(r.get("device")),
            int(r.get("prompt_tokens") or 0),
            int(r.get("new_tokens") or 0),
            int(r.get("batch_size") or 0),
            int(r.get("threads") or 0),
            str(r.get("framework")),
            str(r.get("mode")),
            str(r.get("precision")),
        ),
    )


def generation_table(records: list[dict]) -> str:
    from tabulate import tabulate

    return tabulate([row(r) for r in ordered(records)], headers=HEADERS, disable_numparse=True)
