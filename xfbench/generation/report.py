"""The generation suite's part of the report (xfbench/report/suites.py): a table per
machine and ISL/OSL (every framework, mode, batch and thread count, with the decode bound
of the machine's measured bandwidth), the decode roofline at the batches measured, its
failed cells, the throughput-interactivity frontier per machine (with the medians'
intervals), report-generation.csv, and generated tokens as a workload of the machine
score."""

from __future__ import annotations

import re
from pathlib import Path

from xfbench.generation.cell import KIND, NAMES
from xfbench.generation.table import HEADERS, ordered, row
from xfbench.report.api import Hooks, Machine, Part, Report, Table, Text, roofs

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


def measured(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("status", "ok") == "ok"]


def gpu_workloads(m: Machine) -> list:
    """Its GPU cells as two workloads each (report/gpu_models.py): the decode step, bound
    by memory (it reads every weight and the cache), and the prefill, by arithmetic; each
    with the range over its timed generations."""
    from xfbench.report.api import Workload

    out = []
    for r in measured(m.of(KIND)):
        if r.get("device", "cpu") == "cpu" or not r.get("tpot_s"):
            continue
        what = (f"{r['network']} {{}}, {r['framework']} {r['mode']}, {r['precision']}, "
                f"batch {r['batch_size']}, {r['prompt_tokens']}/{r['new_tokens']}")  # fmt: skip
        for step, bound, key in (("decode step", "memory", "tpot"), ("prefill", "compute", "ttft")):
            out.append(
                Workload(device_name=r["device_name"], what=what.format(step),
                         precision=r["precision"], bound=bound, seconds=r[f"{key}_s"],
                         low=r.get(f"{key}_min_s"), high=r.get(f"{key}_max_s"),
                         profile=top_kernel(r) if key == "tpot" else "",
                         published_as="decode" if key == "tpot" else "")
            )  # fmt: skip
    return out


def kernel_name(name: str) -> str:
    """A kernel's name without its return type, template arguments and parameters."""
    name = name.removeprefix("void ").replace("std::enable_if<!(false), void>::type ", "")
    return re.split(r"[<(]", name, maxsplit=1)[0].strip()


def top_kernel(r: dict) -> str:
    """The costliest kernel of the cell's profiled decode step and its share of the step's
    kernel time ("" where the step was not profiled by kernel)."""
    kernels, total = r.get("decode_step_kernels") or [], r.get("decode_step_kernel_us")
    if not (kernels and total):
        return ""
    top = kernels[0]
    return (f"top kernel {kernel_name(top['name'])}, {top['calls']} calls, "
            f"{top['us'] / total:.0%} of the step's {total:.0f} us of kernels")  # fmt: skip


def sections(report: Report, plots: list[tuple[str, Path]]) -> list[Part]:
    found = [*tables(report), *roofline_tables(report)]
    failures = failure_lines(report)
    if not (found or failures):
        return []
    return [
        Part(
            title="Token generation",
            caption=CAPTION,
            tables=found,
            items_title="Generation cells that gave no number",
            items=failures,
            plots=plots,
        )
    ]


def _roofs(m: Machine, r: dict) -> dict | None:
    """The roofs measured where the cell ran (its GPU, or its CPU thread count)."""
    device = str(r.get("device"))
    return roofs(m).get(device if device != "cpu" else f"t{r.get('threads')}")


def decode_bound(m: Machine, r: dict) -> float | None:
    """Tokens/s per sequence the decode step's bytes allow at the measured bandwidth."""
    found = _roofs(m, r)
    moved = r.get("decode_bytes_per_step")
    if not found or not isinstance(moved, (int, float)) or moved <= 0:
        return None
    return found["bandwidth_gbps"] * 1e9 / moved


def tables(report: Report) -> list[Table]:
    out = []
    several = len(report.machines) > 1
    for m in report.machines:
        found = ordered(measured(m.of(KIND)))
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


# the fastest cell's decode step split by its profile: kernels, and their time's share
SPLIT_HEADERS = ["kernels a step", "kernels' share of TPOT"]
ROOFLINE_HEADERS = [
    "where",
    "batch",
    "bytes/step MB",
    "GFLOP/step",
    "bound by",
    "bound tokens/s per sequence",
    "fastest cell",
    "its tokens/s per sequence",
    "of bound",
]


def roofline_tables(report: Report) -> list[Table]:
    """Per machine, ISL/OSL and precision: each batch measured, its decode step's bytes and
    FLOPs (roofline/decode.py) at the precision's bytes a value against the roofs where it
    ran (that precision's peak), the bound, the fastest cell and its share; the caption
    gives the batch where decode stops being bandwidth-bound."""
    out = []
    for m in report.machines:
        groups: dict[tuple, list[dict]] = {}
        for r in measured(m.of(KIND)):
            if _roofs(m, r):
                where = r["device"] if r["device"] != "cpu" else f"cpu t{r['threads']}"
                lengths = (r.get("network", "gpt2"), r.get("prompt_tokens"), r.get("new_tokens"),
                           r.get("scale"))  # fmt: skip
                groups.setdefault((*lengths, r.get("precision", "fp32"), where), []).append(r)
        for key, found in sorted(groups.items(), key=str):
            out.append(_roofline_table(report, m, key, found))
    return out


