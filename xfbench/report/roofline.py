"""The roofline in the report: each machine's measured roofs (the run's machine record,
roofline/roofs.py): the CPU's per thread count, each GPU's, with a suite's measured peak
(model.measured_peaks) where it beat the probe and a GPU's datasheet roofs beside (xfbench/published.toml); every cell a
point at its network's arithmetic intensity (roofline/profile.py) against its achieved
FLOP/s, under the peak of its own precision; and each cell's measured per-layer times
(--profile-layers).

A cell is "memory"-bound when its intensity lies left of the ridge (bandwidth x intensity
below the peak), "compute"-bound right of it; it is "neither (overhead)" when it reaches
less than OVERHEAD_SHARE of the roof that applies: what holds it back is then neither the
memory nor the arithmetic but the framework, the batch or the threads (docs/measurement.md).
A cell whose precision has no measured peak there (fp64) is not placed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xfbench.frameworks import display
from xfbench.published import gpu_for
from xfbench.report import suites
from xfbench.report.model import (
    Machine,
    Report,
    achieved_tflops,
    dtype_name,
    measured_peaks,
)
from xfbench.report.table import Table, Text
from xfbench.roofline.roofs import PROBE

OVERHEAD_SHARE = 0.2
CAPTION = (
    "Each cell at its network's arithmetic intensity (FLOPs over the bytes its layers "
    "move at least: `xfbench profile`) against its achieved FLOP/s, under the roofs this "
    "run measured where it ran (a CPU thread count, or a GPU): memory bandwidth (STREAM's "
    "best kernel) x intensity, and the matmul peak of the cell's precision (the probe's, or "
    "a suite's measured one where higher: peak from). bound by: the roof that applies, or neither (overhead) "
    f"below {OVERHEAD_SHARE:.0%} of it; share: achieved over that roof (above 100 %: the "
    "framework's kernels beat the probe's matmul)."
)
# The types with a measured peak; a cell computes at its precision's (mixed precision's
# products are the half type's); fp64 and int8 have none.
PEAK_TYPES = ("fp32", "tf32", "bf16", "fp16")


def bound_by(
    intensity: float, achieved_tflops: float, bandwidth_gbps: float, peak_tflops: float
) -> tuple[str, float, float]:
    """(what bounds a cell, its share of the roof that applies, that roof in TFLOP/s)."""
    memory_roof = bandwidth_gbps * intensity / 1e3
    applies = min(memory_roof, peak_tflops)
    share = achieved_tflops / applies
    bound = "memory" if memory_roof < peak_tflops else "compute"
    return ("neither (overhead)" if share < OVERHEAD_SHARE else bound), share, applies


def roofs(m: Machine) -> dict[str, dict]:
    """{"t<N>" or "cuda:N": {"where", "device", "threads", "device_name", "bandwidth_gbps",
    "peaks_tflops" {type: TFLOP/s}, "peak_sources" {type: PROBE | "<suite> suite"}}}
    of a machine's runs. On the CPU tf32 is fp32 (no TF32 arithmetic there)."""
    measured = measured_peaks(m)
    out: dict[str, dict] = {}
    for run in m.runs:
        for key, r in (run.machine.get("roofs") or {}).items():
            key = str(key)
            gpu = key.startswith("cuda:")
            if not isinstance(r, dict) or "error" in r or not (gpu or key.startswith("t")):
                continue
            bandwidth = r.get("memory_bandwidth_gbps")
            if not isinstance(bandwidth, (int, float)) or bandwidth <= 0:
                continue
            threads = None if gpu else int(key[1:])
            name = str(r.get("device_name") or key) if gpu else "cpu"
            peaks, sources = {}, {}
            for t in PEAK_TYPES:
                probe = r.get(f"{'fp32' if t == 'tf32' and not gpu else t}_peak_tflops")
                suite, by = measured.get((name, t, None if gpu else threads), (None, ""))
                if isinstance(suite, (int, float)) and (
                    not isinstance(probe, (int, float)) or suite > probe
                ):
                    peaks[t], sources[t] = float(suite), f"{by} suite"
                elif isinstance(probe, (int, float)) and probe > 0:
                    peaks[t], sources[t] = float(probe), PROBE
            if "fp32" not in peaks:
                continue
            out[key] = {
                "where": name if gpu else f"{threads} thread(s)",
                "device": key if gpu else "cpu",
                "threads": threads,
                "device_name": name,
                "bandwidth_gbps": float(bandwidth),
                "peaks_tflops": peaks,
                "peak_sources": sources,
            }
    return out


