"""The roofline in the report: each machine's measured roofs per CPU thread count (the
run's machine record, roofline/roofs.py; the GEMM suite's best fp32 where it beat the
probe), every CPU cell a point at its network's arithmetic intensity (roofline/profile.py)
against its achieved FLOP/s, and what bounds it.

A cell is "memory"-bound when its intensity lies left of the ridge (bandwidth x intensity
below the peak), "compute"-bound right of it; it is "neither (overhead)" when it reaches
less than OVERHEAD_SHARE of the roof that applies: what holds it back is then neither the
memory nor the arithmetic but the framework, the batch or the threads (docs/measurement.md).
"""

from __future__ import annotations

from pathlib import Path

from xfbench.report.model import Machine, Report, _gemm_peaks, _tflops, display
from xfbench.report.tables import Table, Text

OVERHEAD_SHARE = 0.2
CAPTION = (
    "Each CPU cell at its network's arithmetic intensity (FLOPs over the bytes its layers "
    "move at least: `xfbench profile`) against its achieved FLOP/s, under the roofs this "
    "run measured at its thread count: memory bandwidth (STREAM's best kernel) x intensity, "
    "and the fp32 GEMM peak (the probe's, or the GEMM suite's where higher). bound by: the "
    f"roof that applies, or neither (overhead) below {OVERHEAD_SHARE:.0%} of it; share: "
    "achieved over that roof (above 100 %: the framework's kernels beat the GEMM probe)."
)


def bound_by(
    intensity: float, achieved_tflops: float, bandwidth_gbps: float, peak_tflops: float
) -> tuple[str, float, float]:
    """(what bounds a cell, its share of the roof that applies, that roof in TFLOP/s)."""
    memory_roof = bandwidth_gbps * intensity / 1e3
    applies = min(memory_roof, peak_tflops)
    share = achieved_tflops / applies
    bound = "memory" if memory_roof < peak_tflops else "compute"
    return ("neither (overhead)" if share < OVERHEAD_SHARE else bound), share, applies


def roofs(m: Machine) -> dict[int, dict]:
    """{threads: {"bandwidth_gbps", "peak_tflops", "peak_source"}} of a machine's runs."""
    gemm = _gemm_peaks(m)
    out: dict[int, dict] = {}
    for run in m.runs:
        for key, r in (run.machine.get("roofs") or {}).items():
            if not isinstance(r, dict) or "error" in r or not str(key).startswith("t"):
                continue
            threads = int(str(key)[1:])
            peak, source = r.get("fp32_peak_tflops"), "GEMM probe"
            suite = gemm.get(("cpu", "fp32", threads))
            if isinstance(suite, (int, float)) and (not peak or suite > peak):
                peak, source = suite, "GEMM suite"
            if isinstance(r.get("memory_bandwidth_gbps"), (int, float)) and peak:
                out[threads] = {
                    "bandwidth_gbps": float(r["memory_bandwidth_gbps"]),
                    "peak_tflops": float(peak),
                    "peak_source": source,
                }
    return out


def points(m: Machine) -> list[dict]:
    """Every timed CPU cell of a machine placed on its roofline (where the run measured
    the roofs at its thread count and the spec is known)."""
    from xfbench.models import get_spec
    from xfbench.roofline.profile import VALUE_BYTES, intensity

    measured = roofs(m)
    out = []
    for r in m.results.values():
        roof = measured.get(r.threads)
        achieved = _tflops(r) if r.ok and not r.accelerator else None
        if roof is None or achieved is None or r.precision not in VALUE_BYTES:
            continue
        try:
            spec = get_spec(r.network, r.scale, r.tokens)
        except (KeyError, ValueError):
            continue
        ai = intensity(spec, r.task, r.batch_size, r.precision)
        bound, share, applies = bound_by(ai, achieved, roof["bandwidth_gbps"], roof["peak_tflops"])
        out.append(
            {
                "result": r,
                "threads": r.threads,
                "intensity": ai,
                "achieved_tflops": achieved,
                "roof_tflops": applies,
                "share": share,
                "bound": bound,
            }
        )
    return out


LAYERS_CAPTION = (
    "Measured with --profile-layers after the cell's timed rounds: each top-level layer's "
    "median forward and backward time over 3 profiled steps (the profiler's own cost "
    "included, so the rows add up to more than the timed step), its share of the profiled "
    "step, its FLOPs over that time, and its FLOP/B from the spec (`xfbench profile`). "
    "(outside layers): the loss, the optimizer and the rest of the step."
)