def _roofline_table(report: Report, m: Machine, key: tuple, found: list[dict]) -> Table:
    from xfbench.adapters.base import VALUE_BYTES
    from xfbench.models import get_spec
    from xfbench.roofline.decode import ridge_batch, step

    network, isl, osl, scale, precision, where = key
    spec, value_bytes = get_spec(network, scale or "full"), VALUE_BYTES.get(precision, 4)
    roof = _roofs(m, found[0]) or {}  # every cell grouped here has its roofs
    bandwidth, peak = roof["bandwidth_gbps"], roof["peaks_tflops"].get(precision)
    rows, bests = [], []
    for b in sorted({r["batch_size"] for r in found}):
        s = step(spec, b, isl + osl, value_bytes)
        seconds, limit = s.seconds(bandwidth, peak)
        best = max(
            (r for r in found if r["batch_size"] == b),
            key=lambda r: r.get("per_sequence_tokens_per_s") or 0,
        )
        rate = best.get("per_sequence_tokens_per_s") or 0
        bests.append(best)
        rows.append(
            [Text(where), Text(str(b)), Text(f"{s.bytes / 1e6:.4g}")]
            + [Text(f"{s.flops / 1e9:.4g}"), Text(limit), Text(f"{1 / seconds:.4g}")]
            + [Text(f"{best['framework']} {best['mode']}"), Text(f"{rate:.4g}")]
            + [Text(f"{rate * seconds:.0%}")]
        )
    # where a GPU's profile read the fastest cells' decode kernels: their split of a step
    split = any(r.get("decode_step_kernel_us") is not None for r in bests)
    if split:
        for row, r in zip(rows, bests):
            share = r.get("decode_step_kernel_share")
            if share is None and r.get("decode_step_kernel_us") and r.get("tpot_s"):
                share = r["decode_step_kernel_us"] / (r["tpot_s"] * 1e6)  # older records
            row += [
                Text(str(r.get("kernels_per_decode_step") or "n/a")),
                Text(_kernel_share(share)),
            ]
    ridges = ridge_batch(spec, isl + osl, (bandwidth, peak), value_bytes) if peak else None
    said = (
        f"compute-bound from batch {ridges:.3g}"
        if ridges
        else "no batch compute-bound (the cache read outlasts the FLOPs)"
        if peak
        else f"no {precision} peak measured"
    )
    named = "" if precision == "fp32" else f", {precision}"
    return Table(
        title=f"Decode roofline, {NAMES.get(network, network)}, {isl}/{osl} tokens{named}, "
        f"{where}" + (f" on {m.label}" if len(report.machines) > 1 else ""),
        headers=ROOFLINE_HEADERS + (SPLIT_HEADERS if split else []),
        rows=rows,
        anchor=f"decode-roofline-{'' if network == 'gpt2' else network + '-'}{isl}-{osl}"
        f"{named.replace(', ', '-')}-"
        f"{where.replace(' ', '')}-{m.tag or 'A'}",
        caption=f"One decode step reads every weight and the whole cache of "
        f"{isl + osl} positions per sequence ({precision}): {bandwidth:.4g} GB/s"
        + (f" and {peak:.4g} TFLOP/s" if peak else "")
        + f" measured there; {said}.",
        text_cols=9,
    )


def _kernel_share(share: float | None) -> str:
    """The kernels' share of TPOT; above 100 % flagged (the profile outlasted TPOT, a
    different run: measure.kernel_split writes no gap then), never read as a split."""
    if share is None:
        return "n/a"
    return f"{share:.0%} (kernels outlast TPOT: no split)" if share > 1 else f"{share:.0%}"


def failure_lines(report: Report, kind: str = KIND) -> list[str]:
    """The cells of kind (a generation's, or a suite's built on it) that gave no number."""
    return [
        f"{r.get('framework')} {r.get('mode')} {r.get('precision')} {r.get('device')} "
        f"batch {r.get('batch_size')} {r.get('prompt_tokens')}/{r.get('new_tokens')}"
        + (f" {r['scenario']}" if r.get("scenario") else "")
        + f", {m.label}: {r.get('status')}: {r.get('reason')}"
        for m in report.machines
        for r in m.of(kind)
        if r.get("status", "ok") != "ok"
    ]


