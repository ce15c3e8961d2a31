"""The serving suite's part of the report (xfbench/report/suites.py): a table per machine
and network (LoadGen's four scenarios side by side), its failed cells, a
latency-throughput plot per machine and network, report-serving.csv, and Offline
throughput as a workload of the machine score."""

from __future__ import annotations

from pathlib import Path

from xfbench.report.api import Hooks, Part, Report, Table, Text
from xfbench.serving.cell import KIND
from xfbench.serving.scenarios import METRIC
from xfbench.serving.table import headline, network_tables, validity

CAPTION = (
    "Inference driven by MLPerf's LoadGen (docs/serving.md). "
    + "; ".join(f"{s}: {m}" for s, m in METRIC.items())
    + ". ✗: LoadGen called the run INVALID (too short for its early-stopping estimate, "
    "below its minimum duration, or, for Server, no rate met the bound); the number is "
    "still LoadGen's. int8 vs fp32: the int8 logits' relative distance from fp32's and "
    "the share of samples whose top class agrees."
)


def _ok(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("status", "ok") == "ok"]


def sections(report: Report, plots: list[tuple[str, Path]]) -> list[Part]:
    found, failures = tables(report), failure_lines(report)
    if not (found or failures):
        return []
    return [
        Part(
            title="Serving (MLPerf LoadGen)",
            caption=CAPTION,
            tables=found,
            items_title="Serving cells that gave no number",
            items=failures,
            plots=plots,
        )
    ]


def tables(report: Report) -> list[Table]:
    out = []
    several = len(report.machines) > 1
    for m in report.machines:
        for network, (headers, rows) in network_tables(_ok(m.of(KIND))).items():
            where = f" on {m.label}" if several else ""
            out.append(
                Table(
                    title=f"Serving {network}{where}",
                    headers=headers,
                    rows=[[Text(c) for c in row] for row in rows],
                    anchor=f"serving-{network}-{m.tag or 'A'}",
                    text_cols=5,
                )
            )
    return out


def failure_lines(report: Report) -> list[str]:
    return [
        f"{r.get('network')} {r.get('framework')} {r.get('mode')} {r.get('precision')} "
        f"{r.get('scenario')}, {m.label}: {r.get('status')}: {r.get('reason')}"
        for m in report.machines
        for r in m.of(KIND)
        if r.get("status", "ok") != "ok"
    ]


def plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    """Per machine and network: p99 latency against completed samples/s, each Server search
    run a point (a line per framework, mode and precision), the bound dashed."""
    from xfbench.report.api import SIZE, place_legend, plt, save_figure

    out = []
    for mi, m in enumerate(report.machines):
        by_network: dict[str, list[dict]] = {}
        for r in _ok(m.of(KIND)):
            if r.get("scenario") == "Server" and r.get("server_search"):
                by_network.setdefault(str(r.get("network")), []).append(r)
        for network, found in sorted(by_network.items()):
            fig, ax = plt.subplots(figsize=SIZE)
            for r in found:
                points = sorted(
                    (s["completed_samples_per_s"], s["p99_ms"])
                    for s in r["server_search"]
                    if isinstance(s.get("completed_samples_per_s"), (int, float))
                    and isinstance(s.get("p99_ms"), (int, float))
                )
                if points:
                    label = f"{r['framework']} {r['mode']} {r['precision']} t{r['threads']}"
                    ax.plot(*zip(*points), marker="o", label=label)
            bound = found[0].get("latency_bound_ms")
            if isinstance(bound, (int, float)):
                ax.axhline(bound, linestyle="--", color="grey", label=f"bound {bound:g} ms")
            ax.set_xlabel("completed samples/s (LoadGen, Server scenario)")
            ax.set_ylabel("p99 latency, ms")
            ax.set_yscale("log")
            ax.set_title(f"Serving {network}: latency against throughput ({m.short})")
            place_legend(ax, len(found) + 1)
            path = save_figure(fig, folder / f"serving-{network}-{mi}.png")
            out.append((f"Serving {network} ({m.short}): p99 latency against throughput", path))
    return out


COLUMNS = [
    "machine",
    "network",
    "framework",
    "mode",
    "precision",
    "device",
    "threads",
    "scenario",
    "status",
    "metric",
    "value",
    "valid",
    "loadgen",
    "p50_ms",
    "p90_ms",
    "p95_ms",
    "p99_ms",
    "p99_9_ms",
    "server_qps",
    "samples_per_s",
    "latency_bound_ms",
    "max_batch",
    "int8_logits_rel_err",
    "int8_top1_agreement",
    "contended",
    "reason",
]


def csv_files(report: Report) -> list[tuple[str, list[str], list[dict]]]:
    return [("report-serving.csv", COLUMNS, csv_rows(report))]


def csv_rows(report: Report) -> list[dict]:
    rows = []
    for m in report.machines:
        for r in m.of(KIND):
            ok = r.get("status", "ok") == "ok"
            metric, value = headline(r) if ok else ("", "")
            rows.append(
                {
                    **{k: r.get(k) for k in COLUMNS},
                    "machine": m.label,
                    "status": r.get("status", "ok"),
                    "metric": metric,
                    "value": value,
                    "loadgen": validity(r),
                    "max_batch": (r.get("batching") or {}).get("max_batch"),
                }
            )
    return rows


SCORED_TASK = "serve-offline"  # the machine score's workload name for Offline throughput
SCORED_WORKLOAD = "Offline serving"  # its kind of workload in the noise model (report/noise.py)


def scored(run) -> list:
    """Each failed Offline serving record of a run (report.load.Run) as a failed Result of
    task "serve-offline", and each valid-or-not one as a Result whose median is LoadGen's seconds per sample, so that the scores
    count Offline throughput as a workload beside training. Its rounds are the times of
    the batches the SUT ran (full_batch_s), scaled so that their median is LoadGen's
    seconds per batch: the interval is the batches' spread about LoadGen's figure
    (records without them count as certain). int8
    records are not scored: int8 computes another function than fp32 (report/score.py).
    Its batch is the SUT's largest, and its median LoadGen's seconds per such batch."""
    from xfbench.report.api import scored_failure, scored_result

    out = []
    for r in run.of(KIND):
        rate = r.get("samples_per_s")
        if r.get("scenario") != "Offline":
            continue
        if r.get("status", "ok") != "ok":
            out.append(scored_failure(r, task=SCORED_TASK))
            continue
        if not isinstance(rate, (int, float)) or rate <= 0:
            continue
        batch = int((r.get("batching") or {}).get("max_batch") or 1)
        median = batch / rate  # seconds per batch of the largest bucket
        rounds = _scaled_rounds(r.get("full_batch_s"), median)
        out.append(scored_result(r, task=SCORED_TASK, batch=batch, median=median, rounds=rounds))
    return out


def _scaled_rounds(times, median: float) -> list[float]:
    """Batch times scaled so that their median is LoadGen's seconds per batch ([] when the
    record kept none)."""
    import statistics

    times = [t for t in times or [] if isinstance(t, int | float) and t > 0]
    if not times:
        return []
    scale = median / statistics.median(times)
    return [t * scale for t in times]


# Its part of the report (xfbench/report/suites.py says what each hook is).
REPORT = Hooks(
    sections={"suites": sections},
    plots=plots,
    csv_files=csv_files,
    scored=scored,
    workloads={SCORED_TASK: SCORED_WORKLOAD},
)