def layer_tables(report: Report) -> list[Table]:
    """One table per cell whose record has per-layer times (--profile-layers)."""
    from xfbench.models import get_spec
    from xfbench.roofline.layers import HEADERS, table_rows, text_rows

    out = []
    several = len(report.machines) > 1
    not_profiled: dict[tuple[str, str], str] = {}
    for m in report.machines:
        for r in sorted(
            m.results.values(), key=lambda r: (r.network, r.task, r.threads, r.framework)
        ):
            if r.info.get("layer_times_reason"):
                not_profiled[(r.framework, r.mode)] = str(r.info["layer_times_reason"])
            times = r.info.get("layer_times")
            if not r.ok or not isinstance(times, list) or not times:
                continue
            try:
                spec = get_spec(r.network, r.scale, r.tokens)
                body = text_rows(table_rows(spec, r, times))
            except (KeyError, ValueError, TypeError) as e:
                report.problems.append(f"{r.source}: layer_times not read ({e})")
                continue
            where = f" ({m.label})" if several else ""
            out.append(
                Table(
                    title=(
                        f"Per-layer time: {r.network} {r.task}, {display(r.framework)} "
                        f"{r.mode}, {r.precision}, {r.device}, {r.threads} thread(s), batch "
                        f"{r.batch_size}{where}"
                    ),
                    headers=HEADERS,
                    rows=[[Text(v) for v in row] for row in body],
                    caption=LAYERS_CAPTION,
                    anchor="-".join(
                        ("layers", m.tag or "A", r.network, r.task, r.framework, r.mode)
                        + (r.precision, str(r.threads))
                    ),
                    text_cols=2,
                )
            )
    if not_profiled:  # asked for (--profile-layers), and why some cells have no table
        out.append(
            Table(
                title="Not profiled per layer",
                headers=["framework", "mode", "why"],
                rows=[
                    [Text(display(f)), Text(mode), Text(why)]
                    for (f, mode), why in sorted(not_profiled.items())
                ],
                anchor="layers-not-profiled",
                text_cols=3,
            )
        )
    return out


def tables(report: Report) -> list[Table]:
    """The roofs, what bounds each cell, and the per-layer times of cells that have them."""
    return _roof_tables(report) + layer_tables(report)


def _roof_tables(report: Report) -> list[Table]:
    out = []
    several = len(report.machines) > 1
    for m in report.machines:
        measured = roofs(m)
        if not measured:
            continue
        rows = [
            [
                Text(f"{t}"),
                Text(f"{r['bandwidth_gbps']:.3g}"),
                Text(f"{r['peak_tflops'] * 1e3:.3g}"),
                Text(r["peak_source"]),
                Text(f"{r['peak_tflops'] * 1e3 / r['bandwidth_gbps']:.3g}"),
            ]
            for t, r in sorted(measured.items())
        ]
        where = f" ({m.label})" if several else ""
        out.append(
            Table(
                title=f"Roofs measured{where}",
                headers=[
                    "threads",
                    "memory GB/s",
                    "fp32 peak GFLOP/s",
                    "peak from",
                    "ridge FLOP/B",
                ],
                rows=rows,
                anchor=f"roofs-{m.tag or 'A'}",
            )
        )
        placed = sorted(
            points(m),
            key=lambda p: (
                p["result"].network,
                p["result"].task,
                p["threads"],
                p["result"].framework,
            ),
        )
        if placed:
            out.append(
                Table(
                    title=f"Bound by{where}",
                    headers=[
                        "network",
                        "task",
                        "framework",
                        "mode",
                        "precision",
                        "threads",
                        "FLOP/B",
                        "GFLOP/s",
                        "roof GFLOP/s",
                        "share",
                        "bound by",
                    ],
                    rows=[
                        [
                            Text(p["result"].network),
                            Text(p["result"].task),
                            Text(display(p["result"].framework)),
                            Text(p["result"].mode),
                            Text(p["result"].precision),
                            Text(str(p["threads"])),
                            Text(f"{p['intensity']:.3g}"),
                            Text(f"{p['achieved_tflops'] * 1e3:.3g}"),
                            Text(f"{p['roof_tflops'] * 1e3:.3g}"),
                            Text(f"{p['share']:.0%}" if p["share"] is not None else ""),
                            Text(p["bound"]),
                        ]
                        for p in placed
                    ],
                    caption=CAPTION,
                    anchor=f"bound-{m.tag or 'A'}",
                    text_cols=5,
                )
            )
    return out


def plots(report: Report, folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """Per machine: the roofs of each thread count and every CPU cell, log-log."""
    import numpy as np

    from xfbench.report.plots import COLORS, MARKERS, SIZE, _legend, _save, plt

    out = []
    for mi, m in enumerate(report.machines):
        measured, placed = roofs(m), points(m)
        if not measured or not placed:
            continue
        fig, ax = plt.subplots(figsize=SIZE)
        lo = min(p["intensity"] for p in placed) / 4
        hi = max(p["intensity"] for p in placed) * 4
        xs = np.geomspace(lo, hi, 200)
        threads = sorted(measured)
        for i, t in enumerate(threads):
            r = measured[t]
            ys = np.minimum(r["bandwidth_gbps"] * xs, r["peak_tflops"] * 1e3)
            ax.plot(xs, ys, color=COLORS[i % len(COLORS)], label=f"roof, {t} thread(s)")
        frameworks = sorted({p["result"].framework for p in placed})
        for p in placed:
            i = threads.index(p["threads"])
            f = frameworks.index(p["result"].framework)
            ax.scatter(
                p["intensity"],
                p["achieved_tflops"] * 1e3,
                color=COLORS[i % len(COLORS)],
                marker=MARKERS[f % len(MARKERS)],
                s=22,
            )
            ax.annotate(
                p["result"].network,
                (p["intensity"], p["achieved_tflops"] * 1e3),
                fontsize=6,
                xytext=(3, 2),
                textcoords="offset points",
            )
        for f, name in enumerate(frameworks):  # the markers' legend
            ax.scatter([], [], color="grey", marker=MARKERS[f % len(MARKERS)], label=display(name))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity, FLOP/byte (lower bound on traffic)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"Roofline: {m.short}")
        _legend(ax, len(threads) + len(frameworks))
        path = _save(fig, folder / f"roofline-{mi}.png")
        out.append((f"Roofline of {m.short}: each CPU cell under its thread count's roofs", path))
    return {"roofline": out}