def _bar(value: float, interval) -> list[float]:
    """Error-bar lengths below and above value from a [low, high] interval (none: 0)."""
    if not (isinstance(interval, list) and len(interval) == 2):
        return [0.0, 0.0]
    return [max(0.0, value - interval[0]), max(0.0, interval[1] - value)]


def plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    """Per machine and ISL/OSL, the frontier: output tokens/s (throughput, per device)
    against tokens/s per sequence (interactivity, per user), a point per batch size (the
    static batch is the concurrency), a line per framework, mode and thread count, each
    point's error bars its medians' intervals over the timed generations."""
    from xfbench.report.api import SIZE, place_legend, plt, save_figure

    out = []
    for mi, m in enumerate(report.machines):
        lines: dict[str, dict[str, list]] = {}
        for r in measured(m.of(KIND)):
            lengths = f"{r.get('prompt_tokens')}/{r.get('new_tokens')}"
            label = f"{r['framework']} {r['mode']} {r['device']} t{r['threads']}"
            lines.setdefault(lengths, {}).setdefault(label, []).append(
                (r["per_sequence_tokens_per_s"], r["output_tokens_per_s"], r["batch_size"], r)
            )
        for li, (lengths, found) in enumerate(sorted(lines.items())):
            fig, ax = plt.subplots(figsize=SIZE)
            for label, points in sorted(found.items()):
                points.sort(key=lambda p: p[2])  # by batch: the concurrency sweep's order
                xs, ys = [p[0] for p in points], [p[1] for p in points]
                xerr = [_bar(p[0], p[3].get("per_sequence_tokens_per_s_ci")) for p in points]
                yerr = [_bar(p[1], p[3].get("output_tokens_per_s_ci")) for p in points]
                ax.errorbar(
                    xs,
                    ys,
                    xerr=list(zip(*xerr)),
                    yerr=list(zip(*yerr)),
                    marker="o",
                    capsize=2,
                    label=label,
                )
                for x, y, b, _ in points:
                    ax.annotate(
                        f"b{b}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points"
                    )
            ax.set_xlabel("tokens/s per sequence (1 / TPOT)")
            ax.set_ylabel("output tokens/s (all sequences)")
            ax.set_title(
                f"GPT-2 generation {lengths}: throughput against interactivity ({m.short}); "
                "bars: the medians' intervals",
                fontsize=9,
            )
            place_legend(ax, len(found))
            path = save_figure(fig, folder / f"generation-{mi}-{li}.png")
            out.append(
                (f"Generation {lengths} ({m.short}): throughput against interactivity", path)
            )
    return out


# What a generation cell is, the first columns of both CSV files.
CELL_COLUMNS = [
    "machine",
    "framework",
    "mode",
    "precision",
    "device",
    "threads",
    "batch_size",
    "prompt_tokens",
    "new_tokens",
]
COLUMNS = CELL_COLUMNS + [
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


def csv_files(report: Report) -> list[tuple[str, list[str], list[dict]]]:
    return [("report-generation.csv", COLUMNS, csv_rows(report))]


def csv_rows(report: Report) -> list[dict]:
    rows = []
    for m in report.machines:
        for r in m.of(KIND):
            check = r.get("token_check")
            check = check if isinstance(check, dict) else {}
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


SCORED_TASK = "generate"  # the machine score's workload name for token generation
SCORED_WORKLOAD = "generation"  # its kind of workload in the noise model (report/noise.py)


def scored(run) -> list:
    """Each failed generation record of a run as a failed Result of task "generate", and
    each measured one of a run (report.load.Run) as a Result of task
    "generate", so that the scores count generated tokens as a workload beside training:
    a sample is one sequence of new_tokens, its rounds every timed generation (whose
    median the scores take; e2e_s, the record's, is the same median). The lengths (ISL/OSL) go into the scale, so that only
    the same lengths are compared."""
    from xfbench.report.api import scored_failure, scored_result

    out = [
        scored_failure(r, task=SCORED_TASK) for r in run.of(KIND) if r.get("status", "ok") != "ok"
    ]
    for r in measured(run.of(KIND)):
        e2e, batch = r.get("e2e_s"), r.get("batch_size")
        if not isinstance(e2e, int | float) or e2e <= 0 or not isinstance(batch, int):
            continue
        lengths = f"{r.get('scale', 'full')}, {r.get('prompt_tokens')}/{r.get('new_tokens')} tokens"
        rounds = r.get("timed_rounds_s") or []
        out.append(
            scored_result(
                r, task=SCORED_TASK, batch=batch, median=float(e2e), rounds=rounds, scale=lengths
            )
        )
    return out


# Its part of the report (xfbench/report/suites.py says what each hook is).
REPORT = Hooks(
    sections={"suites": sections},
    plots=plots,
    csv_files=csv_files,
    gpu_workloads=gpu_workloads,
    scored=scored,
    workloads={SCORED_TASK: SCORED_WORKLOAD},
)