def _roof_key(r) -> str:
    return r.device if r.accelerator else f"t{r.threads}"


def points(m: Machine) -> list[dict]:
    """Every timed cell of a machine placed on its roofline (where the run measured the
    roofs where it ran, a peak of its precision, and the spec is known)."""
    from xfbench.models import get_spec
    from xfbench.roofline.profile import VALUE_BYTES, intensity

    measured = roofs(m)
    out = []
    for r in suites.timed_cells(m):
        roof = measured.get(_roof_key(r))
        peak = roof["peaks_tflops"].get(dtype_name(r.precision)) if roof else None
        achieved = achieved_tflops(r) if r.ok else None
        if peak is None or achieved is None or r.precision not in VALUE_BYTES:
            continue
        try:
            spec = get_spec(r.network, r.scale, r.tokens)
        except (KeyError, ValueError):
            continue
        ai = intensity(spec, r.task, r.batch_size, r.precision)
        bound, share, applies = bound_by(ai, achieved, roof["bandwidth_gbps"], peak)
        out.append(
            {
                "result": r,
                "roof": _roof_key(r),
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
    from xfbench.roofline.layers import table_rows, text_rows

    out = []
    several = len(report.machines) > 1
    not_profiled: dict[tuple[str, str], str] = {}
    for m in report.machines:
        for r in sorted(
            suites.timed_cells(m), key=lambda r: (r.network, r.task, r.threads, r.framework)
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
            out.append(_layer_table(m, r, [[Text(v) for v in row] for row in body], several))
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


def _layer_table(m, r, rows: list[list[Text]], several: bool) -> Table:
    """One cell's per-layer times, its machine named where the report has several."""
    from xfbench.roofline.layers import HEADERS

    where = f" ({m.label})" if several else ""
    return Table(
        title=(
            f"Per-layer time: {r.network} {r.task}, {display(r.framework)} "
            f"{r.mode}, {r.precision}, {r.device}, {r.threads} thread(s), batch "
            f"{r.batch_size}{where}"
        ),
        headers=HEADERS,
        rows=rows,
        caption=LAYERS_CAPTION,
        anchor="-".join(
            ("layers", m.tag or "A", r.network, r.task, r.framework, r.mode)
            + (r.precision, str(r.threads))
        ),
        text_cols=2,
    )


def tables(report: Report) -> list[Table]:
    """The roofs, what bounds each cell, and the per-layer times of cells that have them."""
    return _roof_tables(report) + layer_tables(report)


def _g(tflops: float | None, unit: float) -> str:
    return "" if tflops is None else f"{tflops * unit:.3g}"


def _cpu_roofs(m: Machine, cpu: list, where: str) -> Table:
    """The CPU's roofs at each thread count the run measured."""
    cpu = sorted(cpu, key=lambda kr: kr[1]["threads"])
    return Table(
        title=f"Roofs measured{where}",
        headers=[
            "threads",
            "memory GB/s",
            "fp32 peak GFLOP/s",
            "bf16 peak GFLOP/s",
            "fp16 peak GFLOP/s",
            "peak from",
            "ridge FLOP/B (fp32)",
        ],
        rows=[
            [
                Text(str(r["threads"])),
                Text(f"{r['bandwidth_gbps']:.3g}"),
                *(Text(_g(r["peaks_tflops"].get(t), 1e3)) for t in ("fp32", "bf16", "fp16")),
                Text(r["peak_sources"]["fp32"]),
                Text(f"{r['peaks_tflops']['fp32'] * 1e3 / r['bandwidth_gbps']:.3g}"),
            ]
            for _, r in cpu
        ],
        caption="bf16 and fp16: PyTorch's matmul, fp16 only where the CPU has "
        "fp16 arithmetic (docs/measurement.md).",
        anchor=f"roofs-{m.tag or 'A'}",
    )


def _gpu_roofs(m: Machine, gpu: list, where: str) -> Table:
    """Each GPU's measured roofs, with its model's datasheet beside (xfbench.published)."""
    rows = []
    for key, r in sorted(gpu):
        rows.append(
            [
                Text(f"{key}: {r['device_name']}"),
                Text("measured"),
                Text(f"{r['bandwidth_gbps']:.4g}"),
                *(Text(_g(r["peaks_tflops"].get(t), 1)) for t in PEAK_TYPES),
            ]
        )
        sheet = gpu_for(r["device_name"])
        if sheet:
            rows.append(
                [
                    Text(f"{key}: {sheet.name}"),
                    Text(f"datasheet ({sheet.source})"),
                    Text(f"{sheet.memory_gbps:.4g}"),
                    *(Text(_g(sheet.peaks_tflops.get(t), 1)) for t in PEAK_TYPES),
                ]
            )
    return Table(
        title=f"GPU roofs{where}",
        headers=["GPU", "from", "memory GB/s", *(f"{t} peak TFLOP/s" for t in PEAK_TYPES)],
        rows=rows,
        caption="measured: device-to-device STREAM and torch.matmul 8192 per "
        "type; datasheet: dense peaks, without sparsity.",
        anchor=f"gpu-roofs-{m.tag or 'A'}",
        text_cols=2,
    )


def _bound_by(m: Machine, measured: dict, where: str) -> Table | None:
    """Each placed cell: its intensity, its FLOP/s, the roof over it and what bounds it."""
    placed = sorted(
        points(m),
        key=lambda p: (p["result"].network, p["result"].task, p["roof"], p["result"].framework),
    )
    if not placed:
        return None
    return Table(
        title=f"Bound by{where}",
        headers=[
            "network",
            "task",
            "framework",
            "mode",
            "precision",
            "where",
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
                Text(measured[p["roof"]]["where"]),
                Text(f"{p['intensity']:.3g}"),
                Text(f"{p['achieved_tflops'] * 1e3:.3g}"),
                Text(f"{p['roof_tflops'] * 1e3:.3g}"),
                Text(f"{p['share']:.0%}"),
                Text(p["bound"]),
            ]
            for p in placed
        ],
        caption=CAPTION,
        anchor=f"bound-{m.tag or 'A'}",
        text_cols=6,
    )


def _roof_tables(report: Report) -> list[Table]:
    out = []
    several = len(report.machines) > 1
    for m in report.machines:
        measured = roofs(m)
        if not measured:
            continue
        where = f" ({m.label})" if several else ""
        cpu = [(k, r) for k, r in measured.items() if r["device"] == "cpu"]
        gpu = [(k, r) for k, r in measured.items() if r["device"] != "cpu"]
        out += [_cpu_roofs(m, cpu, where)] if cpu else []
        out += [_gpu_roofs(m, gpu, where)] if gpu else []
        bound = _bound_by(m, measured, where)
        out += [bound] if bound else []
    return out


def _roof_line(ax, xs, bandwidth_gbps, peak_tflops, **style):
    import numpy as np

    ax.plot(xs, np.minimum(bandwidth_gbps * xs, peak_tflops * 1e3), **style)


def plots(report: Report, folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """Per machine: one plot of the CPU (the roofs of each thread count) and one per GPU
    (its measured roofs solid, its datasheet's dotted), every cell placed there, log-log."""
    from xfbench.report.plots import SIZE, place_legend, plt, save_figure

    out = []
    for mi, m in enumerate(report.machines):
        measured, placed = roofs(m), points(m)
        cpu_keys = sorted(
            (k for k, r in measured.items() if r["device"] == "cpu"),
            key=lambda k: measured[k]["threads"],
        )
        gpu_keys = sorted(k for k, r in measured.items() if r["device"] != "cpu")
        for group in ([cpu_keys] if cpu_keys else []) + [[k] for k in gpu_keys]:
            here = [p for p in placed if p["roof"] in group]
            if not here:
                continue
            fig, ax = plt.subplots(figsize=SIZE)
            used = {dtype_name(p["result"].precision) for p in here}
            types = [t for t in PEAK_TYPES if t in used]  # fp32 first: the solid line
            colors = _RoofColors(types)
            lines = _roof_lines(ax, [measured[k] for k in group], here, colors)
            frameworks = _place_cells(ax, group, here, colors)
            what = "CPU" if measured[group[0]]["device"] == "cpu" else measured[group[0]]["where"]
            ax.set_title(f"Roofline: {m.short}, {what}")
            place_legend(ax, lines + frameworks)
            slug = "cpu" if what == "CPU" else group[0].replace(":", "")
            path = save_figure(fig, folder / f"roofline-{mi}-{slug}.png")
            out.append((f"Roofline of {m.short}, {what}: each cell under its roofs", path))
    return {"roofline": out}


@dataclass(frozen=True)
class _RoofColors:
    """One color per (roof, type): a roof's cells take its lines' colors."""

    types: list[str]

    def __call__(self, i: int, t: str) -> str:
        from xfbench.report.plots import COLORS

        return COLORS[(i * len(self.types) + self.types.index(t)) % len(COLORS)]


def _roof_lines(ax, group: list[dict], here: list[dict], color: _RoofColors) -> int:
    """Each roof's lines (measured solid for fp32, dash-dotted for the others; a GPU's
    datasheet dotted) over the cells' intensities and the ridges; how many were drawn."""
    import numpy as np

    types = color.types
    ridges = [
        r["peaks_tflops"][t] * 1e3 / r["bandwidth_gbps"]
        for r in group
        for t in types
        if t in r["peaks_tflops"]
    ]
    xs = np.geomspace(
        min(p["intensity"] for p in here) / 4,
        max(max(p["intensity"] for p in here), *ridges) * 4,
        200,
    )
    lines = 0
    for i, r in enumerate(group):
        label = r["where"] if r["device"] == "cpu" else "measured"
        sheet = gpu_for(r["device_name"]) if r["device"] != "cpu" else None
        for j, t in enumerate(types):
            if t in r["peaks_tflops"]:
                style = "-" if j == 0 else "-."
                _roof_line(
                    ax,
                    xs,
                    r["bandwidth_gbps"],
                    r["peaks_tflops"][t],
                    color=color(i, t),
                    linestyle=style,
                    label=f"roof, {label}, {t}",
                )
                lines += 1
        for t in types:
            if sheet and t in sheet.peaks_tflops:
                _roof_line(
                    ax,
                    xs,
                    sheet.memory_gbps,
                    sheet.peaks_tflops[t],
                    color=color(i, t),
                    linestyle=":",
                    label=f"datasheet, {sheet.name}, {t}",
                )
                lines += 1
    return lines


def _place_cells(ax, group: list[str], here: list[dict], color) -> int:
    """Each cell at its intensity and achieved GFLOP/s, a marker per framework (in the
    legend) and its roof's color; log-log axes. How many frameworks."""
    from xfbench.report.plots import MARKERS

    frameworks = sorted({p["result"].framework for p in here})
    for p in here:
        i = group.index(p["roof"])
        f = frameworks.index(p["result"].framework)
        xy = (p["intensity"], p["achieved_tflops"] * 1e3)
        ax.scatter(
            *xy,
            color=color(i, dtype_name(p["result"].precision)),
            marker=MARKERS[f % len(MARKERS)],
            s=22,
        )
        ax.annotate(p["result"].network, xy, fontsize=6, xytext=(3, 2), textcoords="offset points")
    for f, name in enumerate(frameworks):  # the markers' legend
        ax.scatter([], [], color="grey", marker=MARKERS[f % len(MARKERS)], label=display(name))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity, FLOP/byte (lower bound on traffic)")
    ax.set_ylabel("GFLOP/s")
    return len(frameworks)
