"""The GEMM suite's part of the report (xfbench/report/suites.py): the best TFLOP/s measured
per device, dtype and CPU thread count, which are the peaks Table 7's cells and the
roofline are set against (`peaks`); its failed cells; TFLOP/s against size per dtype;
its published figures beside ours (`anchors`); and its section of the acceptance
summary, with CuPy against torch.matmul (`acceptance`)."""

from __future__ import annotations

from pathlib import Path

from xfbench.gemm import compare
from xfbench.gemm.best import fill_share_of_best
from xfbench.gemm.measure import KIND
from xfbench.harness.threads import marks
from xfbench.published import Anchor, gpu_for
from xfbench.records import number
from xfbench.report.api import (
    Anchors,
    Entry,
    FromOutput,
    Hooks,
    Machine,
    Part,
    Report,
    Table,
    as_text,
    dtype_name,
    integer,
    legend_caption,
    number_text,
    plain,
)

# the published figures it stands beside (xfbench/published.toml), and what a table calls them
ANCHORS = {"gemm": "GEMM"}
TITLE = "Measured GEMM peak"
# CuPy's TFLOP/s over torch.matmul's at a size and type both ran: the acceptance run's
# goal (the issue that set it: CuPy's bf16 GEMM within 5 % of torch.matmul in one run)
CUPY_OVER_TORCH_MIN = 0.95
ACCEPTANCE_OUTPUT = "gemm.json"  # what the acceptance run's GEMM step writes


def read(entry: Entry) -> tuple[dict | None, str | None]:
    """An entry normalised: implementation, dtype, tflops, device, device_name, size (n of
    an n x n x n product; "size", else "n", else "m"), threads (CPU only), its marks."""
    extra = entry.extra
    tflops = number(extra.get("tflops"))
    if tflops is None or tflops <= 0:
        return None, "GEMM entry without a positive tflops"
    device = str(extra.get("device") or "cpu")
    size = next(
        (
            number(extra.get(k))
            for k in ("size", "n", "m")
            if 0 < (number(extra.get(k)) or 0) < 2**31
        ),
        None,
    )
    threads = extra.get("threads")
    name = extra.get("implementation") or extra.get("impl")  # the GEMM suite writes "impl"
    return {
        "status": "ok",
        "implementation": str(name),
        "dtype": str(extra.get("dtype", "fp32")),
        "tflops": tflops,
        "device": device,
        "device_name": str(extra.get("device_name") or device),
        "size": size,
        "threads": integer(threads, None) if device == "cpu" and threads is not None else None,
        "seconds_per_call": number(extra.get("seconds_per_call")),
        # the marks of the harness's CpuMeter (absent in older files: no mark)
        "contended": extra.get("contended") is True,
        "thread_shortfall": extra.get("thread_shortfall") is True,
        "source": entry.source,
    }, None


def measured(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("status") == "ok"]


def gpu_workloads(m: Machine) -> list:
    """Its GPU products as workloads bound by arithmetic (report/gpu_models.py); their
    records hold a median, no interval."""
    from xfbench.report.api import Workload

    return [
        Workload(device_name=r["device_name"], precision=r["dtype"], bound="compute",
                 what=f"GEMM {r['size']} {r['dtype']}, {r['implementation']}",
                 seconds=r["seconds_per_call"])
        for r in measured(m.of(KIND))
        if r["device"] != "cpu" and r.get("seconds_per_call")
    ]  # fmt: skip


def peaks(m: Machine) -> dict[tuple[str, str, int | None], float]:
    """Best measured TFLOP/s per (device: "cpu" or the GPU's name, dtype, CPU threads or
    None for any)."""
    found: dict[tuple[str, str, int | None], float] = {}
    for g in measured(m.of(KIND)):
        dev = "cpu" if g["device"] == "cpu" else g["device_name"]
        dtype = dtype_name(g["dtype"])
        for key in {(dev, dtype, g["threads"]), (dev, dtype, None)}:
            found[key] = max(found.get(key, 0.0), g["tflops"])
    return found


def anchor_matches(m: Machine, anchor: Anchor) -> list[dict]:
    """Our products on a GPU of the anchor's model at its type and size."""
    return [
        {
            "device_name": g["device_name"],
            "what": g["implementation"],
            "ours": g["tflops"],
            "ours_setting": f"n {g['size']:g}",
        }
        for g in measured(m.of(KIND))
        if g["device"] != "cpu"
        and g["dtype"] == anchor.precision
        and g["size"] == anchor.n
        and gpu_for(g["device_name"]) == anchor.gpu
    ]


