"""Token generation in the report: a table per machine and ISL/OSL (every framework, mode,
batch and thread count, with the decode bound of the machine's measured bandwidth), its
failed cells, a throughput-interactivity plot per machine, and report-generation.csv."""

from __future__ import annotations

from pathlib import Path

from xfbench.generation.table import HEADERS, ordered, row
from xfbench.report.model import Machine, Report
from xfbench.report.roofline import roofs
from xfbench.report.table import Table, Text

CAPTION = (
    "GPT-2 decoding a static batch of prompts greedily with a key/value cache "
    "(docs/generation.md). TTFT: the prefill, prompt in to first token out; TPOT: (end-to-end "
    "- TTFT) / (new tokens - 1); ITL p99: the 99th percentile of the decode steps' times; "
    "tokens/s: batch x new tokens / end-to-end; per sequence: 1 / TPOT. Medians of the timed "
    "generations. bound: the decode step's bytes (every weight and the cache, once) at the "
    "bandwidth this run measured where the cell ran, as tokens/s per sequence; of bound: the "
    "cell's share of it. tokens: the first generation's tokens against the canonical "
    "function in float64 (same: each the reference's choice, or within its near-tie margin)."
)


def _ok(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("status", "ok") == "ok"]


def decode_bound(m: Machine, r: dict) -> float | None:
    """Tokens/s per sequence the decode step's bytes allow at the measured bandwidth."""
    device = str(r.get("device"))
    found = roofs(m).get(device if device != "cpu" else f"t{r.get('threads')}")
    moved = r.get("decode_bytes_per_step")
    if not found or not isinstance(moved, (int, float)) or moved <= 0:
        return None
    return found["bandwidth_gbps"] * 1e9 / moved


def tables(report: Report) -> list[Table]:
    out = []
    several = len(report.machines) > 1
    for m in report.machines:
        found = ordered(_ok(m.generation))
        for isl, osl in sorted({(r.get("prompt_tokens"), r.get("new_tokens")) for r in found}):
            rows = []
            for r in (
                x for x in found if (x.get("prompt_tokens"), x.get("new_tokens")) == (isl, osl)
            ):
                bound = decode_bound(m, r)
                rate = r.get("per_sequence_tokens_per_s")
                share = rate / bound if bound and isinstance(rate, (int, float)) else None
                rows.append(
                    [Text(c) for c in row(r)]
                    + [Text(f"{bound:.3g}" if bound else ""), Text(f"{share:.0%}" if share else "")]
                )
            where = f" on {m.label}" if several else ""
            out.append(
                Table(
                    title=f"Token generation, GPT-2, {isl}/{osl} tokens{where}",
                    headers=HEADERS + ["bound", "of bound"],
                    rows=rows,
                    anchor=f"generation-{isl}-{osl}-{m.tag or 'A'}",
                    text_cols=6,
                )
            )
    return out


def failure_lines(report: Report) -> list[str]:
    return [
        f"{r.get('framework')} {r.get('mode')} {r.get('precision')} {r.get('device')} "
        f"batch {r.get('batch_size')} {r.get('prompt_tokens')}/{r.get('new_tokens')}, "
        f"{m.label}: {r.get('status')}: {r.get('reason')}"
        for m in report.machines
        for r in m.generation
        if r.get("status", "ok") != "ok"
    ]


def plots(report: Report, folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """Per machine and ISL/OSL: output tokens/s (throughput) against tokens/s per sequence
    (interactivity), a point per batch size, a line per framework, mode and thread count."""
    from xfbench.report.plots import SIZE, _legend, _save, plt

    out = []
    for mi, m in enumerate(report.machines):
        lines: dict[tuple, dict[str, list]] = {}
        for r in _ok(m.generation):
            lengths = f"{r.get('prompt_tokens')}/{r.get('new_tokens')}"
            label = f"{r['framework']} {r['mode']} {r['device']} t{r['threads']}"
            lines.setdefault(lengths, {}).setdefault(label, []).append(
                (r["per_sequence_tokens_per_s"], r["output_tokens_per_s"], r["batch_size"])
            )
        for li, (lengths, found) in enumerate(sorted(lines.items())):
            fig, ax = plt.subplots(figsize=SIZE)
            for label, points in sorted(found.items()):
                points.sort()
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
                for x, y, b in points:
                    ax.annotate(
                        f"b{b}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points"
                    )
            ax.set_xlabel("tokens/s per sequence (1 / TPOT)")
            ax.set_ylabel("output tokens/s (all sequences)")
            ax.set_title(
                f"GPT-2 generation {lengths}: throughput against interactivity ({m.short})"
            )
            _legend(ax, len(found))
            path = _save(fig, folder / f"generation-{mi}-{li}.png")
            out.append(
                (f"Generation {lengths} ({m.short}): throughput against interactivity", path)
            )
    return {"generation": out}


COLUMNS = [
    "machine",
    "framework",
    "mode",
    "precision",
    "device",
    "threads",
    "batch_size",
    "prompt_tokens",
    "new_tokens",
    "status",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "itl_p50_s",
    "itl_p99_s",
    "output_tokens_per_s",
    "total_tokens_per_s",
    "per_sequence_tokens_per_s",
    "decode_bound_tokens_per_s",
    "compile_s",
    "build_s",
    "cache_bytes",
    "peak_host_rss_bytes",
    "peak_device_bytes",
    "tokens_verified",
    "near_ties",
    "contended",
    "reason",
]


def csv_rows(report: Report) -> list[dict]:
    rows = []
    for m in report.machines:
        for r in m.generation:
            check = r.get("token_check") if isinstance(r.get("token_check"), dict) else {}
            rows.append(
                {
                    **{k: r.get(k) for k in COLUMNS},
                    "machine": m.label,
                    "status": r.get("status", "ok"),
                    "decode_bound_tokens_per_s": decode_bound(m, r),
                    "tokens_verified": check.get("verified"),
                    "near_ties": check.get("near_ties"),
                }
            )
    return rows