def sections(report: Report, plots: list[tuple[str, Path]]) -> list[Part]:
    table = peak_table(report)
    failures = [
        f"{m.label}: {r.get('framework') or r.get('impl', '?')} {r.get('shape', '')} "
        f"{r.get('dtype', '')} on {r.get('device', '?')}: {r.get('status')}: {r.get('reason')}"
        for m in report.machines
        for r in m.of(KIND)
        if r.get("status") != "ok"
    ]
    if not (table or failures):
        return []
    return [
        Part(
            # the table heads the section; without one, the failures need a heading of theirs
            title="" if table else TITLE,
            tables=[table] if table else [],
            level=2,
            items_title="GEMM cells that gave no number",
            items=failures,
            plots=plots,
        )
    ]


def peak_table(report: Report) -> Table | None:
    best: dict[tuple, dict] = {}
    for m in report.machines:
        for g in measured(m.of(KIND)):
            key = (m.short, g["device_name"], g["dtype"], g["threads"])
            if key not in best or g["tflops"] > best[key]["tflops"]:
                best[key] = g
    if not best:
        return None
    several = len(report.machines) > 1
    rows = [
        ([as_text(k[0])] if several else [])
        + [
            as_text(k[1] + (f" {k[3]}t" if k[3] is not None else "")),
            as_text(k[2]),
            as_text(g["implementation"]),
            as_text(number_text(g["size"], "g")),
            as_text(number_text(g["tflops"], ".4g") + marks(g)),
        ]
        for k, g in sorted(best.items(), key=lambda kv: str(kv[0]))
    ]
    return Table(
        TITLE,
        (["machine"] if several else [])
        + ["device", "dtype", "implementation", "size", "best TFLOP/s"],
        rows,
        caption=(
            "The best GEMM TFLOP/s per device and dtype: the peak that achieved "
            "TFLOP/s are compared with. " + legend_caption(best.values())
        ).strip(),
        anchor="gemm",
        text_cols=(4 if several else 3),
    )


def plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    """TFLOP/s against matrix size, one plot per dtype, a line per device and
    implementation."""
    from xfbench.report.api import SIZE, place_legend, plt, save_figure

    series: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for machine in report.machines:
        for g in measured(machine.of(KIND)):
            if g["size"] is None:
                continue
            name = (
                f"{g['implementation']} on {g['device_name']}"
                + (f" {g['threads']}t" if g["threads"] is not None else "")
                + (f" ({machine.short})" if len(report.machines) > 1 else "")
            )
            series.setdefault(dtype_name(g["dtype"]), {}).setdefault(name, []).append(
                (g["size"], g["tflops"])
            )
    out = []
    for dtype, lines in sorted(series.items()):
        fig, ax = plt.subplots(figsize=SIZE)
        for name, points in sorted(lines.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        sizes = sorted({p[0] for points in lines.values() for p in points})
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [f"{x:g}" for x in sizes])
        ax.minorticks_off()
        ax.set_xlabel("matrix size (n for n x n x n)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"GEMM {dtype}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        place_legend(ax, len(lines))
        path = folder / f"gemm-{plain(dtype)}.png"
        out.append((f"GEMM TFLOP/s against size, {dtype}", save_figure(fig, path)))
    return out


def acceptance(out: Path, read) -> str:
    """Its section of the acceptance summary, from the GEMM step's gemm.json (read: the
    summary's reader, which says in one line what is wrong with a file): every product's
    table, and CuPy over torch.matmul per size and type against CUPY_OVER_TORCH_MIN."""
    path = out / ACCEPTANCE_OUTPUT
    if not path.exists():
        return ""
    read(path)
    records = compare.load([str(path)])
    if not records:
        return "## GEMM\n\nno GEMM cell gave a record"
    fill_share_of_best(records)
    lines = ["## GEMM", "", compare.table(records), ""]
    ratios = compare.cupy_over_torch(records)
    for (m, n, k, dtype, device), ratio in sorted(ratios.items()):
        verdict = "met" if ratio >= CUPY_OVER_TORCH_MIN else "NOT MET"
        lines.append(
            f"- CuPy / torch.matmul at {m}x{n}x{k} {dtype} on {device}: {ratio:.3f} "
            f"(needed >= {CUPY_OVER_TORCH_MIN}): {verdict}"
        )
    if not ratios:
        lines.append("- CuPy / torch.matmul: no size and type where both ran")
    return "\n".join(lines)


# Its part of the report (xfbench/report/suites.py says what each hook is).
REPORT = Hooks(
    sections={"suites": sections},
    plots=plots,
    read=read,
    peaks=peaks,
    anchors=Anchors(ANCHORS, anchor_matches),
    gpu_workloads=gpu_workloads,
    acceptance={"GEMM": FromOutput(ACCEPTANCE_OUTPUT, acceptance)},
)
